"""Pipeline stages: a model cut into S contiguous ranges of its nodes, one
per device, each holding only the weights (and KV cache) of its range and
sending the next only activations, as tt-metal's pipelined models run a
contiguous layer range per rank.

The nodes are taken in the graph's order, which is topological, so any cut
is a valid pipeline (every edge goes forward). Where the cuts fall is
`transforms/stage_cuts.py`'s rule, which `partition-for-forge{stages}`
shares: here the weights and crossing bytes are read from the ONNX graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, TypeProto, helper

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.graph import node_reads
from forge_opt.frontends.onnx.names import layer_key, layer_label
from forge_opt.transforms.stage_cuts import Cut, StageInfo, choose_cuts, crossing_bytes


def tensor_bytes(t: TensorProto) -> int:
    """An initializer's bytes, from its type and dims (its data may be external and not loaded)."""
    return int(np.prod(t.dims, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize


def value_bytes(t: TypeProto | None) -> int:
    """A value's bytes from its inferred type (0 where a size is unknown)."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return 0
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in t.tensor_type.shape.dim]
    return int(np.prod(dims, dtype=np.int64)) * helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type).itemsize


def stage_cuts(model: ModelProto, placed: Sequence[int], stages: int, types: Mapping[str, TypeProto],
               folded: Callable[[int], Iterable[int]] = lambda i: ()) -> Cut:
    """S - 1 cut positions into `placed` (node indices of `model`, in the
    graph's order) that balance the stages' stored weights; `folded(i)`:
    the folded nodes placed node i reads through (a weight's Transpose),
    whose weights its stage stores."""
    nodes = list(model.graph.node)
    sizes = {t.name: tensor_bytes(t) for t in model.graph.initializer}
    weight, seen = [], set()
    for i in placed:  # a weight is stored by the stage of its first reader (a tied one by each reader's)
        read = {x for j in (i, *folded(i)) for x in node_reads(nodes[j])}
        reads = [x for x in read if x in sizes and x not in seen]
        seen.update(reads)
        weight.append(sum(sizes[x] for x in reads))
    return choose_cuts([nodes[i].name for i in placed], weight, _crossing_bytes(nodes, placed, types), stages,
                       f"--stages {stages}")


#: how the cuts of a pipeline read from the model's annotations fall
GIVEN = "as the annotations place them"


def given_cuts(labels: Sequence[str], stage_of: Mapping[str, int], stages: int) -> Cut:
    """The cuts a pipeline's annotations give (`stage_of`: a stage by node
    name; a node they do not name, one resolution made, stays with the node
    before it), checked to run forward through stages 0..S-1."""
    current, given = 0, []
    for label in labels:
        stage = stage_of.get(label, current)
        if stage < current:
            raise ForgeOptError(f"the annotations put node {label} at stage {stage}, after a node at stage "
                                f"{current}: a pipeline's stages follow the graph's order")
        current = stage
        given.append(stage)
    if sorted(set(given)) != list(range(stages)):
        raise ForgeOptError(f"--stages {stages}: the annotations give the stages {sorted(set(given))}")
    return Cut([given.index(k) for k in range(1, stages)], GIVEN)


def _crossing_bytes(nodes: list[NodeProto], placed: Sequence[int], types: Mapping[str, TypeProto]) -> list[int]:
    """For each cut position c, the bytes of values placed[:c] make and placed[c:] read."""
    made_at = {x: c for c, i in enumerate(placed) for x in nodes[i].output if x}
    last_read: dict[str, int] = {}
    for c, i in enumerate(placed):
        for x in node_reads(nodes[i]):
            if x in made_at:
                last_read[x] = c
    return crossing_bytes(len(placed), ((made_at[x], last, value_bytes(types.get(x))) for x, last in last_read.items()))


def schedule_report(cut: Cut, micro_batches: Sequence[int] = ()) -> str:
    """The stages and the pipeline's schedule: M micro-batches through S
    stages take M + S - 1 steps, of which each stage idles S - 1 (the
    bubble, (S - 1)/(M + S - 1))."""
    stages, s = cut.stages, len(cut.stages)
    balanced = ", balanced by stored weights" if cut.how != GIVEN else ""
    lines = [f"pipeline: {s} stages, cut {cut.how}{balanced}",
             f"{'stage':>5} {'nodes':>6} {'layers':>8} {'weights MB':>11} {'sends MB':>9}"]
    for k, st in enumerate(stages):
        sent = f"{st.sent_bytes / 1e6:9.3f}" if k < s - 1 else f"{'-':>9}"
        lines.append(f"{k:>5} {st.nodes:>6} {st.layers or '-':>8} {st.weight_bytes / 1e6:11.3f} {sent}")
    lines.append(f"{'micro-batches':>13} {'steps':>6} {'bubble':>7}")
    for m in micro_batches or (1, s, 4 * s):
        lines.append(f"{m:>13} {m + s - 1:>6} {(s - 1) / (m + s - 1):>7.1%}")
    return "\n".join(lines)


def stage_of_nodes(graphs: Sequence) -> dict[str, int]:
    """Each node's stage by name (a partition's `SubModel`s, in order): the
    first stage that runs it (a constant each stage recomputes, its first)."""
    stage_of: dict[str, int] = {}
    for k, g in enumerate(graphs):
        for node in g.nodes:
            stage_of.setdefault(node.name, k)
    return stage_of


def stage_infos(model: ModelProto, graphs: Sequence, types: Mapping[str, TypeProto]) -> list[StageInfo]:
    """Each stage's (a partition's `SubModel`s, in order) nodes, layers,
    stored weights and the activations it sends to later stages."""
    sizes = {t.name: tensor_bytes(t) for t in model.graph.initializer}
    out = []
    for k, g in enumerate(graphs):
        used = {x for node in g.nodes for x in node_reads(node) if x in sizes}
        later = {x for h in graphs[k + 1:] for x in h.inputs}
        found = [x for x in (layer_key(n.name) for n in g.nodes) if x is not None]
        out.append(StageInfo(len(g.nodes), f"{layer_label(min(found))}-{layer_label(max(found))}" if found else "",
                             sum(sizes[x] for x in used),
                             sum(value_bytes(types.get(x)) for x in g.outputs if x in later)))
    return out
