"""ONNX `DFT` as Matmuls: a DFT (forward or inverse, full or one-sided, any
`dft_length`) is linear in the real and imaginary parts of its input, so its
matrices come from ONNX's reference DFT on one-hot probes and cannot
disagree with it; each output part is a sum of Matmuls of the input parts
along the signal axis."""

from __future__ import annotations

import numpy as np
from xdsl.ir import SSAValue

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.interpreters.onnx import one_hot_responses, to_node_proto
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _known(e: TirEmitter, value: SSAValue | None, what: str) -> np.ndarray | None:
    if value is None:
        return None
    array = constant_array(value)
    if array is None:
        raise e.error(f"the '{what}' input must be a compile-time constant")
    return array


@lowers(onnx.DFTOp)
def _dft(op: onnx.DFTOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    rank, parts = len(shape), shape[-1]
    if parts not in (1, 2):
        raise e.error(f"the last dim holds {parts} values; a DFT input has 1 (real) or 2 (complex)")
    length = _known(e, op.dft_length, "dft_length")
    axis_input = _known(e, op.axis, "axis")
    axis = int(axis_input.reshape(-1)[0]) if axis_input is not None else -2  # (opset 20's default)
    axis = normalize_axis(axis, rank, e)
    if axis == rank - 1:
        raise e.error("the signal axis cannot be the last one, which holds the real and imaginary parts")
    weights = _matrices(op, e, shape, axis, length, axis_input)  # [output part][input part]: (m, n)
    # (an inverse of a one-sided spectrum is real: one output part)
    perm = [a for a in range(rank - 1) if a != axis] + [axis]
    inputs = []
    for p in range(parts):
        part = op.input if parts == 1 else e.slice(op.input, [rank - 1], [p], [p + 1], [1])
        part = e.reshape(part, shape[:-1])
        inputs.append(e.transpose(part, perm) if perm != list(range(rank - 1)) else part)
    back = [perm.index(a) for a in range(rank - 1)]
    outputs = []
    for out_part in range(len(weights)):
        total = None
        for p, x in enumerate(inputs):
            w = weights[out_part][p]
            if not w.any():
                continue
            term = e.matmul(x, e.constant(np.ascontiguousarray(w.T).astype(np.float32)))
            total = term if total is None else e.binary(BinaryFn.ADD, total, term)
        if total is None:  # an all-zero part (the imaginary part of a real signal's DC, say)
            m = weights[out_part][0].shape[0]
            total = e.constant(np.zeros([*(shape[a] for a in perm[:-1]), m], np.float32))
        if back != list(range(rank - 1)):
            total = e.transpose(total, back)
        out_shape = static_shape(total, e)
        outputs.append(e.reshape(total, [*out_shape, 1]))
    return [outputs[0] if len(outputs) == 1 else e.concat(outputs, rank - 1)]


def _matrices(op, e: TirEmitter, shape, axis: int, length, axis_input) -> list[list[np.ndarray]]:
    """Column j of matrix [o][p] is output part o of ONNX's reference DFT of
    a one-hot at position j of input part p."""
    rank, n, parts = len(shape), shape[axis], shape[-1]
    probe_shape = [1] * rank
    probe_shape[axis], probe_shape[-1] = n, parts
    try:
        responses = one_hot_responses(to_node_proto(op), probe_shape, [length, axis_input])
    except Exception as error:  # onnx.reference raises what its implementation raises
        raise e.error(f"cannot compute the DFT matrices: {type(error).__name__}: {error}") from None
    # probes in row-major order: position j of part p is response j * parts + p
    outs = [np.moveaxis(r.astype(np.float64), axis, 0).reshape(-1, r.shape[-1]) for r in responses]
    return [
        [np.stack([outs[j * parts + p][:, o] for j in range(n)], axis=1) for p in range(parts)]
        for o in range(outs[0].shape[1])
    ]
