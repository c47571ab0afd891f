"""The model run once more in float64: what a float32 computation of it
should approach, against which the check measures how far float32 itself
lands (`compare.within_budget`).

Every float32 tensor of the model becomes float64: initializers, inputs,
outputs, constants, and the casts and generators that make float32. float16
and bfloat16 tensors keep their types (a Cast to them is the model's own
rounding). Quantized models are not promoted: DequantizeLinear's scale
cannot be float64, and their outputs are compared in quantization steps
instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, TensorProto, numpy_helper

from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.frontends.onnx.values import initializer_array

F32, F64 = TensorProto.FLOAT, TensorProto.DOUBLE

#: ops whose integer `to`/`dtype` attribute names the element type they make
_TYPED = {"Cast": "to", "EyeLike": "dtype", "RandomNormal": "dtype", "RandomUniform": "dtype",
          "RandomNormalLike": "dtype", "RandomUniformLike": "dtype", "Bernoulli": "dtype"}
QUANTIZED = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv", "QLinearMatMul",
              "MatMulInteger", "ConvInteger"}
#: the float32 weights a float64 run may copy (it holds them twice as wide)
_LIMIT = 1 << 30


def float64_outputs(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]) -> tuple[list | None, str]:
    """The outputs of the model promoted to float64 (onnxruntime, else ONNX's
    reference implementation), or None and why there are none."""
    why = _unpromotable(model.graph)
    if why:
        return None, why
    promoted = ModelProto()
    promoted.CopyFrom(model)
    weights = sum(int(np.prod(t.dims)) * 4 for t in model.graph.initializer if t.data_type == F32)
    if weights > _LIMIT:
        return None, f"its float32 weights ({weights:,} bytes) are too large to run again in float64"
    _promote_graph(promoted.graph, base)
    wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}

    try:
        return onnxruntime_outputs(promoted, None, wide), ""
    except Exception:  # onnxruntime lacks float64 kernels for many ops: the reference has them all
        pass
    from onnx.reference import ReferenceEvaluator

    try:
        with np.errstate(all="ignore"):  # the model's own overflows and NaN, as onnxruntime gives them silently
            return [np.asarray(o) for o in ReferenceEvaluator(promoted).run(None, wide)], ""
    except Exception as e:  # whatever the reference's op implementations raise
        return None, f"the float64 run failed: {type(e).__name__}: {e}"


def _unpromotable(graph: GraphProto) -> str:
    for node in graph.node:
        if node.op_type in QUANTIZED:
            return f"it quantizes ({node.op_type})"
        if node.domain not in ("", "ai.onnx"):
            return f"it uses the {node.domain} domain ({node.op_type})"
        for a in node.attribute:
            for g in [a.g] * (a.type == AttributeProto.GRAPH) + list(a.graphs):
                why = _unpromotable(g)
                if why:
                    return why
    return ""


def _promote_graph(graph: GraphProto, base: Path | None) -> None:
    for t in graph.initializer:
        if t.data_type == F32:
            _promote_tensor(t, base)
    for info in [*graph.input, *graph.output, *graph.value_info]:
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type == F32:
            info.type.tensor_type.elem_type = F64
    for node in graph.node:
        for a in node.attribute:
            if a.type == AttributeProto.TENSOR and a.t.data_type == F32:
                _promote_tensor(a.t, base)
            elif a.type == AttributeProto.INT and _TYPED.get(node.op_type) == a.name and a.i == F32:
                a.i = F64
            elif node.op_type == "Constant" and a.name in ("value_float", "value_floats"):
                value = np.array(a.f if a.name == "value_float" else list(a.floats), np.float64)
                a.Clear()
                a.name, a.type = "value", AttributeProto.TENSOR
                a.t.CopyFrom(numpy_helper.from_array(value))
            elif a.type == AttributeProto.GRAPH:
                _promote_graph(a.g, base)
            for g in a.graphs:
                _promote_graph(g, base)


def _promote_tensor(t: TensorProto, base: Path | None) -> None:
    t.CopyFrom(numpy_helper.from_array(initializer_array(t, base).astype(np.float64), t.name))
