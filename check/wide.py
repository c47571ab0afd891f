"""The model run once more in a wider float type: what its computation
should approach, against which the check measures how far the oracle
itself lands (`compare.within_budget`).

A model is widened by one step of its own precision: a float32 model into
float64, a float16 (or bfloat16) export into float32 (half float64's
memory, and what its values are meant to be). Every tensor of the widened
type takes the wider one: inputs, outputs, constants, and the casts and
generators that make it; a float of another width keeps its type (a Cast
to float16 in a float32 model is the model's own rounding). A weight is not
copied: it stays as stored (memory-mapped, external data read from the
model's folder) and a Cast at the head of its graph widens it, so the run
costs about what the oracle's own does, whatever the model's size.
Quantized models are not widened: DequantizeLinear's scale cannot be
float64, and their outputs are compared in quantization steps instead.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, helper, numpy_helper

from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.frontends.onnx.values import initializer_array

#: each float type, and the one a run of a model computing in it is widened to
WIDER: dict[int, int] = {TensorProto.FLOAT: TensorProto.DOUBLE, TensorProto.FLOAT16: TensorProto.FLOAT,
                         TensorProto.BFLOAT16: TensorProto.FLOAT}
#: ops whose integer `to`/`dtype` attribute names the element type they make
_TYPED = {"Cast": "to", "EyeLike": "dtype", "RandomNormal": "dtype", "RandomUniform": "dtype",
          "RandomNormalLike": "dtype", "RandomUniformLike": "dtype", "Bernoulli": "dtype"}
QUANTIZED = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
             "MatMulInteger", "ConvInteger"}


def widened_types(model: ModelProto) -> dict[int, int]:
    """What a wide run of `model` widens: float32 into float64, or, for a
    model whose float weights are mostly 16-bit (a float16 export), float16
    and bfloat16 into float32."""
    size: dict[int, int] = dict.fromkeys(WIDER, 0)
    for t in model.graph.initializer:
        if t.data_type in size:
            size[t.data_type] += int(np.prod(t.dims))
    if size[TensorProto.FLOAT16] + size[TensorProto.BFLOAT16] > size[TensorProto.FLOAT]:
        return {TensorProto.FLOAT16: TensorProto.FLOAT, TensorProto.BFLOAT16: TensorProto.FLOAT}
    return {TensorProto.FLOAT: TensorProto.DOUBLE}


def wide_outputs(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]) -> tuple[list | None, str]:
    """The outputs of the model widened (`widened_types`; onnxruntime, else
    ONNX's reference implementation), or None and why there are none."""
    why = _unwidenable(model.graph)
    if why:
        return None, why
    widen = widened_types(model)
    wide = ModelProto()
    wide.CopyFrom(model)
    inputs = {i.name for i in model.graph.input}
    _widen_graph(wide.graph, base, widen, inputs)
    numpy_wider = {helper.tensor_dtype_to_np_dtype(k): helper.tensor_dtype_to_np_dtype(v) for k, v in widen.items()}
    fed = {k: v.astype(numpy_wider[v.dtype]) if v.dtype in numpy_wider else v for k, v in feeds.items()}
    try:
        return onnxruntime_outputs(wide, base, fed), ""
    except Exception:  # onnxruntime lacks float64 kernels for many ops: the reference has them all
        pass
    from onnx.reference import ReferenceEvaluator

    from forge_opt.frontends.onnx.values import with_external_data

    try:
        with np.errstate(all="ignore"):  # the model's own overflows and NaN, as onnxruntime gives them silently
            return [np.asarray(o) for o in ReferenceEvaluator(with_external_data(wide, base)).run(None, fed)], ""
    except Exception as e:  # whatever the reference's op implementations raise
        return None, f"the wide run failed: {type(e).__name__}: {e}"


class WideRun:
    """The model's wide run on a check's feeds, made once, when first asked
    (by the budget, then by the ill-conditioning probes)."""

    def __init__(self, model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]):
        self.model, self.base, self.feeds = model, base, feeds

    @cached_property
    def widened(self) -> set[np.dtype]:
        """The numpy types of the outputs the run widens."""
        return {np.dtype(helper.tensor_dtype_to_np_dtype(k)) for k in widened_types(self.model)}

    @cached_property
    def outputs(self) -> list | None:
        return wide_outputs(self.model, self.base, self.feeds)[0]


def _unwidenable(graph: GraphProto) -> str:
    for node in graph.node:
        if node.op_type in QUANTIZED:
            return f"it quantizes ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            return f"it uses the {node.domain} domain ({node.op_type})"
        for a in node.attribute:
            for g in [a.g] * (a.type == AttributeProto.GRAPH) + list(a.graphs):
                why = _unwidenable(g)
                if why:
                    return why
    return ""


def _widen_graph(graph: GraphProto, base: Path | None, widen: dict[int, int], inputs: set[str]) -> None:
    casts = []
    for t in graph.initializer:
        if t.data_type not in widen:
            continue
        if t.name in inputs:  # an initializer a caller may override (IR < 4) is widened where it is
            t.CopyFrom(numpy_helper.from_array(
                initializer_array(t, base).astype(helper.tensor_dtype_to_np_dtype(widen[t.data_type])), t.name))
            continue
        # the weight as stored, under a name of its own, widened by a Cast where the graph reads it
        name = t.name
        t.name = f"{name}.narrow"
        casts.append(helper.make_node("Cast", [t.name], [name], to=widen[t.data_type], name=f"{name}.widen"))
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type in widen:
            info.type.tensor_type.elem_type = widen[info.type.tensor_type.elem_type]
    for node in graph.node:
        for a in node.attribute:
            if a.type == AttributeProto.TENSOR and a.t.data_type in widen:
                a.t.CopyFrom(numpy_helper.from_array(initializer_array(a.t, base).astype(
                    helper.tensor_dtype_to_np_dtype(widen[a.t.data_type])), a.t.name))
            elif a.type == AttributeProto.INT and _TYPED.get(node.op_type) == a.name and a.i in widen:
                a.i = widen[a.i]
            elif node.op_type == "Constant" and a.name in ("value_float", "value_floats") and \
                    TensorProto.FLOAT in widen:
                value = np.array(a.f if a.name == "value_float" else list(a.floats), np.float64)
                a.Clear()
                a.name, a.type = "value", AttributeProto.TENSOR
                a.t.CopyFrom(numpy_helper.from_array(value))
            elif a.type == AttributeProto.GRAPH:
                _widen_graph(a.g, base, widen, set())
            for g in a.graphs:
                _widen_graph(g, base, widen, set())
    if casts:  # (protobuf copies what a repeated field takes: the nodes are edited in place first)
        nodes = list(graph.node)
        del graph.node[:]
        graph.node.extend([*casts, *nodes])
