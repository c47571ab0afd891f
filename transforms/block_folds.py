"""fuse-patterns' folds into a Conv whose weights are constants but not
known here: after tp-partition, a device's block of them (`shard.all_slice`
of the model's weight), which differs by device. The fold is then written
as `tir` ops on those constants (the weights times the scale, the bias
shifted), which the tensor-parallel writer computes for each device at
compile time, as it computes every block (`targets/devices/program.py`):
each device's Conv reads folded weights, as on one device."""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation, SSAValue

from forge_opt import dtypes
from forge_opt.dialects import shard, tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.lowering import Replacement


def _constant_ops(v: SSAValue, limit: int = 16) -> list[Operation] | None:
    """The ops computing v, if from constants alone and in at most `limit`."""
    todo, seen, ops = [v], set(), []
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        op = v.owner
        if not isinstance(op, Operation) or len(seen) > limit:
            return None
        if not op.operands and not isinstance(op, tir.ConstantOp | tir.FullOp):
            return None
        ops.append(op)
        todo.extend(op.operands)
    return ops


def made_of_constants(v: SSAValue) -> bool:
    """Whether v is computed from constants alone: a constant, or a
    device's block of one (the bias a row-parallel layer adds on device 0
    alone: a Where of blocks)."""
    return _constant_ops(v) is not None


def _device_block(v: SSAValue | None) -> bool:
    """Whether v is made of constants and of a device's block of one."""
    ops = _constant_ops(v) if v is not None else None
    return ops is not None and any(isinstance(op, shard.AllSliceOp) for op in ops)


def _channels(v: SSAValue, conv: tir.Conv2dOp, ops: list[Operation], vector: bool = False) -> SSAValue | None:
    """v, a constant per output channel of `conv` (or one for all) as a
    vector of its C values: broadcast against the NC... output, or (with
    `vector`, a BatchNormalization's parameters) a vector already."""
    out = dtypes.tensor(conv.output.type)
    rank, c = len(out.get_shape()), dtypes.tensor(conv.weight.type).get_shape()[0]
    t = dtypes.tensor(v.type)
    if t.element_type != out.element_type or not made_of_constants(v):
        return None
    if vector:
        return v if list(t.get_shape()) == [c] else None
    shape = (1,) * (rank - len(t.get_shape())) + tuple(t.get_shape())
    if len(shape) != rank or any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, c):
        return None
    vec: Operation = tir.ReshapeOp(v, [shape[1]])
    ops.append(vec)
    if shape[1] != c:
        vec = tir.BroadcastOp(vec.results[0], [c])
        ops.append(vec)
    return vec.results[0]


def _binary(fn: BinaryFn, a: SSAValue, b: SSAValue, ops: list[Operation]) -> SSAValue:
    op = tir.BinaryOp(fn, a, b)
    ops.append(op)
    return op.output


def _conv(conv: tir.Conv2dOp, scale: SSAValue | None, shift: SSAValue | None,
          ops: list[Operation]) -> Replacement | None:
    """conv(x)·scale + shift (vectors of its output channels) as one Conv,
    when its weights are a device's block (a constant's fold is
    fuse-patterns' own, computed at once)."""
    if not _device_block(conv.weight) or (conv.bias is not None and not made_of_constants(conv.bias)):
        return None
    w, b = conv.weight, conv.bias
    if scale is not None:
        shape = dtypes.tensor(w.type).get_shape()
        column = tir.ReshapeOp(scale, [shape[0], *([1] * (len(shape) - 1))])
        ops.append(column)
        w = _binary(BinaryFn.MUL, w, column.output, ops)
        b = _binary(BinaryFn.MUL, b, scale, ops) if b is not None else None
    if shift is not None:
        b = _binary(BinaryFn.ADD, b, shift, ops) if b is not None else shift
    new = tir.Conv2dOp(conv.input, w, b, list(conv.strides.get_values()), list(conv.pads.get_values()),
                       list(conv.dilations.get_values()), conv.groups.value.data)
    return [*ops, new], [new.output]


def conv_affine(conv: tir.Conv2dOp, fn: BinaryFn, c: SSAValue) -> Replacement | None:
    """conv(x)·c or conv(x) + c, c per channel: as fuse-patterns folds it."""
    ops: list[Operation] = []
    vec = _channels(c, conv, ops)
    if vec is None:
        return None
    return _conv(conv, vec, None, ops) if fn == BinaryFn.MUL else _conv(conv, None, vec, ops)


def conv_batchnorm(conv: tir.Conv2dOp, bn: tir.BatchnormOp) -> Replacement | None:
    """BatchNormalization(conv(x)): s = scale / sqrt(var + eps), the weights
    times s, the bias (b − mean)·s + bias."""
    ops: list[Operation] = []
    scale, bias, mean, var = (_channels(v, conv, ops, vector=True) for v in (bn.scale, bn.bias, bn.mean, bn.var))
    if scale is None or bias is None or mean is None or var is None:
        return None
    dtype = dtypes.numpy_dtype(dtypes.tensor(conv.output.type).element_type)
    eps = tir.ConstantOp(array_to_attr(np.array([bn.epsilon.value.data], dtype)))
    ops.append(eps)
    root = tir.UnaryOp(UnaryFn.SQRT, _binary(BinaryFn.ADD, var, eps.output, ops))
    ops.append(root)
    s = _binary(BinaryFn.DIV, scale, root.output, ops)
    # (b − mean)·s + bias as scale then shift: b·s + (bias − mean·s)
    shift = _binary(BinaryFn.SUB, bias, _binary(BinaryFn.MUL, mean, s, ops), ops)
    return _conv(conv, s, shift, ops)
