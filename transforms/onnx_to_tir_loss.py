"""Lowerings of ONNX's loss ops to `tir`. The class targets must be known at
compile time, so picking each target's score becomes a product with a
constant one-hot mask and a sum over the class axis."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import IntegerAttr, TensorType, i64

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.onnx_to_tir_elementwise import binary, constant, scalar, unary
from forge_opt.transforms.onnx_to_tir_nn import reduce
from forge_opt.transforms.onnx_to_tir_shape import constant_ints

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


def _nll(e, log_prob, target_value, weight, reduction: str, ignore_index):
    shape = static_shape(log_prob, e)
    dtype = dtypes.numpy_dtype(log_prob.type.element_type)
    targets = np.asarray(constant_ints(e, target_value, "target")).reshape(
        [shape[0], *shape[2:]]
    )
    keep = np.ones(targets.shape, bool) if ignore_index is None else targets != ignore_index
    safe = np.where(keep, targets, 0)
    onehot = (np.arange(shape[1]).reshape([1, -1] + [1] * (len(shape) - 2)) == np.expand_dims(safe, 1))
    onehot = (onehot & np.expand_dims(keep, 1)).astype(dtype)
    picked = reduce(e, "sum", binary(e, "mul", log_prob, constant(e, onehot)), [1], False)
    if weight is not None:
        w = e.value(
            tir.GatherOp.build(
                operands=[weight, constant(e, safe.astype(np.int64))],
                result_types=[TensorType(weight.type.element_type, list(safe.shape))],
                properties={"axis": IntegerAttr(0, i64)},
            )
        )
        w = binary(e, "mul", w, constant(e, keep.astype(dtype)))
        loss = unary(e, "neg", binary(e, "mul", picked, w))
    else:
        w = None
        loss = unary(e, "neg", binary(e, "mul", picked, constant(e, keep.astype(dtype))))
    if reduction == "none":
        return loss
    axes = list(range(len(safe.shape)))
    total = reduce(e, "sum", loss, axes, False)
    if reduction == "sum":
        return total
    if w is None:
        return binary(e, "div", total, scalar(e, float(keep.sum()), total))
    return binary(e, "div", total, reduce(e, "sum", w, axes, False))


@lowers("NegativeLogLikelihoodLoss")
def _nll_loss(op, e):
    ignore = op.ignore_index.value.data if op.ignore_index is not None else None
    return [_nll(e, op.input, op.target, op.weight, op.reduction.data, ignore)]


@lowers("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(op, e):
    shape = static_shape(op.scores, e)
    log_prob = e.value(
        tir.SoftmaxOp.build(
            operands=[op.scores],
            result_types=[op.scores.type],
            properties={"axis": IntegerAttr(1 if len(shape) > 1 else 0, i64), "log": IntegerAttr(1, i64)},
        )
    )
    ignore = op.ignore_index.value.data if op.ignore_index is not None else None
    loss = _nll(e, log_prob, op.labels, op.weights, op.reduction.data, ignore)
    return [loss, log_prob][: len(op.results)]
