"""`fuse-patterns`: what exporters write out op by op, back as the one `tir`
op Forge has for it (Forge's TVM path does the same with pattern
callbacks): fewer Forge calls, less device work.

- GELU, tanh form (0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))) and erf form
  (x·(1 + erf(x/√2))·0.5) → `tir.unary gelu_tanh` / `gelu`;
- layer normalisation written out (opset < 17: ReduceMean, Sub, Pow, ReduceMean,
  Add, Sqrt, Div, Mul, Add) → `tir.layernorm`;
- BatchNormalization after a Conv with constant weights, or a per-channel
  Mul or Add (a batch norm an exporter wrote out) → the Conv, its weights
  and bias scaled and shifted at compile time (a device's block of them
  after tp-partition: by ops, `block_folds`); the same after a
  BatchNormalization → its scale and bias; a per-channel (not scalar) Mul
  then Add of anything else → one BatchNormalization;
- a constant (or a device's block of one) added along a MatMul's last dim
  → the Matmul's bias; the batch dims flattened before a MatMul and
  restored after → gone;
- a Reshape of a Reshape → one Reshape; a Reshape, Transpose or Cast that
  changes nothing → its input; a Transpose of a Transpose → one;
- a Where whose condition is a constant all true or all false → the branch
  it picks (the expanded Attention's guard for fully masked rows, without a
  mask).

A pattern applies only where it is exact: its constants have the expected
values (within float32 rounding), reductions and normalisations run over
the last axis, and no value inside it has a user outside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.diagnostics import node_name
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr, fill_value
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn, UnaryFn
from forge_opt.transforms import block_folds
from forge_opt.transforms.block_folds import made_of_constants
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import Replacement, erase_dead_ops, rewrite_in_order

# elements of a `tir.full` a fold may make whole (a Conv's weights, say)
_FULL_LIMIT = 1 << 24


def _const(v: SSAValue) -> np.ndarray | None:
    """The value of a constant (a `tir.full` made whole: folds need its elements)."""
    op = v.owner
    if isinstance(op, tir.FullOp):
        t = dtypes.tensor(op.output.type)
        if math.prod(t.get_shape()) > _FULL_LIMIT:  # a ConstantOfShape of any size: not made whole
            return None
        return np.full(t.get_shape(), fill_value(op.fill), dtypes.numpy_dtype(t.element_type))
    return constant_array(v)


def _scalar(v: SSAValue, expected: float, rel: float = 1e-6) -> bool:
    """Whether v is a constant whose every element is `expected` (to float32 rounding)."""
    full = v.owner
    if isinstance(full, tir.FullOp):
        return dtypes.is_float(dtypes.numpy_dtype(dtypes.tensor(full.output.type).element_type)) and abs(
            fill_value(full.fill) - expected
        ) <= rel * max(1.0, abs(expected))
    a = _const(v)
    if a is None or a.size == 0 or not dtypes.is_float(a.dtype):
        return False
    tolerance = rel * max(1.0, abs(expected))
    values = a.reshape(-1)
    if abs(float(values[0]) - expected) > tolerance:  # most constants: one element read, not a weight's pages
        return False
    return bool(np.all(np.abs(values.astype(np.float64) - expected) <= tolerance))


def _binary(v: SSAValue, fn: BinaryFn) -> tir.BinaryOp | None:
    op = v.owner
    return op if isinstance(op, tir.BinaryOp) and op.fn.data == fn else None


def _unary(v: SSAValue, fn: UnaryFn) -> tir.UnaryOp | None:
    op = v.owner
    return op if isinstance(op, tir.UnaryOp) and op.fn.data == fn else None


def _pairs(op: tir.BinaryOp) -> Iterable[tuple[SSAValue, SSAValue]]:
    """The operand orders to try: both for add and mul."""
    yield op.lhs, op.rhs
    if op.fn.data in (BinaryFn.ADD, BinaryFn.MUL):
        yield op.rhs, op.lhs


def _by_scalar(v: SSAValue, fn: BinaryFn, value: float) -> SSAValue | None:
    """x when v is `x fn value` (either order for add and mul)."""
    op = _binary(v, fn)
    if op is None:
        return None
    for x, c in _pairs(op):
        if _scalar(c, value):
            return x
    return None


def _private(root: Operation, inner: Iterable[object]) -> bool:
    """Whether every value the pattern's inner ops make is used only inside it."""
    ops = [op for op in inner if isinstance(op, Operation)]
    inside = {id(op) for op in ops} | {id(root)}
    return all(id(use.operation) in inside for op in ops for r in op.results for use in r.uses)


