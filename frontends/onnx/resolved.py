"""A model imported once (`resolve_model`), handed down to what reads it:
placement, the partition, the P-device compile and the checks."""

from __future__ import annotations

import functools
from pathlib import Path

import onnx
from onnx import ModelProto, TypeProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.frontends.onnx.shapes import InputShapes, value_types


class Resolved:
    """A model imported once and handed down: its import (`module`, in the
    `onnx` dialect: a pass that rewrites it takes a clone), the types
    inference gave every value (`types`), and the model as the importer sees
    it, as a model of its own (`model`: the chosen sizes applied, shapes
    folded, known control flow resolved; what forge-split splits)."""

    def __init__(self, model: ModelProto, base: Path | None, inferred: ModelProto, resolved: bool, module: ModuleOp,
                 shapes: InputShapes | None):
        """`inferred`: the model inference typed (without its large weights),
        its graph `resolved` at compile time or not."""
        self.base, self.module = base, module
        self._given, self._inferred, self._changed = model, inferred, bool(shapes) or resolved
        self.types: dict[str, TypeProto] = value_types(inferred.graph)

    @functools.cached_property
    def model(self) -> ModelProto:
        """The resolved model; the model itself where that changes nothing."""
        model = self._given
        if not self._changed:
            return model
        g, ig = model.graph, self._inferred.graph
        out = ModelProto()
        out.CopyFrom(model)
        del out.graph.node[:]
        out.graph.node.extend(ig.node)
        del out.graph.value_info[:]
        typed = {i.name: i for i in ig.input}
        for i in out.graph.input:
            if i.name in typed:
                i.type.CopyFrom(typed[i.name].type)
        outputs = {o.name: o for o in ig.output}
        for o in out.graph.output:
            if o.name in outputs:
                o.type.CopyFrom(outputs[o.name].type)
        have = {t.name for t in g.initializer}
        for t in ig.initializer:
            if t.name in have:
                continue
            if t.name in outputs:  # an output that folded: made by a node, as a split expects of every output
                out.graph.node.append(onnx.helper.make_node("Constant", [], [t.name], value=t, name=f"{t.name}/folded"))
            else:
                out.graph.initializer.append(t)
        return out
