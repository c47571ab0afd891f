"""ONNX shape inference as the importer runs it, each model inferred once."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import onnx
import onnx.shape_inference
from onnx import ModelProto

from forge_opt.diagnostics import ForgeOptError

#: the last inferences, by the digest of the model inferred. One check imports the same model several
#: times (its random feeds, a split's placement and partition, each sub-model's compile): each is inferred
#: once. Kept serialized, so no caller's edits reach another's copy.
_INFERRED: OrderedDict[bytes, bytes] = OrderedDict()
_INFERRED_KEPT = 8


def infer_cached(lite: ModelProto) -> ModelProto:
    """ONNX shape inference of `lite` (types and values propagated, not
    strict), or the copy of an earlier inference of the same model."""
    key = hashlib.sha256(lite.SerializeToString(deterministic=True)).digest()
    if key not in _INFERRED:
        try:
            inferred = onnx.shape_inference.infer_shapes(lite, strict_mode=False, data_prop=True)
        except Exception as e:
            message = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise ForgeOptError(f"ONNX shape inference failed: {message}") from None
        _INFERRED[key] = inferred.SerializeToString()
        while len(_INFERRED) > _INFERRED_KEPT:
            _INFERRED.popitem(last=False)
    _INFERRED.move_to_end(key)
    out = ModelProto()
    out.ParseFromString(_INFERRED[key])
    return out
