"""Grouping a placed graph into sub-models (AutoSplit's `split`), with a
bound on how many.

The graph is any DAG whose nodes are each placed on the device or on the
CPU. The sub-models must be convex: no path leaves one and comes back, so
they run one after another in a topological order. Let A be the largest
number of placement changes along any path. Then every valid split has at
least A + 1 sub-models, and this one has at most A + 2:

1. Phases. Each node gets the smallest phase of its placement's parity
   (device even, CPU odd) that is at least the phase of each predecessor
   placed like it and above the phase of each predecessor placed otherwise.
   Phases never decrease along an edge, so the nodes of one phase form a
   convex group of one placement, and phase order is a topological order.
   By induction a node's phase is at most its placement changes plus 1.
2. Merges. Two groups of one placement merge when no path joins them
   through a third group (which would make the merge a cycle), until no
   two can. On a chain that leaves exactly A + 1.
3. Small device groups (fewer than `min_device_ops` nodes) move to the CPU,
   and the split is made again.

Phases generalise onnxruntime's waves over a topological order to two
placements; the merges are TVM's and AutoSplit's, with the same no-cycle check.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Node = TypeVar("Node", bound=Hashable)


@dataclass
class Group(Generic[Node]):
    """One sub-model: its placement and its nodes, in the graph's order."""

    device: bool
    nodes: list[Node]


def read_through(
    nodes: Iterable[Node], producers: Callable[[Node], Iterable[Node]], free: Collection[Node]
) -> tuple[set[Node], set[Node]]:
    """What `nodes` read, looking through `free` nodes (constants and what
    folds, which every sub-model may recompute): the other nodes reached,
    and the free ones on the way. Each free node is walked once."""
    reached: set[Node] = set()
    passed: set[Node] = set()
    stack = [p for n in nodes for p in producers(n)]
    while stack:
        u = stack.pop()
        if u not in free:
            reached.add(u)
        elif u not in passed:
            passed.add(u)
            stack.extend(producers(u))
    return reached, passed


def placement_changes(order: Sequence[Node], preds: Mapping[Node, Sequence[Node]], device: Mapping[Node, bool]) -> int:
    """A: the most placement changes along any path (0 for an empty graph)."""
    changes: dict[Node, int] = {}
    for v in order:
        changes[v] = max((changes[u] + (device[u] != device[v]) for u in preds.get(v, ())), default=0)
    return max(changes.values(), default=0)


def _phases(
    order: Sequence[Node], preds: Mapping[Node, Sequence[Node]], device: Mapping[Node, bool]
) -> dict[Node, int]:
    phase: dict[Node, int] = {}
    for v in order:
        p = 0
        for u in preds.get(v, ()):
            p = max(p, phase[u] if device[u] == device[v] else phase[u] + 1)
        if (p % 2 == 0) != device[v]:  # device phases are even, CPU phases odd
            p += 1
        phase[v] = p
    return phase


def _reach(count: int, edges: set[tuple[int, int]]) -> list[set[int]]:
    """For each group, the groups reachable from it (itself excluded)."""
    succs: list[set[int]] = [set() for _ in range(count)]
    for a, b in edges:
        succs[a].add(b)
    reach: list[set[int]] = [set() for _ in range(count)]
    for g in reversed(range(count)):  # groups are in a topological order
        for s in succs[g]:
            reach[g] |= {s} | reach[s]
    return reach


def _merge(
    groups: list[Group[Node]], group_of: dict[Node, int], preds: Mapping[Node, Sequence[Node]]
) -> list[Group[Node]]:
    """Merge groups of one placement while no path through a third group
    joins them; the result stays in a topological order."""
    while True:
        edges = {(group_of[u], group_of[v]) for v in group_of for u in preds.get(v, ()) if group_of[u] != group_of[v]}
        reach = _reach(len(groups), edges)
        pair = next(
            (
                (i, j)
                for i in range(len(groups))
                for j in range(i + 1, len(groups))
                if groups[i].device == groups[j].device and not any(j in reach[k] for k in reach[i] if k != j)
            ),
            None,
        )
        if pair is None:
            return groups
        i, j = pair
        # Groups between i and j that i reaches must come after the merged
        # group, those reaching j before it; neither can be both (no path i ->
        # k -> j). Keep the others where they are.
        between = range(i + 1, j)
        after = [k for k in between if k in reach[i]]
        before = [k for k in between if k not in reach[i]]
        merged: Group[Node] = Group(groups[i].device, groups[i].nodes + groups[j].nodes)
        order = [*range(i), *before, None, *after, *range(j + 1, len(groups))]
        groups = [merged if k is None else groups[k] for k in order]
        group_of = {v: n for n, g in enumerate(groups) for v in g.nodes}


def partition(
    order: Sequence[Node],
    preds: Mapping[Node, Sequence[Node]],
    device: Mapping[Node, bool],
    min_device_ops: int = 1,
) -> list[Group[Node]]:
    """The sub-models, in an order to run them. `order` lists every node in a
    topological order, `preds` their predecessors, `device` their placement."""
    placed = dict(device)
    while True:
        phase = _phases(order, preds, placed)
        by_phase: dict[int, list[Node]] = {}
        for v in order:
            by_phase.setdefault(phase[v], []).append(v)
        groups = [Group(p % 2 == 0, by_phase[p]) for p in sorted(by_phase)]
        group_of = {v: n for n, g in enumerate(groups) for v in g.nodes}
        groups = _merge(groups, group_of, preds)
        small = [g for g in groups if g.device and len(g.nodes) < min_device_ops]
        if not small:
            position = {v: n for n, v in enumerate(order)}
            for g in groups:
                g.nodes.sort(key=position.__getitem__)
            return groups
        for g in small:
            for v in g.nodes:
                placed[v] = False
