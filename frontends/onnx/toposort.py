"""A graph's nodes in an order where each reads only what is made before it
(ONNX requires it; converters do not always write it)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from onnx import NodeProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.graph import describe_node, node_reads

# -- the graph --------------------------------------------------------------------


def _in_order(nodes: list[NodeProto], known: set[str]) -> bool:
    """Whether every node reads only values made before it and no value is
    made twice: the order ONNX asks for, so the usual case. False too when a
    name is not text, which the slow path then reports."""
    made = set(known)
    for node in nodes:
        if type(node.op_type) is bytes or type(node.name) is bytes or type(node.domain) is bytes:
            return False
        for name in node.input:
            if name and name not in made:
                return False
        if node.attribute and not made.issuperset(node_reads(node)):
            return False
        for out in node.output:
            if out:
                if out in made:
                    return False
                made.add(out)
    return not any(type(name) is bytes for name in made)  # every name read is in `made`


def toposort(nodes: list[NodeProto], known: set[str], graph: str) -> list[NodeProto]:
    """Nodes in an order where every value is produced before it is used;
    diagnostics for undefined values, doubly produced values and cycles."""
    if _in_order(nodes, known):
        return nodes
    check_text(nodes, known)
    producer: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for out in node.output:
            if not out:
                continue
            if out in producer or out in known:
                first = nodes[producer[out]] if out in producer else None
                by = describe_node(first) if first else "a graph input or initializer"
                raise ForgeOptError(f"{describe_node(node)}: output '{out}' is already produced by {by}")
            producer[out] = i
    users: list[list[int]] = [[] for _ in nodes]
    pending = [0] * len(nodes)
    for i, node in enumerate(nodes):
        deps = set()
        for name in node_reads(node):
            if name in producer:
                deps.add(producer[name])
            elif name not in known:
                raise ForgeOptError(
                    f"{describe_node(node)}: input '{name}' is not produced by any node, graph input or initializer"
                )
        if i in deps:
            raise ForgeOptError(f"{describe_node(node)}: uses its own output (a cycle)")
        pending[i] = len(deps)
        for d in deps:
            users[d].append(i)
    # Kahn's algorithm, always taking the earliest ready node, so a graph
    # that is already in order keeps its order.
    ready = [i for i in range(len(nodes)) if pending[i] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = next(n for i, n in enumerate(nodes) if pending[i] > 0)
        raise ForgeOptError(f"graph '{graph}' has a cycle through {describe_node(stuck)}")
    if order != sorted(order):
        return [nodes[i] for i in order]
    return nodes


def check_text(nodes: Iterable[NodeProto], names: Iterable[str | bytes]) -> None:
    """Names must be text; protobuf returns bytes for invalid UTF-8."""
    names = list(names)
    for node in nodes:
        names += [node.name, node.op_type, node.domain, *node.input, *node.output]
    if any(isinstance(n, bytes) for n in names):
        raise UnicodeError("invalid UTF-8")
