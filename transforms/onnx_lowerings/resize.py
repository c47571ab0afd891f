"""ONNX `Resize`, exactly, for every mode ONNX has.

Resize is separable and linear in its input: along each resized axis, output
position i is a fixed weighted sum of input positions (nearest: one weight of
1; linear and cubic: a few; antialiasing: more). The weights depend only on
the sizes and the attributes, so they are computed at compile time by
running ONNX's own reference Resize on one-hot probes along that axis, and
cannot disagree with it. Nearest resizing then gathers the chosen positions
(any element type, no arithmetic); the other modes multiply by the weight
matrix (a Matmul per axis).
"""

from __future__ import annotations

import numpy as np

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.interpreters.onnx import evaluate_node, one_hot_responses, to_node_proto
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


@lowers(onnx.ResizeOp)
def _resize(op: onnx.ResizeOp, e: TirEmitter):
    x = op.X
    shape = static_shape(x, e)
    out_shape = static_shape(op.results[0], e, "result")
    inputs = {"roi": op.roi, "scales": op.scales, "sizes": op.sizes}
    given = {}
    for name, value in inputs.items():
        if value is None:
            continue
        array = constant_array(value)
        if array is None:
            raise e.error(f"the '{name}' input must be a compile-time constant")
        if array.size:
            given[name] = array.astype(np.float32 if name != "sizes" else np.int64)
    axes = list(op.axes.get_values()) if op.axes is not None else list(range(len(shape)))
    axes = [a % len(shape) for a in axes]
    policy = op.keep_aspect_ratio_policy.data
    if policy != "stretch" and "sizes" in given:
        # one scale for every resized axis (the smallest or largest of the
        # sizes' ratios), as ONNX's reference resizes with it
        ratios = [size / shape[a] for size, a in zip(given.pop("sizes"), axes)]
        scale = min(ratios) if policy == "not_larger" else max(ratios)
        given["scales"] = np.full(len(axes), scale, np.float32)
    nearest = op.mode.data == "nearest"
    y = x
    for axis in range(len(shape)):
        weights = _weights(op, e, shape, axes, axis, given, out_shape[axis])
        if weights.shape[0] == weights.shape[1] and np.array_equal(weights, np.eye(weights.shape[0])):
            continue
        if nearest:
            picked = weights.argmax(axis=1)
            if not np.array_equal(weights, np.eye(weights.shape[1])[picked]):
                raise e.error("nearest resizing gave weights that are not one-hot")
            y = e.gather(y, e.constant(picked.astype(np.int64)), axis)
        else:
            y = _contract(e, y, weights, axis)
    return [y]


def _weights(op, e: TirEmitter, shape, axes, axis: int, given: dict, size_out: int) -> np.ndarray:
    """The (output × input) weights of the resize along `axis`, column j
    being ONNX's reference Resize of a one-hot at position j."""
    size_in = shape[axis]
    node = to_node_proto(op)
    rank = len(shape)
    probe_shape = [size_in if a == axis else 1 for a in range(rank)]
    # inputs for a probe whose other axes have size 1 and are not resized
    scales = given.get("scales")
    sizes = given.get("sizes")
    if scales is not None:
        scales = np.array([s if a == axis else 1.0 for a, s in zip(axes, scales)], np.float32)
    if sizes is not None:
        sizes = np.array([s if a == axis else 1 for a, s in zip(axes, sizes)], np.int64)
    try:
        columns = one_hot_responses(node, probe_shape, [given.get("roi"), scales, sizes])
    except Exception as error:  # onnx.reference raises what its implementation raises
        raise e.error(f"cannot compute the resize weights: {type(error).__name__}: {error}") from None
    weights = np.stack([c.astype(np.float32).reshape(-1) for c in columns], axis=1)
    if weights.shape[0] != size_out:
        why = " (keep_aspect_ratio_policy rounds the size a scale floors: not supported)" if \
            op.keep_aspect_ratio_policy.data != "stretch" else ""
        raise e.error(f"axis {axis}: {size_out} output positions, but its scale gives {weights.shape[0]}{why}")
    if op.extrapolation_value.value.data != 0.0 and op.coordinate_transformation_mode.data == "tf_crop_and_resize":
        zero = np.zeros(probe_shape, np.float32)
        (out,) = evaluate_node(node, [zero, given.get("roi"), scales, sizes])
        if np.any(np.asarray(out) != 0):
            raise e.error("a nonzero extrapolation_value outside the crop is not supported")
    return weights


def _contract(e: TirEmitter, y, weights: np.ndarray, axis: int):
    """y with `axis` replaced by weights @ (that axis): a Matmul by the
    transposed weights on the last axis, the axis moved there and back."""
    rank = len(static_shape(y, e))
    w = e.constant(np.ascontiguousarray(weights.T).astype(np.float32))
    if axis == rank - 1:
        return e.matmul(y, w)
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = e.transpose(y, perm)
    return e.transpose(e.matmul(moved, w), perm)
