"""Host-side control flow. An If whose condition, or a Loop whose trip count
or condition, is known only at run time stays one CPU sub-model that any
AutoSplit runner can run whole; its branches, or its body, are split in
turn, each as a model of its own, into folders beside it. forge-split's
runner reads the condition and runs the chosen branch's split, or runs the
body's split once per iteration: device sub-models on the device, CPU ones
on the CPU.

`graph_infos.json` records it on the entry, so a plain AutoSplit file stays
valid (a runner that ignores the field runs the op on the CPU):

    "branches": {"condition": "c", "results": ["y"],
                 "then": {"folder": "graph_2_then", "outputs": ["out"]},
                 "else": {"folder": "graph_2_else", "outputs": ["out"]}}
    "loop": {"trip_count": "n", "condition": "", "initial": ["h0"], "results": ["h", "hs"],
             "body": {"folder": "graph_2_body", "inputs": ["i", "cond", "h"],
                      "outputs": ["cond_out", "h_out", "scan"]}}

`results` are the op's outputs, and a branch's `outputs` its own, position
by position. A body's `inputs` are the iteration number, the condition and
the carried values; its `outputs` the condition, the carried values and the
scan outputs, as ONNX's Loop orders them.
"""

from __future__ import annotations

import onnx
from onnx import GraphProto, ModelProto, NodeProto, TypeProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.graph import describe_node, outer_reads
from forge_opt.frontends.onnx.shapes import is_known
from forge_opt.plan.graph_infos import BRANCHES, Branch, Branches, Loop, LoopBody


def is_host_control_flow(node: NodeProto) -> bool:
    """An If or a Loop left in the model after resolution: what decides it
    is known only at run time, so the host runs it."""
    return node.op_type in ("If", "Loop") and node.domain in ("", "ai.onnx")


def subgraph_model(
    model: ModelProto, node: NodeProto, graph: GraphProto, types: dict[str, TypeProto], what: str
) -> ModelProto:
    """A subgraph of `node` as a model of its own: its inputs are its own
    graph inputs (a Loop body's; typed from `types` where it declares
    none) and the outer values it reads (typed as `types`, the model's
    inferred types); the model's weights it reads are its initializers;
    each output is made by a node of its own. The sizes the exporter wrote
    inside the subgraph (its outputs', its value_info) are those of the
    export's own trace, not the user's: left out, ONNX infers them anew
    from the inputs."""
    weights = {t.name: t for t in model.graph.initializer}
    reads = sorted(outer_reads(graph))
    inputs = []
    for own in graph.input:
        if own.type.WhichOneof("value") is None:
            raise ForgeOptError(f"{describe_node(node)}: its {what} input '{own.name}' has no type")
        inputs.append(own)
    for name in reads:
        if name in weights:
            continue
        tp = types.get(name)
        if tp is None:
            raise ForgeOptError(f"{describe_node(node)}: its {what} reads '{name}', whose type is not known")
        inputs.append(onnx.helper.make_value_info(name, tp))
    nodes = list(graph.node)
    made = {out for n in nodes for out in n.output}
    outputs = []
    for n, declared in enumerate(graph.output):
        out = _unsized(declared)
        if out.name in made:
            outputs.append(out)
            continue
        # an input or a weight returned as it is: a node makes it, as a split expects of every output
        inner = f"{out.name}/{what}_{n}"
        nodes.append(onnx.helper.make_node("Identity", [out.name], [inner], name=inner))
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(out)
        copy.name = inner
        outputs.append(copy)
    g = onnx.helper.make_graph(
        nodes, f"{model.graph.name}_{what}", inputs, outputs,
        [weights[name] for name in reads if name in weights] + list(graph.initializer),
    )
    out = onnx.helper.make_model(g, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    out.functions.extend(model.functions)
    return out


def _unsized(declared: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    """A subgraph output's element type and rank, its sizes left to inference."""
    out = onnx.ValueInfoProto()
    out.CopyFrom(declared)
    if out.type.HasField("tensor_type") and out.type.tensor_type.HasField("shape"):
        for d in out.type.tensor_type.shape.dim:
            d.Clear()
    return out


def _attribute_graph(node: NodeProto, name: str) -> GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


def subgraph_models(model: ModelProto, node: NodeProto, types: dict[str, TypeProto]) -> dict[str, ModelProto]:
    """The If's branches, or the Loop's body, as models of their own, by
    the name of their folder's suffix (`then`, `else`, `body`)."""
    if node.op_type == "If":
        return {w: subgraph_model(model, node, _attribute_graph(node, f"{w}_branch"), types, w) for w in BRANCHES}
    body = onnx.GraphProto()
    body.CopyFrom(_attribute_graph(node, "body"))
    # the iteration number and the condition are scalars; carried values take the initial values' types
    fixed = [onnx.helper.make_tensor_type_proto(onnx.TensorProto.INT64, []),
             onnx.helper.make_tensor_type_proto(onnx.TensorProto.BOOL, [])]
    fixed += [types.get(x) for x in node.input[2:]]
    for value, tp in zip(body.input, fixed):
        if tp is not None and not _has_shape(value.type):
            value.type.CopyFrom(tp)
    carried = len(node.input) - 2
    growing = _changing_shapes(model, node, body, types, carried)
    for k in growing:  # a carried value whose shape changes: its sizes are known only at run time
        dims = body.input[2 + k].type.tensor_type.shape.dim
        for axis, d in enumerate(dims):
            d.Clear()
            d.dim_param = f"{body.input[2 + k].name}_dim{axis}"
    return {"body": subgraph_model(model, node, body, types, "body")}


def _changing_shapes(model: ModelProto, node: NodeProto, body: GraphProto, types: dict[str, TypeProto],
                     carried: int) -> list[int]:
    """The carried values (by position) whose shape after one iteration is
    not the shape they came in with, by ONNX's shape inference on the body
    typed with the initial values: a body compiled for the first
    iteration's shape would be fed another at the next."""
    typed = subgraph_model(model, node, body, types, "body")
    try:
        inferred = onnx.shape_inference.infer_shapes(typed)
    except Exception:  # shape inference's errors have no common base: nothing is known, all may change
        return list(range(carried))
    known = {v.name: v.type for v in (*inferred.graph.value_info, *inferred.graph.output)}
    changing = []
    for k in range(carried):
        came, went = body.input[2 + k].type, known.get(body.output[1 + k].name)
        if went is None or not _has_shape(went) or _dims(went) != _dims(came) or None in _dims(came):
            changing.append(k)
    return changing


def _dims(tp: TypeProto) -> list[int | None]:
    return [d.dim_value if is_known(d) else None for d in tp.tensor_type.shape.dim]


def _has_shape(tp: TypeProto) -> bool:
    return tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.HasField("shape")


def control_flow_entry(node: NodeProto, folders: dict[str, str], models: dict[str, ModelProto]) -> Branches | Loop:
    """The op's record on its entry in `graph_infos.json`."""
    results = list(node.output)
    if node.op_type == "If":
        then, orelse = (Branch(folders[w], [o.name for o in models[w].graph.output]) for w in BRANCHES)
        return Branches(node.input[0], results, then, orelse)
    body = models["body"].graph
    own = len(_attribute_graph(node, "body").input)
    return Loop(
        trip_count=node.input[0] if node.input else "",
        condition=node.input[1] if len(node.input) > 1 else "",
        initial=list(node.input[2:]),
        results=results,
        body=LoopBody(folders["body"], [i.name for i in body.input[:own]], [o.name for o in body.output]),
    )
