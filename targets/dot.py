"""`-t dot`: the dataflow graph of a module at any stage, for Graphviz.

One box per op, labelled with its name and result shape, the ONNX node it
came from as its tooltip; one ellipse per function argument; an edge per
use. Render with `forge-opt MODEL -p onnx-to-forge -t dot | dot -Tsvg`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.dialects.func import FuncOp
from xdsl.ir import Attribute, SSAValue
from xdsl.utils.target import Target

from forge_opt.diagnostics import node_name


def _type(t: Attribute) -> str:
    if isinstance(t, TensorType):
        dims = "x".join("?" if d < 0 else str(d) for d in t.get_shape())
        return f"{dims}x{t.element_type}" if dims else str(t.element_type)
    return str(t)


def _quote(text: str) -> str:
    return json.dumps(text)


def emit_dot(module: ModuleOp, output: IO[str]) -> None:
    output.write("digraph forge_opt {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n")
    ids: dict[SSAValue, str] = {}
    counter = 0
    for func in (op for op in module.ops if isinstance(op, FuncOp)):
        name = func.sym_name.data
        output.write(f"  subgraph {_quote('cluster_' + name)} {{\n    label={_quote('@' + name)};\n")
        for i, arg in enumerate(func.body.block.args):
            nid = f"arg{counter}_{i}"
            ids[arg] = nid
            label = f"{arg.name_hint or f'arg{i}'}\n{_type(arg.type)}"
            output.write(f"    {nid} [shape=ellipse, label={_quote(label)}];\n")
        for op in func.body.walk():
            if op is func:
                continue
            counter += 1
            nid = f"op{counter}"
            for r in op.results:
                ids[r] = nid
            shapes = ", ".join(_type(r.type) for r in op.results)
            label = op.name + (f"\n{shapes}" if shapes else "")
            tooltip = node_name(op) or op.name
            output.write(f"    {nid} [shape=box, label={_quote(label)}, tooltip={_quote(tooltip)}];\n")
            for operand in op.operands:
                if operand in ids:
                    output.write(f"    {ids[operand]} -> {nid};\n")
        output.write("  }\n")
    output.write("}\n")


@dataclass(frozen=True)
class DotTarget(Target):
    name = "dot"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        emit_dot(module, output)
