"""ONNX shape inference as the importer runs it. A model is inferred once
because it is imported once: `resolve_model`'s `Resolved` is handed down."""

from __future__ import annotations

import onnx
import onnx.shape_inference
from onnx import ModelProto

from forge_opt.diagnostics import ForgeOptError


def infer(lite: ModelProto) -> ModelProto:
    """ONNX shape inference of `lite` (types and values propagated, not
    strict); its failure an error naming ONNX's message."""
    try:
        return onnx.shape_inference.infer_shapes(lite, strict_mode=False, data_prop=True)
    except Exception as e:
        message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise ForgeOptError(f"ONNX shape inference failed: {message}") from None
