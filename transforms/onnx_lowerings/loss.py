"""Lowerings of ONNX's loss ops to `tir`. The class targets must be known at
compile time, so picking each target's score becomes a product with a
constant one-hot mask and a sum over the class axis."""

from __future__ import annotations

import numpy as np

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _nll(e, log_prob, target_value, weight, reduction: str, ignore_index):
    shape = static_shape(log_prob, e)
    dtype = dtypes.numpy_dtype(log_prob.type.element_type)
    targets = np.asarray(e.constant_ints(target_value, "target")).reshape(
        [shape[0], *shape[2:]]
    )
    keep = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    safe = np.where(keep, targets, 0)
    onehot = (np.arange(shape[1]).reshape([1, -1] + [1] * (len(shape) - 2)) == np.expand_dims(safe, 1))
    onehot = (onehot & np.expand_dims(keep, 1)).astype(dtype)
    picked = e.reduce(ReduceFn.SUM, e.binary(BinaryFn.MUL, log_prob, e.constant(onehot)), [1], False)
    if weight is not None:
        w = e.gather(weight, e.constant(safe.astype(np.int64)), 0)
        w = e.binary(BinaryFn.MUL, w, e.constant(keep.astype(dtype)))
        loss = e.unary(UnaryFn.NEG, e.binary(BinaryFn.MUL, picked, w))
    else:
        w = None
        loss = e.unary(UnaryFn.NEG, e.binary(BinaryFn.MUL, picked, e.constant(keep.astype(dtype))))
    if reduction == "none":
        return loss
    axes = list(range(len(safe.shape)))
    total = e.reduce(ReduceFn.SUM, loss, axes, False)
    if reduction == "sum":
        return total
    if w is None:
        return e.binary(BinaryFn.DIV, total, e.scalar(float(keep.sum()), total))
    return e.binary(BinaryFn.DIV, total, e.reduce(ReduceFn.SUM, w, axes, False))


@lowers(onnx.NegativeLogLikelihoodLossOp)
def _nll_loss(op: onnx.NegativeLogLikelihoodLossOp, e: TirEmitter):
    ignore = op.ignore_index.value.data if op.ignore_index is not None else None
    return [_nll(e, op.input, op.target, op.weight, op.reduction.data, ignore)]


@lowers(onnx.SoftmaxCrossEntropyLossOp)
def _softmax_cross_entropy(op: onnx.SoftmaxCrossEntropyLossOp, e: TirEmitter):
    shape = static_shape(op.scores, e)
    log_prob = e.value(tir.SoftmaxOp(op.scores, 1 if len(shape) > 1 else 0, log=True))
    ignore = op.ignore_index.value.data if op.ignore_index is not None else None
    loss = _nll(e, log_prob, op.labels, op.weights, op.reduction.data, ignore)
    return [loss, log_prob][: len(op.results)]
