"""What an ONNX node reads and how it is named: shared by the importer and
the compile-time resolution of shapes and control flow."""

from __future__ import annotations

from collections.abc import Iterable

import onnx
from onnx import AttributeProto, GraphProto, NodeProto

from forge_opt.diagnostics import text


def node_label(node: NodeProto) -> str:
    """The node's name; an unnamed node is named after its op type and its
    first output, which ONNX requires to be unique."""
    if node.name:
        return text(node.name)
    first = next((o for o in node.output if o), "")
    return f"{node.op_type}:{first}" if first else node.op_type


def describe_node(node: NodeProto) -> str:
    """How errors name a node: `node 'conv1' (Conv)`, or `a Conv node`."""
    return f"node '{node.name}' ({node.op_type})" if node.name else f"a {node.op_type} node"


def subgraphs(node: NodeProto) -> list[GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == AttributeProto.GRAPH else list(a.graphs))]


def node_reads(node: NodeProto) -> Iterable[str]:
    """The values a node reads, including outer values its subgraphs read."""
    yield from (n for n in node.input if n)
    if node.attribute:
        for g in subgraphs(node):
            yield from outer_reads(g)


def outer_reads(g: GraphProto) -> set[str]:
    """The values a subgraph reads from its enclosing scopes."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    reads: set[str] = set()
    for node in g.node:
        reads.update(n for n in node_reads(node) if n not in defined)
        defined.update(node.output)
    reads.update(o.name for o in g.output if o.name not in defined)
    return reads


def rename_reads(g: GraphProto, rename: dict[str, str]) -> None:
    """Rename, in place, what a nested subgraph reads from outside itself."""
    defined = {i.name for i in g.input} | {t.name for t in g.initializer}
    for node in g.node:
        node.input[:] = [rename[n] if n in rename and n not in defined else n for n in node.input]
        for sub in subgraphs(node) if node.attribute else ():
            rename_reads(sub, {k: v for k, v in rename.items() if k not in defined})
        defined.update(node.output)
    for o in g.output:
        if o.name in rename and o.name not in defined:
            # an output that is an outer value: read it through an Identity
            inner = f"{o.name}/outer"
            g.node.append(onnx.helper.make_node("Identity", [rename[o.name]], [inner]))
            o.name = inner


