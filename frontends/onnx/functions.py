"""ONNX ops defined by a function body in their schema (Attention,
RotaryEmbedding, CenterCropPad, SwiGLU, ...) and without a lowering of their
own become that body: ONNX's definition of the op in ops we lower, as onnx-mlir
and onnxruntime expand such functions. The body is written for the node at
hand (context-dependent bodies depend on its inputs' types), its values are
renamed `<node>/<name>`, and attribute references take the node's values or
the schema's defaults.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import onnx
import onnx.defs
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto

from forge_opt.frontends.onnx.graph import node_label, rename_reads, subgraphs
from forge_opt.frontends.onnx.lowered_ops import LOWERED_OPS

#: Random ops stay random in their bodies; they keep their own diagnostic.
_NOT_EXPANDED = frozenset({"Bernoulli"})


@cache
def expandable(op_type: str, opset: int) -> bool:
    """A default-domain op that has no lowering but a function body at `opset`."""
    if not isinstance(op_type, str) or op_type in LOWERED_OPS or op_type in _NOT_EXPANDED:
        return False  # (bytes: a name that is not UTF-8, which the importer reports)
    try:
        schema = _schema(op_type, opset)
    except onnx.defs.SchemaError:
        return False
    return schema.has_function or schema.has_context_dependent_function


def function_body(node: NodeProto, input_types: list[TypeProto | None], opset: int) -> FunctionProto | None:
    """The schema's body for this node, or None when it has none here (its
    inputs' types unknown, or a body written for ops of another opset)."""
    schema = _schema(node.op_type, opset)
    body = FunctionProto()
    if schema.has_context_dependent_function:
        # positional, an omitted input an empty type (what ONNX's body builders read)
        if any(t is None for t, name in zip(input_types, node.input) if name):
            return None
        types = [(t or TypeProto()).SerializeToString() for t in input_types]
        raw = schema.get_context_dependent_function_with_opset_version(opset, node.SerializeToString(), types)
    else:
        raw = schema.get_function_with_opset_version(opset)
    if not raw:
        return None
    body.ParseFromString(raw)
    written_for = next((o.version for o in body.opset_import if o.domain in ("", "ai.onnx")), opset)
    if written_for != opset and not all(_same_schema(n.op_type, written_for, opset) for n in body.node):
        # a body of control flow (Range's Loop) stays declined: the op folds whole, or is refused by name
        return None if any(subgraphs(n) for n in body.node) else _converted(body, written_for, opset)
    return body


def _converted(body: FunctionProto, written_for: int, opset: int) -> FunctionProto | None:
    """A body written for another opset (DynamicQuantizeLinear's is opset
    11's), its nodes rewritten for `opset` by ONNX's version converter; None
    where the converter cannot."""
    import onnx.version_converter

    graph = onnx.helper.make_graph(
        list(body.node), "body", [onnx.helper.make_empty_tensor_value_info(x) for x in body.input],
        [onnx.helper.make_empty_tensor_value_info(x) for x in body.output],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", written_for)])
    try:
        converted = onnx.version_converter.convert_version(model, opset)
    except Exception:  # the converter raises its own errors for steps it lacks
        return None
    out = FunctionProto()
    out.CopyFrom(body)
    del out.node[:]
    out.node.extend(converted.graph.node)
    del out.opset_import[:]
    out.opset_import.append(onnx.helper.make_opsetid("", opset))
    return out


def _schema(op_type: str, opset: int) -> Any:
    """The op's schema. Typed `Any`: onnx's stub for OpSchema lacks the
    function-body accessors its binding has (`has_function`, ...)."""
    return onnx.defs.get_schema(op_type, opset, "")


def _same_schema(op_type: str, a: int, b: int) -> bool:
    try:
        return onnx.defs.get_schema(op_type, a, "").since_version == onnx.defs.get_schema(op_type, b, "").since_version
    except onnx.defs.SchemaError:
        return False


def expand(node: NodeProto, body: FunctionProto, opset: int) -> list[NodeProto]:
    """The body's nodes computing `node`: formal inputs and outputs bound to
    the node's, every other value renamed under the node's label."""
    label = node_label(node)
    rename = {formal: actual for formal, actual in zip(body.input, node.input)}
    rename.update({formal: "" for formal in body.input[len(node.input) :]})  # omitted optional inputs
    outputs = {formal: actual for formal, actual in zip(body.output, node.output) if actual}
    given = {a.name: a for a in node.attribute}
    defaults = {
        name: a.default_value
        for name, a in onnx.defs.get_schema(node.op_type, opset, "").attributes.items()
        if a.default_value.type != AttributeProto.UNDEFINED
    }
    defaults.update({a.name: a for a in body.attribute_proto})
    nodes = []
    for inner in body.node:
        copy = NodeProto()
        copy.CopyFrom(inner)
        copy.name = f"{label}/{node_label(inner)}"
        copy.input[:] = [rename.get(n, f"{label}/{n}") if n else "" for n in inner.input]
        for sub in subgraphs(copy) if copy.attribute else ():
            rename_reads(sub, rename)
        for i, out in enumerate(inner.output):
            if out:
                copy.output[i] = rename[out] = outputs.get(out, f"{label}/{out}")
        attributes = []
        for a in copy.attribute:
            if not a.ref_attr_name:
                attributes.append(a)
                continue
            source = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
            if source is not None:  # a reference to an attribute neither given nor defaulted is dropped
                value = AttributeProto()
                value.CopyFrom(source)
                value.name = a.name
                attributes.append(value)
        del copy.attribute[:]
        copy.attribute.extend(attributes)
        nodes.append(copy)
    return nodes


