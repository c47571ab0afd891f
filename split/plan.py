"""A split of an ONNX model: its sub-models in the order they run, and every
tensor that crosses between them, as AutoSplit's `graph_infos.json` holds it.

The plan is made from the placements (`placement.place`) and the grouping
(`partition.partition`) of the model's nodes. Nodes that fold into
constants take no part in the grouping; each sub-model that reads one of
their values recomputes it (they are shape arithmetic, cheap and small).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, TypeProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import infer_types, node_label
from forge_opt.split.partition import Group, partition, read_through
from forge_opt.split.placement import Placement, Where

DEVICE, CPU = "tt", "cpu"


@dataclass
class SubModel:
    device: str  # "tt" or "cpu"
    nodes: list[NodeProto]
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)


@dataclass
class TensorInfo:
    shape: list[int]
    dtype: str  # numpy's name
    attr: str  # "input", "output" (of the model) or "intermediate"


@dataclass
class Plan:
    graphs: list[SubModel]
    tensors: dict[str, TensorInfo]
    types: dict[str, TypeProto]  # of every tensor the sub-models exchange


def _type_of(model: ModelProto) -> dict[str, TypeProto]:
    inferred = infer_types(model)
    g = inferred.graph
    return {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}


def _info(name: str, types: dict[str, TypeProto], attr: str) -> TensorInfo:
    t = types.get(name)
    if t is None or not t.HasField("tensor_type"):
        raise ForgeOptError(f"tensor '{name}' crosses between sub-models but has no known tensor type")
    tt = t.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
    return TensorInfo(shape, np.dtype(dtype).name, attr)


def make_plan(model: ModelProto, placements: dict[str, Placement], min_device_ops: int = 1) -> Plan:
    g = model.graph
    nodes = list(g.node)
    labels = [node_label(n) for n in nodes]
    producer = {out: i for i, n in enumerate(nodes) for out in n.output if out}
    # a node the import resolved away (folded to a constant) is not placed: it folds
    folded = {i for i, label in enumerate(labels) if label not in placements or placements[label].where is Where.FOLDED}
    placed = [i for i in range(len(nodes)) if i not in folded]

    def producers(i: int) -> list[int]:
        return [producer[x] for x in nodes[i].input if x in producer]

    preds = {i: sorted(read_through([i], producers, folded)[0]) for i in placed}
    device = {i: placements[labels[i]].where is Where.DEVICE for i in placed}
    groups = partition(placed, preds, device, min_device_ops)

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
        read = [x for i in ordered for x in nodes[i].input if x and x not in made and x not in initializers]
        sub = SubModel(DEVICE if group.device else CPU, [nodes[i] for i in ordered], inputs=list(dict.fromkeys(read)))
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
    types = _type_of(model)
    tensors: dict[str, TensorInfo] = {}
    for sub in subs:
        for x in (*sub.inputs, *sub.outputs):
            attr = "input" if x in graph_inputs else "output" if x in graph_outputs else "intermediate"
            tensors.setdefault(x, _info(x, types, attr))
    return Plan(subs, tensors, types)


def graph_infos(plan: Plan, layout: str = "NCHW") -> dict:
    """`graph_infos.json`, as AutoSplit writes it (`tensors` keyed by name)."""
    graphs = []
    for n, sub in enumerate(plan.graphs):
        entry: dict = {
            "inputs": sub.inputs,
            "outputs": sub.outputs,
            "device": sub.device,
            "model_info": {"model_path": f"graph_{n}.onnx"},
        }
        if sub.device == DEVICE:
            entry["context_dir"] = f"graph_ir_{n}"
        graphs.append(entry)
    dynamic = any(d < 0 for t in plan.tensors.values() for d in t.shape)
    return {
        "graphs": graphs,
        "tensors": {name: {"shape": t.shape, "dtype": t.dtype, "attr": t.attr} for name, t in plan.tensors.items()},
        "graph_num": len(graphs),
        "platform": "onnx",
        "dynamic": dynamic,
        "layout": layout,
    }


def sub_model(model: ModelProto, plan: Plan, n: int, weight=lambda t: t) -> ModelProto:
    """Sub-model `n` as an ONNX model with exactly the nodes and initializers
    it uses, each as `weight` gives it (the writer points large ones at data
    files instead of copying them)."""
    sub = plan.graphs[n]
    used = {x for node in sub.nodes for x in node.input}
    initializers: list[TensorProto] = [weight(t) for t in model.graph.initializer if t.name in used]
    graph = onnx.helper.make_graph(
        sub.nodes,
        f"graph_{n}",
        [onnx.helper.make_value_info(x, plan.types[x]) for x in sub.inputs],
        [onnx.helper.make_value_info(x, plan.types[x]) for x in sub.outputs],
        initializers,
    )
    out = onnx.helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    return out