def _same_type(a: SSAValue, b: SSAValue) -> bool:
    return a.type == b.type


def _gelu_tanh(root: tir.BinaryOp) -> Replacement | None:
    """(x·0.5)·(1 + tanh((x + x³·0.044715)·√(2/π)))."""
    for half, bracket in _pairs(root):
        x = _by_scalar(half, BinaryFn.MUL, 0.5)
        inner = _by_scalar(bracket, BinaryFn.ADD, 1.0)
        if x is None or inner is None:
            continue
        tanh = _unary(inner, UnaryFn.TANH)
        if tanh is None:
            continue
        arg = _by_scalar(tanh.input, BinaryFn.MUL, math.sqrt(2 / math.pi))
        total = _binary(arg, BinaryFn.ADD) if arg is not None else None
        if total is None:
            continue
        for y, cubic in _pairs(total):
            cube = _by_scalar(cubic, BinaryFn.MUL, 0.044715)
            power = _binary(cube, BinaryFn.POW) if cube is not None else None
            if y is x and power is not None and power.lhs is x and _scalar(power.rhs, 3.0):
                inner_ops = [half.owner, bracket.owner, tanh, tanh.input.owner, total, cubic.owner, power]
                if _private(root, inner_ops) and _same_type(x, root.output):
                    new = tir.UnaryOp(UnaryFn.GELU_TANH, x)
                    return [new], [new.output]
    return None


def _gelu_erf(root: tir.BinaryOp) -> Replacement | None:
    """(x·(1 + erf(x/√2)))·0.5, or x·((1 + erf(x/√2))·0.5) and the like."""
    product = _by_scalar(root.output, BinaryFn.MUL, 0.5)
    candidates = []
    if product is not None:
        op = _binary(product, BinaryFn.MUL)
        if op is not None:
            candidates += [(x, b, [op]) for x, b in _pairs(op)]
    for x, half_bracket in _pairs(root):
        b = _by_scalar(half_bracket, BinaryFn.MUL, 0.5)
        if b is not None:
            candidates.append((x, b, [half_bracket.owner]))
    for x, bracket, outer in candidates:
        erf_out = _by_scalar(bracket, BinaryFn.ADD, 1.0)
        erf = _unary(erf_out, UnaryFn.ERF) if erf_out is not None else None
        if erf is None:
            continue
        scaled = erf.input
        arg = _by_scalar(scaled, BinaryFn.DIV, math.sqrt(2))
        if arg is None:
            arg = _by_scalar(scaled, BinaryFn.MUL, 1 / math.sqrt(2))
        if arg is x and _private(root, [*outer, bracket.owner, erf, scaled.owner]) and _same_type(x, root.output):
            new = tir.UnaryOp(UnaryFn.GELU, x)
            return [new], [new.output]
    return None


def _last_axis_mean(v: SSAValue) -> SSAValue | None:
    op = v.owner
    if not (isinstance(op, tir.ReduceOp) and op.fn.data == ReduceFn.MEAN and op.keepdims.value.data):
        return None
    rank = len(dtypes.tensor(op.input.type).get_shape())
    return op.input if list(op.axes.get_values()) == [rank - 1] else None


def _layernorm(root: tir.BinaryOp) -> Replacement | None:
    """((x - mean(x)) / sqrt(mean((x - mean(x))²) + eps))·gamma + beta, over the last axis."""
    for scaled, beta in _pairs(root):
        mul = _binary(scaled, BinaryFn.MUL)
        if mul is None or _const(beta) is None:
            continue
        for normed, gamma in _pairs(mul):
            div = _binary(normed, BinaryFn.DIV)
            if div is None or _const(gamma) is None:
                continue
            centered = _binary(div.lhs, BinaryFn.SUB)
            root_op = _unary(div.rhs, UnaryFn.SQRT)
            if centered is None or root_op is None:
                continue
            x = centered.lhs
            if _last_axis_mean(centered.rhs) is not x:
                continue
            shifted = _binary(root_op.input, BinaryFn.ADD)
            if shifted is None:
                continue
            for variance, eps in _pairs(shifted):
                squared = _last_axis_mean(variance)
                square = _binary(squared, BinaryFn.POW) if squared is not None else None
                eps_value = _const(eps)
                if square is None or square.lhs is not centered.output or not _scalar(square.rhs, 2.0):
                    continue
                if eps_value is None or eps_value.size != 1:
                    continue
                width = dtypes.tensor(x.type).get_shape()[-1]
                params = [np.broadcast_to(np.asarray(_const(p)), (width,)) for p in (gamma, beta)]
                inner = [mul, div, centered, centered.rhs.owner, root_op, shifted, variance.owner, square]
                if not _private(root, inner) or not _same_type(x, root.output):
                    continue
                new_ops: list[Operation] = []
                operands = []
                for given, value in zip((gamma, beta), params):
                    if dtypes.tensor(given.type).get_shape() == [width]:
                        operands.append(given)  # the model's own weight, loaded by its name
                    else:
                        const = tir.ConstantOp(array_to_attr(np.ascontiguousarray(value)))
                        new_ops.append(const)
                        operands.append(const.output)
                ln = tir.LayernormOp(x, operands[0], operands[1], float(eps_value.reshape(-1)[0]))
                return [*new_ops, ln], [ln.output]
    return None


