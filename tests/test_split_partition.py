"""The grouping of a placed graph into sub-models: convex, one placement each,
between A + 1 and A + 2 of them, none two that could merge, on any DAG."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from forge_opt.transforms.partition import Group, partition, placement_changes


@st.composite
def placed_dags(draw, max_nodes: int = 24):
    """A DAG on nodes 0..n-1 (edges only from lower to higher), each placed."""
    n = draw(st.integers(1, max_nodes))
    preds = {v: sorted(draw(st.sets(st.integers(0, v - 1), max_size=3))) if v else [] for v in range(n)}
    device = {v: draw(st.booleans()) for v in range(n)}
    return list(range(n)), preds, device


def _index(groups: list[Group]) -> dict[int, tuple[int, int]]:
    return {v: (g, i) for g, group in enumerate(groups) for i, v in enumerate(group.nodes)}


def _reaches(groups: list[Group], preds) -> list[set[int]]:
    where = {v: g for g, group in enumerate(groups) for v in group.nodes}
    succs = [set() for _ in groups]
    for v, ps in preds.items():
        for u in ps:
            if where[u] != where[v]:
                succs[where[u]].add(where[v])
    reach = [set() for _ in groups]
    for g in reversed(range(len(groups))):
        for s in succs[g]:
            reach[g] |= {s} | reach[s]
    return reach


@settings(max_examples=300, deadline=None)
@given(placed_dags())
def test_groups_run_in_order_and_keep_every_placement(graph):
    order, preds, device = graph
    groups = partition(order, preds, device)
    index = _index(groups)
    assert sorted(index) == order, "every node in exactly one group"
    for group in groups:
        assert all(device[v] == group.device for v in group.nodes)
    for v, ps in preds.items():
        for u in ps:
            assert index[u] < index[v], f"{u} -> {v} runs backwards"


@settings(max_examples=300, deadline=None)
@given(placed_dags())
def test_between_a_plus_one_and_a_plus_two_and_none_mergeable(graph):
    order, preds, device = graph
    groups = partition(order, preds, device)
    changes = placement_changes(order, preds, device)
    assert changes + 1 <= len(groups) <= changes + 2
    reach = _reaches(groups, preds)
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            if groups[i].device == groups[j].device:
                assert any(j in reach[k] for k in reach[i]), f"groups {i} and {j} could merge"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_a_chain_splits_into_a_plus_one(placements):
    order = list(range(len(placements)))
    preds = {v: [v - 1] if v else [] for v in order}
    device = dict(enumerate(placements))
    groups = partition(order, preds, device)
    assert len(groups) == placement_changes(order, preds, device) + 1


@settings(max_examples=200, deadline=None)
@given(placed_dags())
def test_running_the_groups_in_order_computes_the_graph(graph):
    """Each node computes a number from its predecessors'; running the groups
    one after another, each seeing only what earlier groups and itself made,
    gives every node's number."""
    order, preds, device = graph

    def compute(v, values):
        return (v * 31 + sum(values[u] * (k + 2) for k, u in enumerate(preds[v]))) % 1_000_003

    whole: dict[int, int] = {}
    for v in order:
        whole[v] = compute(v, whole)
    seen: dict[int, int] = {}
    for group in partition(order, preds, device):
        made = dict(seen)
        for v in group.nodes:
            made[v] = compute(v, made)
        seen = made
    assert seen == whole


@settings(max_examples=200, deadline=None)
@given(placed_dags(), st.integers(1, 4))
def test_small_device_groups_go_to_the_cpu(graph, least):
    order, preds, device = graph
    groups = partition(order, preds, device, min_device_ops=least)
    assert all(len(g.nodes) >= least for g in groups if g.device)
    assert all(not device[v] for g in groups if not g.device for v in g.nodes if not device[v])


def test_a_cpu_op_in_a_device_chain_gives_three():
    order = ["conv", "relu", "topk", "gather", "add"]
    preds = {"conv": [], "relu": ["conv"], "topk": ["relu"], "gather": ["topk"], "add": ["gather"]}
    device = {"conv": True, "relu": True, "topk": False, "gather": True, "add": True}
    groups = partition(order, preds, device)
    assert [(g.device, g.nodes) for g in groups] == [
        (True, ["conv", "relu"]), (False, ["topk"]), (True, ["gather", "add"]),
    ]


def test_independent_branches_of_one_placement_merge():
    """A CPU source feeding the second device op: phases alone would give
    device, cpu, device; the two device groups join no path through the CPU
    one from the first, so they merge."""
    order = ["a", "b", "c"]
    preds = {"a": [], "b": [], "c": ["b"]}
    device = {"a": True, "b": False, "c": True}
    groups = partition(order, preds, device)
    assert len(groups) == 2 and sorted(g.device for g in groups) == [False, True]
