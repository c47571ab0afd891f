"""Generate `dialects/onnx_ops.py`: one op per operator of ONNX's default
domain, in its newest form, from the schema registry of the installed `onnx`.

    python -m forge_opt.tools.gen_onnx_dialect            # rewrite the file
    python -m forge_opt.tools.gen_onnx_dialect --check    # exit 1 if stale

Operand, result and attribute names are the schema's. Attributes become
properties (int -> i64, float -> f32, ints/floats -> dense arrays, string ->
string, tensor -> elements attribute); graph attributes become regions.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.defs
from onnx import AttributeProto, helper

from forge_opt.tools.generated_file import generator_main

OUTPUT = Path(__file__).resolve().parent.parent / "dialects" / "onnx_ops.py"

_KIND = {
    AttributeProto.INT: "int",
    AttributeProto.FLOAT: "float",
    AttributeProto.STRING: "string",
    AttributeProto.INTS: "ints",
    AttributeProto.FLOATS: "floats",
    AttributeProto.STRINGS: "strings",
    AttributeProto.TENSOR: "tensor",
    AttributeProto.SPARSE_TENSOR: "sparse_tensor",
    AttributeProto.TYPE_PROTO: "type",
    AttributeProto.GRAPH: "graph",
    AttributeProto.TENSORS: "tensors",
    AttributeProto.GRAPHS: "graphs",
    AttributeProto.SPARSE_TENSORS: "sparse_tensors",
    AttributeProto.TYPE_PROTOS: "types",
}

_CONSTRAINT = {
    "int": "IntegerAttr[I64]",
    "float": "FloatAttr",
    "string": "StringAttr",
    "ints": "DenseArrayBase.constr(i64)",
    "floats": "DenseArrayBase.constr(f32)",
    "strings": "ArrayAttr[StringAttr]",
}

# Ops whose results are not a function of their inputs: never merged or removed
# as if they were.
_NOT_PURE = {"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}

_OPTION = {
    onnx.defs.OpSchema.FormalParameterOption.Single: "SINGLE",
    onnx.defs.OpSchema.FormalParameterOption.Optional: "OPTIONAL",
    onnx.defs.OpSchema.FormalParameterOption.Variadic: "VARIADIC",
}


def _default_literal(kind: str, proto: AttributeProto) -> str | None:
    if proto.type == AttributeProto.UNDEFINED:
        return None
    value = helper.get_attribute_value(proto)
    if kind == "int":
        return f"IntegerAttr({int(value)}, i64)"
    if kind == "float":
        return f"FloatAttr({float(np.float32(value))!r}, f32)"
    if kind == "string":
        return f"StringAttr({value.decode()!r})"
    if kind == "ints":
        return f"DenseArrayBase.from_list(i64, {[int(v) for v in value]!r})"
    if kind == "floats":
        values = [float(np.float32(v)) for v in value]
        return f"DenseArrayBase.from_list(f32, {values!r})"
    if kind == "strings":
        return f"ArrayAttr([{', '.join(f'StringAttr({v.decode()!r})' for v in value)}])"
    return None


def _op_class(schema: onnx.defs.OpSchema) -> str:
    name = schema.name
    inputs = [(p.name, _OPTION[p.option]) for p in schema.inputs]
    outputs = [(p.name, _OPTION[p.option]) for p in schema.outputs]
    attrs = {n: _KIND[a.type] for n, a in sorted(schema.attributes.items())}  # pyright: ignore[reportArgumentType]
    graphs = [n for n, k in attrs.items() if k == "graph"]
    lines = [
        "@op_definition",
        f"class {name}Op(OnnxOp):",
        f'    """ONNX {name}, opset {schema.since_version}."""',
        "",
        f'    name = "onnx.{name}"',
        f'    ONNX_OP_TYPE: ClassVar[str] = "{name}"',
        f"    ONNX_SINCE_VERSION: ClassVar[int] = {schema.since_version}",
        "    ONNX_INPUTS: ClassVar[Params] = (" + "".join(f'("{n}", {k}), ' for n, k in inputs).rstrip() + ")",
        "    ONNX_OUTPUTS: ClassVar[Params] = (" + "".join(f'("{n}", {k}), ' for n, k in outputs).rstrip() + ")",
        "    ONNX_ATTRIBUTES: ClassVar[dict[str, str]] = {"
        + ", ".join(f'"{n}": "{k}"' for n, k in attrs.items() if k != "graph")
        + "}",
    ]
    if graphs:
        names = "".join(f'"{g}", ' for g in graphs).rstrip()
        lines.append(f"    ONNX_GRAPHS: ClassVar[tuple[str, ...]] = ({names})")
    lines.append("")
    defs = {"SINGLE": "operand_def()", "OPTIONAL": "opt_operand_def()", "VARIADIC": "var_operand_def()"}
    for n, k in inputs:
        lines.append(f"    {n} = {defs[k]}")
    rdefs = {"SINGLE": "result_def()", "OPTIONAL": "opt_result_def()", "VARIADIC": "var_result_def()"}
    for n, k in outputs:
        lines.append(f"    {n} = {rdefs[k]}")
    for n, k in attrs.items():
        if k == "graph":
            lines.append(f'    {n} = region_def("single_block")')
            continue
        constraint = _CONSTRAINT.get(k, "Attribute")
        schema_attr = schema.attributes[n]
        default = _default_literal(k, schema_attr.default_value)
        if default is not None:
            lines.append(f"    {n} = prop_def({constraint}, {default})")
        elif schema_attr.required:
            lines.append(f"    {n} = prop_def({constraint})")
        else:
            lines.append(f"    {n} = opt_prop_def({constraint})")
    options = []
    if sum(k != "SINGLE" for _, k in inputs) > 1:
        options.append("AttrSizedOperandSegments(as_property=True)")
    if sum(k != "SINGLE" for _, k in outputs) > 1:
        options.append("AttrSizedResultSegments(as_property=True)")
    if name not in _NOT_PURE:
        lines.append("    traits = traits_def(Pure())")
    if options:
        lines.append(f"    irdl_options = ({', '.join(options)},)")
    return "\n".join(lines)


def default_domain_schemas() -> list[onnx.defs.OpSchema]:
    return sorted(
        (s for s in onnx.defs.get_all_schemas() if s.domain == ""),
        key=lambda s: s.name,
    )


def generate() -> str:
    schemas = default_domain_schemas()
    header = f'''"""ONNX operators of the default domain, newest forms (onnx {onnx.__version__}).

GENERATED by `python -m forge_opt.tools.gen_onnx_dialect`; do not edit.
"""

# ruff: noqa: E501

from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    AttrSizedOperandSegments,
    AttrSizedResultSegments,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)

from xdsl.traits import Pure

from forge_opt.dialects.irdl_fast import op_definition
from forge_opt.dialects.onnx_base import OPTIONAL, SINGLE, VARIADIC, OnnxOp

Params = tuple[tuple[str, str], ...]

ONNX_VERSION = "{onnx.__version__}"
'''
    body = "\n\n\n".join(_op_class(s) for s in schemas)
    names = ",\n".join(f"    {s.name}Op" for s in schemas)
    footer = f"\n\n\nONNX_OPS = (\n{names},\n)\n"
    return header + "\n\n" + body + footer


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, OUTPUT, generate, "forge_opt.tools.gen_onnx_dialect", argv)


if __name__ == "__main__":
    sys.exit(main())