def _conv_batchnorm(root: tir.BatchnormOp) -> Replacement | None:
    """BatchNormalization after a Conv of constant weights: y = (conv(x)·s +
    (bias − mean·s)) with s = scale / sqrt(var + eps), so the Conv's weights
    times s and its bias (b − mean)·s + bias."""
    conv = root.input.owner
    if not isinstance(conv, tir.Conv2dOp) or not _private(root, [conv]):
        return None
    w = _const(conv.weight)
    b = _const(conv.bias) if conv.bias is not None else None
    if w is None or (conv.bias is not None and b is None):  # a device's block: folded by ops
        return block_folds.conv_batchnorm(conv, root) if conv.output.type == root.output.type else None
    params = [_const(v) for v in (root.scale, root.bias, root.mean, root.var)]
    if any(p is None for p in params):
        return None
    scale, bias, mean, var = (np.asarray(p, np.float64) for p in params)  # pyright: ignore[reportArgumentType]
    s = scale / np.sqrt(var + root.epsilon.value.data)
    out_ch = w.shape[0]
    if s.size != out_ch:
        return None
    dtype = w.dtype
    new_w = (w.astype(np.float64) * s.reshape(-1, *([1] * (w.ndim - 1)))).astype(dtype)
    old_b = np.zeros(out_ch) if b is None else b.astype(np.float64)
    new_b = ((old_b - mean) * s + bias).astype(dtype)
    if conv.output.type != root.output.type:
        return None
    return _conv_with(conv, new_w, new_b)


def _per_channel(v: SSAValue, channels: int, rank: int) -> np.ndarray | None:
    """A constant that broadcasts against NC... activations along the channel
    axis only, as its C values (a scalar repeated C times)."""
    a = _const(v)
    if a is None or a.ndim > rank or not dtypes.is_float(a.dtype):
        return None
    shape = (1,) * (rank - a.ndim) + a.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(a.reshape(-1), (channels,)).astype(np.float64)


def _conv_affine(root: tir.BinaryOp) -> Replacement | None:
    """A per-channel scale or shift after a Conv of constant weights (a
    BatchNormalization an exporter wrote as Mul and Add): into the weights
    (scale) or the bias (either)."""
    for y, c in _pairs(root):
        conv = y.owner
        if not isinstance(conv, tir.Conv2dOp) or not _private(root, [conv]) or y.type != root.output.type:
            continue
        w = _const(conv.weight)
        b = _const(conv.bias) if conv.bias is not None else None
        if w is None or (conv.bias is not None and b is None):  # a device's block: folded by ops
            folded = block_folds.conv_affine(conv, root.fn.data, c)
            if folded is not None:
                return folded
            continue
        values = _per_channel(c, w.shape[0], len(dtypes.tensor(y.type).get_shape()))
        if values is None:
            continue
        old_b = np.zeros(w.shape[0]) if b is None else b.astype(np.float64)
        if root.fn.data == BinaryFn.MUL:
            new_w = (w.astype(np.float64) * values.reshape(-1, *([1] * (w.ndim - 1)))).astype(w.dtype)
            new_b = (old_b * values).astype(w.dtype)
        else:
            new_w, new_b = w, (old_b + values).astype(w.dtype)
        return _conv_with(conv, new_w, new_b)
    return None


