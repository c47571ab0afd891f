"""A split of an ONNX model: its sub-models in the order they run, and every
tensor that crosses between them (what `graph_infos.json` records).

The partition is made from the placements (`placement.place`) and the grouping
(`partition.partition`) of the model's nodes. Nodes that fold into
constants take no part in the grouping; each sub-model that reads one of
their values recomputes it (they are shape arithmetic, cheap and small).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, TypeProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import node_label
from forge_opt.frontends.onnx.graph import node_reads
from forge_opt.plan.graph_infos import CPU, DEVICE, TensorInfo
from forge_opt.split.control_flow import is_host_control_flow
from forge_opt.split.stages import given_cuts, stage_cuts, stage_infos
from forge_opt.transforms.partition import Group, partition, read_through
from forge_opt.transforms.placement import Placement, Where
from forge_opt.transforms.stage_cuts import Cut


@dataclass
class SubModel:
    device: str  # "tt" or "cpu"
    nodes: list[NodeProto]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # of a CPU sub-model: why each node is on the CPU


@dataclass
class Partition:
    graphs: list[SubModel]
    tensors: dict[str, TensorInfo]
    types: dict[str, TypeProto]  # of every value inference typed (every tensor the sub-models exchange among them)
    cut: Cut | None = None  # a pipeline's: where its stages (the graphs) were cut


def _info(name: str, types: dict[str, TypeProto], attr: str) -> TensorInfo:
    t = types.get(name)
    if t is None or not t.HasField("tensor_type"):
        raise ForgeOptError(f"tensor '{name}' crosses between sub-models but has no known tensor type")
    tt = t.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    return TensorInfo(shape, np.dtype(dtype).name, attr)


def _unranked(t: TypeProto | None) -> bool:
    """No type at all, or a tensor of no known element type or rank
    (sequences and optionals have types of their own, which no run would
    give)."""
    if t is None or t.WhichOneof("value") is None:
        return True
    if not t.HasField("tensor_type"):
        return False
    return not t.tensor_type.elem_type or not t.tensor_type.HasField("shape")


def _untyped(t: TypeProto | None) -> bool:
    """`_unranked`, or a tensor of some size unknown: an op ONNX cannot infer
    (of another domain), or a size known only at run time (how many boxes
    survive NMS)."""
    return _unranked(t) or (t is not None and t.HasField("tensor_type")
                            and any(not d.HasField("dim_value") for d in t.tensor_type.shape.dim))


def _types_from_run(model: ModelProto, base: Path | None, names: list[str]) -> dict[str, TypeProto]:
    """The types of tensors ONNX cannot infer (an op of another domain makes
    them), as a run of the model on onnxruntime gives them: AutoSplit too
    runs its sub-models to learn their outputs' shapes. Seeded random
    inputs, indices inside the tables they index."""
    from forge_opt.execution.engine import index_bounds, random_array
    from forge_opt.execution.oracle import expected_outputs

    exposed = ModelProto()
    exposed.CopyFrom(model)
    del exposed.graph.output[:]
    exposed.graph.output.extend(onnx.helper.make_empty_tensor_value_info(x) for x in names)
    rng = np.random.default_rng(0)
    bounds = index_bounds(model)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for i in model.graph.input:
        if i.name in initializers:
            continue
        tt = i.type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
        feeds[i.name] = random_array([d.dim_value for d in tt.shape.dim], dtype, rng, bounds.get(i.name))
    try:
        values = expected_outputs(exposed, base, feeds).outputs
    except ForgeOptError as e:
        raise ForgeOptError(f"tensor '{names[0]}' crosses between sub-models but ONNX cannot infer its type, "
                            f"and a run to learn it failed: {e}") from None
    types = {}
    for name, value in zip(names, values):
        if not isinstance(value, np.ndarray):
            raise ForgeOptError(f"tensor '{name}' crosses between sub-models but is no tensor")
        value = np.asarray(value)
        types[name] = onnx.helper.make_tensor_type_proto(onnx.helper.np_dtype_to_tensor_dtype(value.dtype),
                                                         list(value.shape))
    return types


def _why(placement: Placement, min_device_ops: int) -> str:
    """Why a node of a CPU sub-model is there."""
    if placement.op_type == "If":
        return "an If on a run-time condition: the host picks the branch, and each branch is split in turn"
    if placement.op_type == "Loop":
        return "a Loop of a run-time trip count or condition: the host iterates, and the body is split in turn"
    if placement.where is Where.CPU:
        return placement.reason
    return f"Forge can run it, but its device sub-model would have fewer than {min_device_ops} ops (--min-device-ops)"


def _control_flow_alone(groups: list[Group], nodes: list[NodeProto]) -> list[Group]:
    """Each run-time If or Loop in a sub-model of its own, so that its
    branches or body can be split in turn (`control_flow.py`). A group's nodes are in topological order, so cutting
    it before and after an If keeps every piece reading only earlier ones."""
    out: list[Group] = []
    for group in groups:
        piece: list = []
        for i in group.nodes:
            if is_host_control_flow(nodes[i]):
                if piece:
                    out.append(Group(group.device, piece))
                out.append(Group(False, [i]))
                piece = []
            else:
                piece.append(i)
        if piece:
            out.append(Group(group.device, piece))
    return out


def make_partition(
    model: ModelProto, placements: dict[str, Placement], types: Mapping[str, TypeProto], min_device_ops: int = 1,
    base: Path | None = None, stages: int = 1, stage_of: Mapping[str, int] | None = None,
) -> Partition:
    """The sub-models of `model` as `placements` place its nodes; `types`:
    every value's, as inference typed them (`Resolved.types`). `stages` > 1:
    a pipeline of that many device sub-models (`stages.stage_cuts`, or the
    stages `stage_of` gives by node name), which needs every node on the
    device."""
    g = model.graph
    nodes = list(g.node)
    labels = [node_label(n) for n in nodes]
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    # a node the import resolved away (folded to a constant) is not placed: it folds
    folded = {i for i, label in enumerate(labels) if label not in placements or placements[label].where is Where.FOLDED}
    placed = [i for i in range(len(nodes)) if i not in folded]

    def producers(i: int) -> list[int]:
        return [producer[x] for x in node_reads(nodes[i]) if x in producer]

    # each placed node: the placed nodes it reads, and the folded ones it reads through
    reads = {i: read_through([i], producers, folded) for i in placed}
    preds = {i: sorted(reads[i][0]) for i in placed}
    device = {i: placements[labels[i]].where is Where.DEVICE for i in placed}
    cut = None
    if stages > 1:
        groups, cut = _stage_groups(model, placed, device, placements, labels, stages, types, stage_of,
                                    lambda i: reads[i][1])
    else:
        groups = _control_flow_alone(partition(placed, preds, device, min_device_ops), nodes)

    graph_inputs = {i.name for i in g.input} - {t.name for t in g.initializer}
    graph_outputs = [o.name for o in g.output]
    initializers = {t.name for t in g.initializer}
    subs: list[SubModel] = []
    home: dict[str, int] = {name: -1 for name in graph_inputs}  # which sub-model makes each tensor
    # A model output that folds is made by the last sub-model (a CPU one when
    # every node folds).
    folded_outputs = [producer[x] for x in graph_outputs if producer.get(x) in folded]
    if folded_outputs and not groups:
        groups = [Group(False, [])]
    for n, group in enumerate(groups):
        members = set(group.nodes)
        roots = [*group.nodes, *(folded_outputs if n == len(groups) - 1 else [])]
        members |= set(roots)
        members |= read_through(roots, producers, folded)[1]
        ordered = sorted(members)
        made = {out for i in ordered for out in nodes[i].output if out}
        # with what subgraphs read from outside them: an If's branches read weights and earlier values
        read = [x for i in ordered for x in node_reads(nodes[i]) if x not in made and x not in initializers]
        sub = SubModel(DEVICE if group.device else CPU, [nodes[i] for i in ordered], inputs=list(dict.fromkeys(read)))
        if not group.device:
            sub.why = {labels[i]: _why(placements[labels[i]], min_device_ops) for i in group.nodes}
        for out in made:
            home.setdefault(out, n)
        subs.append(sub)
    for sub in subs:
        for x in sub.inputs:
            maker = home.get(x)
            if maker is None:
                raise ForgeOptError(f"tensor '{x}' is read but made by no node and is no graph input")
            if maker >= 0 and x not in subs[maker].outputs:
                subs[maker].outputs.append(x)
    for x in graph_outputs:
        maker = home.get(x, -1)
        if maker >= 0 and x not in subs[maker].outputs:
            subs[maker].outputs.append(x)
    types = _exchanged_types(model, base, subs, graph_inputs, types)
    tensors: dict[str, TensorInfo] = {}
    for sub in subs:
        for x in (*sub.inputs, *sub.outputs):
            attr = "input" if x in graph_inputs else "output" if x in graph_outputs else "intermediate"
            tensors.setdefault(x, _info(x, types, attr))
    for x in graph_outputs:  # a model input the model returns as it is: the host passes it on
        if x in graph_inputs and x not in tensors:
            tensors[x] = _info(x, types, "input")
    if cut is not None:
        cut.stages = stage_infos(model, subs, types)
    return Partition(subs, tensors, types, cut)


def _exchanged_types(model: ModelProto, base: Path | None, subs: list[SubModel], graph_inputs: set[str],
                     types: Mapping[str, TypeProto]) -> dict[str, TypeProto]:
    """`types`, with those of the tensors the sub-models exchange that
    inference left without sizes learned from a run: the model's inputs
    keep their declared types (a Loop body's growing value has run-time
    sizes); a tensor that no device sub-model reads keeps its run-time sizes
    too, its rank learned where ONNX cannot infer it (a detector's boxes, a
    mask Loop's masks: one run's count of them is no type)."""
    types = dict(types)
    on_device = {x for sub in subs if sub.device == DEVICE for x in sub.inputs}
    untyped = [x for sub in subs for x in (*sub.inputs, *sub.outputs)
               if x not in graph_inputs and _untyped(types.get(x)) and (x in on_device or _unranked(types.get(x)))]
    if untyped:
        learned = _types_from_run(model, base, list(dict.fromkeys(untyped)))
        for x, t in learned.items():
            if x not in on_device:  # the host reads it: a run gives its element type and rank, no size
                for d in t.tensor_type.shape.dim:
                    d.Clear()
        types.update(learned)
    return types


def _stage_groups(model: ModelProto, placed: list[int], device: dict[int, bool], placements: dict[str, Placement],
                  labels: list[str], stages: int, types: Mapping[str, TypeProto],
                  stage_of: Mapping[str, int] | None, through: Callable[[int], Iterable[int]]
                  ) -> tuple[list[Group], Cut]:
    off = next((i for i in placed if not device[i] or is_host_control_flow(model.graph.node[i])), None)
    if off is not None:
        raise ForgeOptError(f"--stages {stages}: every stage runs on a device, but node {labels[off]} cannot: "
                            f"{_why(placements[labels[off]], 1)}")
    if stage_of is not None:
        cut = given_cuts([labels[i] for i in placed], stage_of, stages)
    else:
        cut = stage_cuts(model, placed, stages, types, through)
    bounds = [0, *cut.positions, len(placed)]
    return [Group(True, placed[a:b]) for a, b in itertools.pairwise(bounds)], cut


def sub_model(model: ModelProto, partition: Partition, n: int, weight=lambda t: t) -> ModelProto:
    """Sub-model `n` as an ONNX model with exactly the nodes and initializers
    it uses, each as `weight` gives it (the writer points large ones at data
    files instead of copying them)."""
    sub = partition.graphs[n]
    used = {x for node in sub.nodes for x in node_reads(node)}
    initializers: list[TensorProto] = [weight(t) for t in model.graph.initializer if t.name in used]
    graph = onnx.helper.make_graph(
        sub.nodes,
        f"graph_{n}",
        [onnx.helper.make_value_info(x, partition.types[x]) for x in sub.inputs],
        [onnx.helper.make_value_info(x, partition.types[x]) for x in sub.outputs],
        initializers,
    )
    out = onnx.helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    return out
