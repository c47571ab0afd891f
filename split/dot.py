"""The split as a Graphviz graph: one cluster per sub-model, coloured by
where it runs, its nodes joined by the tensors they pass."""

from __future__ import annotations

import json

from forge_opt.frontends.onnx import node_label
from forge_opt.plan.graph_infos import DEVICE
from forge_opt.split.partition import Partition

_COLOURS = {DEVICE: "#cfe2ff", "cpu": "#ffe0b2"}


def split_dot(plan: Partition) -> str:
    lines = ["digraph split {", "  rankdir=TB;", '  node [shape=box, style="rounded,filled", fillcolor=white];']
    made: dict[str, str] = {}  # tensor -> the id of the node that makes it, in the sub-model that exports it
    edges: list[tuple[str, str, str]] = []
    for n, sub in enumerate(plan.graphs):
        lines.append(f"  subgraph cluster_{n} {{")
        title = json.dumps(f"graph_{n} ({sub.device})")
        lines.append(f'    label={title}; style=filled; fillcolor="{_COLOURS[sub.device]}";')
        local: dict[str, str] = {}
        for i, node in enumerate(sub.nodes):
            ident = f"g{n}_{i}"
            label = json.dumps(node_label(node) + "\n" + node.op_type)
            lines.append(f"    {ident} [label={label}];")
            for x in node.input:
                source = local.get(x) or made.get(x)
                if source:
                    edges.append((source, ident, x))
            for out in node.output:
                if out:
                    local[out] = ident
        lines.append("  }")
        for out in sub.outputs:
            made.setdefault(out, local[out])
    lines += [f"  {a} -> {b} [label={json.dumps(t)}];" for a, b, t in edges]
    lines.append("}")
    return "\n".join(lines) + "\n"