def _norm_affine(root: tir.BinaryOp) -> Replacement | None:
    """A per-channel scale or shift after a BatchNormalization of constant
    parameters (Caffe's Scale layer after its BatchNorm): into its scale and
    bias. A scale then a shift of anything else (rank 4): one
    BatchNormalization of mean 0, variance 1 and epsilon 0, which divides
    by sqrt(1) = 1 exactly."""
    for y, c in _pairs(root):
        producer = y.owner
        if y.type != root.output.type or len(dtypes.tensor(y.type).get_shape()) != 4:
            continue
        channels = dtypes.tensor(y.type).get_shape()[1]
        values = _per_channel(c, channels, 4)
        if values is None:
            continue
        if isinstance(producer, tir.BatchnormOp) and _private(root, [producer]):
            params = [_const(v) for v in (producer.scale, producer.bias)]
            if any(p is None for p in params):
                continue
            scale, bias = (np.asarray(p, np.float64) for p in params)  # pyright: ignore[reportArgumentType]
            if root.fn.data == BinaryFn.MUL:
                scale, bias = scale * values, bias * values
            else:
                bias = bias + values
            return _batchnorm(producer.input, scale, bias, producer.mean, producer.var, producer.epsilon.value.data)
        # (scalars stay Multiply and Add: a Batchnorm would only add constants)
        mul = _binary(y, BinaryFn.MUL) if root.fn.data == BinaryFn.ADD and _size(c) > 1 else None
        if mul is not None and _private(root, [mul]):
            for x, s in _pairs(mul):
                scale = _per_channel(s, channels, 4)
                if scale is not None and _size(s) > 1 and x.type == root.output.type:
                    dtype = dtypes.numpy_dtype(dtypes.tensor(x.type).element_type)
                    zero = tir.ConstantOp(array_to_attr(np.zeros(channels, dtype)))
                    one = tir.ConstantOp(array_to_attr(np.ones(channels, dtype)))
                    ops, values_out = _batchnorm(x, scale, values, zero.output, one.output, 0.0)
                    return [zero, one, *ops], values_out
    return None


def _size(v: SSAValue) -> int:
    return math.prod(dtypes.tensor(v.type).get_shape())


def _batchnorm(x: SSAValue, scale: np.ndarray, bias: np.ndarray, mean: SSAValue, var: SSAValue, eps: float):
    dtype = dtypes.numpy_dtype(dtypes.tensor(x.type).element_type)
    sc = tir.ConstantOp(array_to_attr(scale.astype(dtype)))
    bc = tir.ConstantOp(array_to_attr(bias.astype(dtype)))
    bn = tir.BatchnormOp(x, sc.output, bc.output, mean, var, eps)
    return [sc, bc, bn], [bn.output]


def _conv_with(conv: tir.Conv2dOp, weight: np.ndarray, bias: np.ndarray) -> Replacement:
    wc = tir.ConstantOp(array_to_attr(np.ascontiguousarray(weight)))
    bc = tir.ConstantOp(array_to_attr(np.ascontiguousarray(bias)))
    new = tir.Conv2dOp(
        conv.input, wc.output, bc.output, list(conv.strides.get_values()), list(conv.pads.get_values()),
        list(conv.dilations.get_values()), conv.groups.value.data,
    )
    return [wc, bc, new], [new.output]


def _flattened_matmul(root: tir.ReshapeOp) -> Replacement | None:
    """reshape(matmul(reshape(x, [B·S, K]), W), [B, S, N]) → matmul(x, W):
    exporters flatten the batch dims around a Linear; Matmul broadcasts
    them itself."""
    mm = root.input.owner
    if not isinstance(mm, tir.MatmulOp) or not _private(root, [mm]):
        return None
    flat = mm.lhs.owner
    if not isinstance(flat, tir.ReshapeOp) or len(dtypes.tensor(mm.rhs.type).get_shape()) != 2:
        return None
    x = flat.input
    x_shape = dtypes.tensor(x.type).get_shape()
    out = dtypes.tensor(root.output.type).get_shape()
    flat_shape = dtypes.tensor(flat.output.type).get_shape()
    if len(flat_shape) != 2 or len(x_shape) < 2 or flat_shape[1] != x_shape[-1]:
        return None
    if list(out) != [*x_shape[:-1], dtypes.tensor(mm.output.type).get_shape()[-1]]:
        return None
    new = tir.MatmulOp(x, mm.rhs, mm.bias)
    new.location = mm.location  # the Linear's node, not the Reshape's
    return ([new], [new.output]) if new.output.type == root.output.type else None


def _reshape(root: tir.ReshapeOp) -> Replacement | None:
    if root.input.type == root.output.type:
        return [], [root.input]
    fused = _flattened_matmul(root)
    if fused is not None:
        return fused
    inner = root.input.owner
    if isinstance(inner, tir.ReshapeOp) and _private(root, [inner]):
        new = tir.ReshapeOp(inner.input, dtypes.tensor(root.output.type).get_shape())
        return [new], [new.output]
    return None


