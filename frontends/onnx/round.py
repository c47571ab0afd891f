"""What one round of graph resolution (`resolve`) holds and the steps
its families share: the values known so far, fresh names, new constants,
and Squeeze/Unsqueeze written in the model's opset."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TypeProto, numpy_helper


def is_static(tp: TypeProto | None) -> bool:
    if tp is None or tp.WhichOneof("value") != "tensor_type":
        return tp is not None  # sequences and optionals have no shape to fold
    tt = tp.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)


def static_shape(tp: TypeProto | None) -> list[int] | None:
    if tp is None or tp.WhichOneof("value") != "tensor_type" or not is_static(tp):
        return None
    return [d.dim_value for d in tp.tensor_type.shape.dim]


def node_attr(node: NodeProto, name: str, default: Any = None) -> Any:
    """The value of `node`'s attribute `name`, or `default`."""
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


class RoundState:
    """The graph being walked: its types, the values known, the nodes kept."""

    def __init__(self, model: ModelProto):
        self.source = model
        g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.types: dict[str, TypeProto] = {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}
        self.known: dict[str, np.ndarray] = {}
        for t in g.initializer:
            self.known[t.name] = numpy_helper.to_array(t)
            self.types.setdefault(t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
        self.made: dict[str, np.ndarray] = {}  # constants this round made
        self.seqs: dict[str, list[str]] = {}  # sequences resolved to their tensors
        self.built: set[str] = set()  # resolved sequences a kept node still reads as a sequence
        self.nodes: list[NodeProto] = []
        self._axes: dict[int, str] = {}  # one `axes` constant per axis
        self.changed = False
        self._fresh = 0
        self._producers: dict[str, NodeProto] | None = None
        self._consumers: dict[str, list[NodeProto]] | None = None

    def _graph_maps(self) -> tuple[dict[str, NodeProto], dict[str, list[NodeProto]]]:
        """The source graph's node making each value, and those reading it."""
        if self._producers is None or self._consumers is None:
            self._producers, self._consumers = {}, defaultdict(list)
            for node in self.source.graph.node:
                for name in node.output:
                    self._producers[name] = node
                for name in node.input:
                    self._consumers[name].append(node)
        return self._producers, self._consumers

    def _fold(self, node: NodeProto, values: list[np.ndarray]) -> list[NodeProto]:
        for name, value in zip(node.output, values):
            if name:
                self._set(name, np.asarray(value))
        return []

    def _set(self, name: str, value: np.ndarray) -> None:
        self.known[name] = self.made[name] = value
        elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        self.types[name] = onnx.helper.make_tensor_type_proto(elem, list(value.shape))

    def _unique(self, base: str) -> str:
        self._fresh += 1
        return f"{base}#{self._fresh}"

    def _constant(self, base: str, value: np.ndarray) -> str:
        name = self._unique(base)
        self._set(name, value)
        return name

    # -- Squeeze/Unsqueeze in the model's opset (axes became an input at 13)

    def _unsqueeze(self, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        return self._axes_op("Unsqueeze", value, axis, nodes, label)

    def _squeeze(self, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        return self._axes_op("Squeeze", value, axis, nodes, label)

    def _axes_op(self, op: str, value: str, axis: int, nodes: list[NodeProto], label: str) -> str:
        out = self._unique(f"{value}/{op.lower()}")
        if self.opset >= 13:
            axes = self._axes.get(axis)
            if axes is None:
                axes = self._axes[axis] = self._constant(f"{label}/axes", np.array([axis], np.int64))
            nodes.append(onnx.helper.make_node(op, [value, axes], [out], name=out))
        else:
            nodes.append(onnx.helper.make_node(op, [value], [out], axes=[axis], name=out))
        return out
