"""Lowerings of ONNX's normalisations to `tir`: BatchNormalization,
Softmax, LayerNormalization, RMSNormalization, LpNormalization,
MeanVarianceNormalization, GroupNormalization, LRN, InstanceNormalization."""

from __future__ import annotations

import math

import numpy as np

from forge_opt import dtypes
from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.transforms.lowering import LoweringTable, normalize_axis, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


@lowers(onnx.BatchNormalizationOp)
def _batchnorm(op: onnx.BatchNormalizationOp, e: TirEmitter):
    if op.training_mode.value.data:
        raise e.error("training_mode=1 is not supported for inference")
    bn = tir.BatchnormOp(op.X, op.scale, op.B, op.input_mean, op.input_var, op.epsilon.value.data)
    return [e.value(bn), None, None][: len(op.results)]


@lowers(onnx.SoftmaxOp, onnx.LogSoftmaxOp)
def _softmax(op: onnx.SoftmaxOp | onnx.LogSoftmaxOp, e: TirEmitter):
    rank = len(static_shape(op.input, e))
    axis = normalize_axis(op.axis.value.data, rank, e)
    return [e.value(tir.SoftmaxOp(op.input, axis, log=isinstance(op, onnx.LogSoftmaxOp)))]


@lowers(onnx.LayerNormalizationOp)
def _layernorm(op: onnx.LayerNormalizationOp, e: TirEmitter):
    shape = static_shape(op.X, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    extra = [r for r in op.results[1:] if r is not None]
    eps = op.epsilon.value.data
    if axis == len(shape) - 1 and not any(r.uses for r in extra):
        bias = op.B if op.B is not None else e.value(tir.ConstantOp(_zeros(shape[-1:], op.X)))
        return [e.value(tir.LayernormOp(op.X, op.Scale, bias, eps))] + [None] * len(extra)
    # Normalising over several trailing axes (or returning the statistics):
    # the same arithmetic, written out.
    axes = list(range(axis, len(shape)))
    mean = e.reduce(ReduceFn.MEAN, op.X, axes, True)
    centered = e.binary(BinaryFn.SUB, op.X, mean)
    var = e.reduce(ReduceFn.MEAN, e.binary(BinaryFn.MUL, centered, centered), axes, True)
    inv_std = e.unary(UnaryFn.RECIPROCAL, e.unary(UnaryFn.SQRT, e.binary(BinaryFn.ADD, var, e.scalar(eps, var))))
    y = e.binary(BinaryFn.MUL, e.binary(BinaryFn.MUL, centered, inv_std), op.Scale)
    if op.B is not None:
        y = e.binary(BinaryFn.ADD, y, op.B)
    return [y, mean, inv_std][: len(op.results)]


@lowers(onnx.RMSNormalizationOp)
def _rms_norm(op: onnx.RMSNormalizationOp, e: TirEmitter):
    shape = static_shape(op.X, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    axes = list(range(axis, len(shape)))
    mean_square = e.reduce(ReduceFn.MEAN, e.binary(BinaryFn.MUL, op.X, op.X), axes, True)
    eps = op.epsilon.value.data
    rms = e.unary(UnaryFn.SQRT, e.binary(BinaryFn.ADD, mean_square, e.scalar(eps, mean_square)))
    return [e.binary(BinaryFn.MUL, e.binary(BinaryFn.DIV, op.X, rms), op.scale)]


@lowers(onnx.LpNormalizationOp)
def _lp_norm(op: onnx.LpNormalizationOp, e: TirEmitter):
    shape = static_shape(op.input, e)
    axis = normalize_axis(op.axis.value.data, len(shape), e)
    p = op.p.value.data
    x = op.input
    if p == 1:
        norm = e.reduce(ReduceFn.SUM, e.unary(UnaryFn.ABS, x), [axis], True)
    elif p == 2:
        norm = e.unary(UnaryFn.SQRT, e.reduce(ReduceFn.SUM, e.binary(BinaryFn.MUL, x, x), [axis], True))
    else:
        raise e.error(f"p={p} is not supported (1 or 2)")
    return [e.binary(BinaryFn.DIV, x, norm)]


@lowers(onnx.MeanVarianceNormalizationOp)
def _mvn(op: onnx.MeanVarianceNormalizationOp, e: TirEmitter):
    x = op.X
    axes = list(op.axes.get_values())
    mean = e.reduce(ReduceFn.MEAN, x, axes, True)
    centered = e.binary(BinaryFn.SUB, x, mean)
    var = e.reduce(ReduceFn.MEAN, e.binary(BinaryFn.MUL, centered, centered), axes, True)
    std = e.unary(UnaryFn.SQRT, var)
    return [e.binary(BinaryFn.DIV, centered, e.binary(BinaryFn.ADD, std, e.scalar(1e-9, std)))]


@lowers(onnx.GroupNormalizationOp)
def _group_norm(op: onnx.GroupNormalizationOp, e: TirEmitter):
    shape = static_shape(op.X, e)
    groups = op.num_groups.value.data
    n, c = shape[0], shape[1]
    grouped = e.reshape(op.X, [n, groups, (c // groups) * math.prod(shape[2:])])
    mean = e.reduce(ReduceFn.MEAN, grouped, [2], True)
    centered = e.binary(BinaryFn.SUB, grouped, mean)
    var = e.reduce(ReduceFn.MEAN, e.binary(BinaryFn.MUL, centered, centered), [2], True)
    eps = op.epsilon.value.data
    std = e.unary(UnaryFn.SQRT, e.binary(BinaryFn.ADD, var, e.scalar(eps, var)))
    normed = e.reshape(e.binary(BinaryFn.DIV, centered, std), shape)
    bshape = [1, c] + [1] * (len(shape) - 2)
    scale = e.reshape(op.scale, bshape)
    bias = e.reshape(op.bias, bshape)
    return [e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, normed, scale), bias)]


def _zeros(shape, like):
    from forge_opt import dtypes
    from forge_opt.dialects.elements import array_to_attr

    return array_to_attr(np.zeros(shape, dtypes.numpy_dtype(like.type.element_type)))


@lowers(onnx.LRNOp)
def _lrn(op: onnx.LRNOp, e: TirEmitter):
    """x / (bias + alpha/size * sum of squares over a channel window)^beta.
    The window sum, times alpha/size, is one Matmul of a banded C x C
    constant with the squares laid out as [N, C, positions]."""
    shape = static_shape(op.X, e)
    size = op.size.value.data
    alpha, beta, bias = op.alpha.value.data, op.beta.value.data, op.bias.value.data
    n, channels = shape[0], shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    square = e.binary(BinaryFn.MUL, op.X, op.X)
    offsets = np.arange(channels)[None, :] - np.arange(channels)[:, None]  # j - i
    band = ((offsets >= -lo) & (offsets <= hi)) * (alpha / size)
    dtype = dtypes.numpy_dtype(dtypes.tensor(op.X.type).element_type)
    positions = math.prod(shape[2:])
    flat = e.reshape(square, [n, channels, positions])
    summed = e.value(tir.MatmulOp(e.constant(band.astype(dtype)), flat))
    scaled = e.reshape(summed, shape)
    base = e.binary(BinaryFn.ADD, scaled, e.scalar(bias, scaled))
    denom = e.binary(BinaryFn.POW, base, e.scalar(beta, base))
    return [e.binary(BinaryFn.DIV, op.X, denom)]


@lowers(onnx.InstanceNormalizationOp)
def _instance_norm(op: onnx.InstanceNormalizationOp, e: TirEmitter):
    """(x - mean) / sqrt(var + eps) * scale + bias over the spatial axes."""
    shape = static_shape(op.input, e)
    axes = list(range(2, len(shape)))
    mean = e.reduce(ReduceFn.MEAN, op.input, axes, True)
    centered = e.binary(BinaryFn.SUB, op.input, mean)
    var = e.reduce(ReduceFn.MEAN, e.binary(BinaryFn.MUL, centered, centered), axes, True)
    denom = e.unary(UnaryFn.SQRT, e.binary(BinaryFn.ADD, var, e.scalar(op.epsilon.value.data, var)))
    normed = e.binary(BinaryFn.DIV, centered, denom)
    bshape = [1, shape[1]] + [1] * (len(shape) - 2)
    scale = e.reshape(op.scale, bshape)
    bias = e.reshape(op.B, bshape)
    return [e.binary(BinaryFn.ADD, e.binary(BinaryFn.MUL, normed, scale), bias)]
