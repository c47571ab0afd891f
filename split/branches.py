"""Host-side control flow: an If whose condition is known only at run time
stays one CPU sub-model that any AutoSplit runner can run whole, and each of
its branches is split in turn, as a model of its own, into a folder beside
it. Our runner reads the condition and runs the chosen branch's split:
device sub-models on the device, CPU ones on the CPU.

`graph_infos.json` records it on the If's entry, so a plain AutoSplit file
stays valid (a runner that ignores `branches` runs the If on the CPU):

    "branches": {"condition": "c", "results": ["y"],
                 "then": {"folder": "graph_2_then", "outputs": ["out"]},
                 "else": {"folder": "graph_2_else", "outputs": ["out"]}}

`results` are the If's outputs and `outputs` each branch's, position by
position.
"""

from __future__ import annotations

import onnx
from onnx import ModelProto, NodeProto, TypeProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx_graph import describe_node, outer_reads

BRANCHES = ("then", "else")


def branch_model(model: ModelProto, node: NodeProto, which: str, types: dict[str, TypeProto]) -> ModelProto:
    """Branch `which` of the If `node` as a model of its own: its inputs are
    the outer values it reads (typed as `types`, the model's inferred
    types), the model's weights it reads are its initializers, and its
    outputs are the branch's, each made by a node of its own."""
    graph = next(a.g for a in node.attribute if a.name == f"{which}_branch")
    weights = {t.name: t for t in model.graph.initializer}
    reads = sorted(outer_reads(graph))
    inputs = []
    for name in reads:
        if name in weights:
            continue
        tp = types.get(name)
        if tp is None:
            raise ForgeOptError(f"{describe_node(node)}: its {which} branch reads '{name}', whose type is not known")
        inputs.append(onnx.helper.make_value_info(name, tp))
    nodes = list(graph.node)
    made = {out for n in nodes for out in n.output}
    outputs = []
    for n, out in enumerate(graph.output):
        if out.name in made:
            outputs.append(out)
            continue
        # an outer value or a weight returned as it is: a node makes it, as a split expects of every output
        inner = f"{out.name}/{which}_{n}"
        nodes.append(onnx.helper.make_node("Identity", [out.name], [inner], name=inner))
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(out)
        copy.name = inner
        outputs.append(copy)
    g = onnx.helper.make_graph(
        nodes, f"{model.graph.name}_{which}", inputs, outputs,
        [weights[name] for name in reads if name in weights] + list(graph.initializer),
        value_info=list(graph.value_info),
    )
    out = onnx.helper.make_model(g, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    out.functions.extend(model.functions)
    return out


def branches_entry(node: NodeProto, folders: dict[str, str], outputs: dict[str, list[str]]) -> dict:
    """The `branches` field of the If's entry in `graph_infos.json`."""
    entry: dict = {"condition": node.input[0], "results": list(node.output)}
    for which in BRANCHES:
        entry[which] = {"folder": folders[which], "outputs": outputs[which]}
    return entry