def _transpose(root: tir.TransposeOp) -> Replacement | None:
    perm = list(root.perm.get_values())
    if perm == sorted(perm):
        return [], [root.input]
    inner = root.input.owner
    if isinstance(inner, tir.TransposeOp) and _private(root, [inner]):
        first = list(inner.perm.get_values())
        combined = [first[p] for p in perm]
        if combined == sorted(combined):
            return [], [inner.input]
        new = tir.TransposeOp(inner.input, combined)
        return [new], [new.output]
    return None


def _cast(root: tir.CastOp) -> Replacement | None:
    return ([], [root.input]) if root.input.type == root.output.type else None


def _where(root: tir.WhereOp) -> Replacement | None:
    cond = _const(root.condition)
    if cond is None or cond.size == 0:
        return None
    picked = root.x if cond.all() else root.y if not cond.any() else None
    return ([], [picked]) if picked is not None and picked.type == root.output.type else None


def _matmul_bias(root: tir.BinaryOp) -> Replacement | None:
    """A constant added along the product's last dim → Matmul's bias."""
    for y, c in _pairs(root):
        mm = y.owner
        if not isinstance(mm, tir.MatmulOp) or mm.bias is not None or y.type != root.output.type:
            continue
        if not made_of_constants(c):
            continue
        shape = dtypes.tensor(c.type).get_shape()
        width = dtypes.tensor(y.type).get_shape()[-1]
        if any(d != 1 for d in shape[:-1]) or (shape and shape[-1] not in (1, width)):
            continue
        if len(shape) > len(dtypes.tensor(y.type).get_shape()) or not _private(root, [mm]):
            continue
        new = tir.MatmulOp(mm.lhs, mm.rhs, c)
        return [new], [new.output]
    return None


#: x op c is x where c is this everywhere (c on the right only, for sub and div)
_IDENTITIES = {BinaryFn.MUL: (1.0, True), BinaryFn.ADD: (0.0, True), BinaryFn.SUB: (0.0, False),
               BinaryFn.DIV: (1.0, False)}


def _identity_arithmetic(root: Operation) -> Replacement | None:
    """`x * 1`, `x + 0`, `x - 0`, `x / 1` by a constant the model computes
    (Optimum's RoPE scales cos and sin by an attention scaling of 1.0): x.
    Never by a model weight, which a user may load with other values."""
    if not isinstance(root, tir.BinaryOp) or root.fn.data not in _IDENTITIES:
        return None
    value, either_side = _IDENTITIES[root.fn.data]
    sides = [(root.lhs, root.rhs), (root.rhs, root.lhs)] if either_side else [(root.lhs, root.rhs)]
    for x, c in sides:
        weight = isinstance(c.owner, tir.ConstantOp) and c.owner.weight_name is not None
        if not weight and x.type == root.output.type and _scalar(c, value, rel=0.0):
            return [], [x]
    return None


def _binary_root(op: tir.BinaryOp) -> Replacement | None:
    if op.fn.data == BinaryFn.MUL:
        return _gelu_tanh(op) or _gelu_erf(op) or _conv_affine(op) or _norm_affine(op)
    if op.fn.data == BinaryFn.ADD:
        return _layernorm(op) or _conv_affine(op) or _norm_affine(op) or _matmul_bias(op)
    return None


# the patterns, by the class of the op they end at (one dict lookup per op)
_PATTERNS: dict[type[Operation], Callable[..., Replacement | None]] = {
    tir.BinaryOp: _binary_root,
    tir.BatchnormOp: _conv_batchnorm,
    tir.ReshapeOp: _reshape,
    tir.TransposeOp: _transpose,
    tir.CastOp: _cast,
    tir.WhereOp: _where,
}


def _located(op: Operation) -> Replacement | None:
    """The pattern that ends at `op`, if one matches; each new op at the location of the op it replaces (diagnostics
    and emitted names keep naming the ONNX node)."""
    pattern = _PATTERNS.get(type(op))
    found = pattern(op) if pattern is not None else None
    if found is not None:
        for new in found[0]:
            if node_name(new) is None:
                new.location = op.location
    return found


@dataclass(frozen=True)
class FusePatternsPass(ModulePass):
    """Rewrite exporters' decompositions back into the one `tir` op Forge has."""

    name = "fuse-patterns"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_in_order(op, _located)
        # after the fusions, which read the decompositions as exporters write them
        rewrite_in_order(op, _identity_arithmetic)
        erase_dead_ops(op)
