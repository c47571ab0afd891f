"""How each `tir` op carries a sharding over a 1-d grid of P devices: the one
table both tensor-parallel passes use (`tensor-parallel` to choose layer
cases, `tp-partition` to rewrite to per-device shapes).

A value is replicated (every device holds it whole), split along one axis
(device k holds the k-th of P equal blocks, or, on a mesh, of R blocks by
its row: `blocks`, whole along each row), or partial (every device holds
a summand of it, or for `PARTIAL_MAX` a part whose maximum it is: a
maximum over a split axis, as DynamicQuantizeLinear takes its range).
`rule(op, given, P)` says which sharding each operand must have for the
op to run locally and what its results then are; a caller reshards an
operand that has another (`tp/partition`, `reshard`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from xdsl.dialects.builtin import AnyFloat, Float32Type, Float64Type, IntegerAttr, IntegerType, TensorType
from xdsl.ir import Attribute, Operation, SSAValue

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import shard, tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.shard import ReductionKind
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn


@dataclass(frozen=True)
class Sharding:
    axis: int | None = None  # the split axis
    partial: bool = False  # a summand on each device
    combine: ReductionKind = ReductionKind.SUM  # of a partial value: how the devices' parts combine
    blocks: int = 0  # of a split: into this many blocks, P/blocks devices holding each (0: one each)

    def __str__(self) -> str:
        if self.partial:
            return "partial" if self.combine == ReductionKind.SUM else f"partial {self.combine}"
        if self.axis is None:
            return "replicated"
        return f"split({self.axis})" + (f" in {self.blocks} blocks" if self.blocks else "")


REPLICATED = Sharding()
PARTIAL = Sharding(partial=True)
PARTIAL_MAX = Sharding(partial=True, combine=ReductionKind.MAX)


def split(axis: int, blocks: int = 0) -> Sharding:
    return Sharding(axis, blocks=blocks)


@dataclass
class ShardingRule:
    operands: list[Sharding]  # what each operand must be
    results: list[Sharding]
    local: dict[str, Attribute] = field(default_factory=dict)  # properties that differ on a device (groups)


class TPError(ForgeOptError):
    """A layer or op that P devices cannot share as asked."""


def shape(v: SSAValue) -> list[int]:
    t = v.type
    assert isinstance(t, TensorType)
    return list(t.get_shape())


def weight_chain(v: SSAValue) -> list[SSAValue] | None:
    """The values from `v` up to the constant it is laid out from, `v`
    first and the constant last: through transposes, reshapes and casts
    (`Gemm`'s `transB=1`, PyTorch's `nn.Linear` on 2-d input), gathers and
    slices of some of its columns or channels (`fused_parts`,
    `channel_parts`; a recurrent node's direction and gates), and shifts and
    scales by constants (a quantized weight dequantized: its zero point
    subtracted, its scale multiplied), and blocks of it over another grid
    axis (`shard.all_slice`: the Galaxy layout splits over one mesh axis,
    then the other). None where `v` is not so made."""
    chain = [v]
    while True:
        op = chain[-1].owner
        if isinstance(op, tir.ConstantOp):
            return chain
        if isinstance(op, tir.TransposeOp | tir.ReshapeOp | tir.CastOp | tir.StridedSliceOp | shard.AllSliceOp) or (
                isinstance(op, tir.GatherOp) and isinstance(op.indices.owner, tir.ConstantOp)):
            chain.append(op.input)
        elif isinstance(op, tir.BinaryOp) and op.fn.data in _SHIFTS_AND_SCALES and (
                shaped := [o for o in (op.lhs, op.rhs) if o.type == op.output.type]):
            if constant_root(op.rhs if shaped[0] is op.lhs else op.lhs) is None:
                return None
            chain.append(shaped[0])
        else:
            return None


def constant_root(v: SSAValue) -> tir.ConstantOp | None:
    """The constant `v` is, or is laid out from (`weight_chain`)."""
    chain = weight_chain(v)
    return None if chain is None else cast(tir.ConstantOp, chain[-1].owner)


#: the element-wise ops that dequantize a weight
_SHIFTS_AND_SCALES = (BinaryFn.SUB, BinaryFn.MUL, BinaryFn.ADD, BinaryFn.DIV)


def constant_weight(v: SSAValue, rank: int = 2) -> bool:
    """A 2-d weight (or one of `rank`): a constant (`constant_root`)."""
    return constant_root(v) is not None and len(shape(v)) == rank


def local_type(t: TensorType, s: Sharding, devices: int) -> TensorType:
    if s.axis is None:
        return t
    dims = list(t.get_shape())
    dims[s.axis] //= s.blocks or devices
    return TensorType(t.element_type, dims)


def nonnegative_indices(add: Callable[[Operation], SSAValue], indices: SSAValue, rows: int) -> SSAValue:
    """`indices` with the negative ones (ONNX counts them from the end of
    `rows`) made positive; `add` inserts each op built and gives its result."""
    t = indices.type
    assert isinstance(t, TensorType) and isinstance(t.element_type, IntegerType)
    np_int = dtypes.numpy_dtype(t.element_type)

    def const(value: int) -> SSAValue:
        return add(tir.ConstantOp(array_to_attr(np.asarray([value], np_int))))

    negative = add(tir.BinaryOp(BinaryFn.LT, indices, const(0)))
    wrapped = add(tir.BinaryOp(BinaryFn.ADD, indices, const(rows)))
    return add(tir.WhereOp(negative, wrapped, indices))


def _replicated(op: Operation) -> ShardingRule:
    return ShardingRule([REPLICATED] * len(op.operands), [REPLICATED] * len(op.results))


def reshape_axis(src: Sequence[int], dst: Sequence[int], axis: int) -> int | None:
    """The axis of `dst` that a split of `src`'s `axis` becomes: the one
    whose outer dims hold as many elements as `axis`'s outer dims (then
    each device's block of `src` is the same elements as its block of
    `dst`, when that axis' size divides by P). None if there is none."""
    outer = math.prod(src[:axis])
    for b in range(len(dst)):
        if math.prod(dst[:b]) == outer and dst[b] != 1:
            return b
        if math.prod(dst[:b]) > outer:
            return None
    return None


def _elementwise(op: Operation, given: list[Sharding]) -> ShardingRule:
    """Broadcasting element-wise ops: one split axis of the result, each
    operand split along its own matching axis or broadcast along it (a
    partial operand reduce-scattered to its block, or all-reduced where it
    broadcasts)."""
    rank = len(shape(op.results[0]))
    out = shape(op.results[0])
    axes = set()
    partial = any(g.partial for g in given)
    for v, s in zip(op.operands, given):
        if s.axis is not None and not s.partial:  # a partial one is reduce-scattered to the split (below)
            axes.add(s.axis + rank - len(shape(v)))
            if partial and v.uses.get_length() > 1:
                # read elsewhere, likely whole already (a residual stream into a norm): both whole costs one
                # all-reduce, where a reduce-scatter here and an all-gather after it would cost two
                return _replicated(op)
    if len(axes) != 1:
        return _replicated(op)
    b = axes.pop()
    wanted = []
    for v in op.operands:
        a = b - (rank - len(shape(v)))
        wanted.append(REPLICATED if a < 0 or shape(v)[a] == 1 != out[b] else split(a))
    return ShardingRule(wanted, [split(b)])


def _matmul(op: tir.MatmulOp, given: list[Sharding]) -> ShardingRule:
    if op.bias is not None:  # fused after partitioning only: a bias would be added P times to a partial sum
        return _replicated(op)
    x, w = given
    xr, wr, rank = len(shape(op.lhs)), len(shape(op.rhs)), len(shape(op.output))
    # column-parallel (x gathered or all-reduced first); stacked experts' weights so too on a replicated x
    if w.axis is not None and w.axis == wr - 1 and (wr == 2 or x == REPLICATED):
        return ShardingRule([REPLICATED, w], [split(rank - 1)])
    if x.partial or w.partial:  # summed first; the other operand keeps its split (a tied head's table block)
        return _matmul(op, [REPLICATED if g.partial else g for g in given])
    # row-parallel: contract over the split (stacked experts' weights: on an x split so already)
    if w.axis is not None and w.axis == wr - 2 and (wr == 2 or x == split(xr - 1)):
        return ShardingRule([split(xr - 1), w], [PARTIAL])
    if x.axis is not None and x.axis == xr - 2 and w.axis is None:  # rows of x
        return ShardingRule([x, REPLICATED], [split(rank - 2)])
    # a batch axis (attention heads): each operand split along it where it has it, broadcast where its size is 1
    batch = [s.axis + rank - r for s, r in ((x, xr), (w, wr)) if s.axis is not None and s.axis < r - 2]
    if batch and all(b == batch[0] for b in batch):
        b = batch[0]
        wanted = []
        for v in (op.lhs, op.rhs):
            a = b - (rank - len(shape(v)))
            wanted.append(split(a) if 0 <= a < len(shape(v)) - 2 and shape(v)[a] != 1 else REPLICATED)
        return ShardingRule(wanted, [split(b)])
    return _replicated(op)


def _concat(op: tir.ConcatOp, given: list[Sharding]) -> ShardingRule:
    """Split along an axis other than the joined one: every part split
    alike (a replicated part, as the KV cache's past is beside the new
    keys, is sliced, which costs no communication). Partial sums that
    nothing else reads stay partial: the parts of a sum, joined, are the
    sum of the parts joined (a detector's heads, one all-reduce for all)."""
    if all(g == PARTIAL for g in given) and all(_read_alone(v) for v in op.operands):
        return ShardingRule(given, [PARTIAL])
    axes = {g.axis for g in given if g.axis is not None}
    if any(g.partial for g in given) or len(axes) != 1:
        return _replicated(op)
    a = axes.pop()
    if a == op.axis.value.data:
        return _replicated(op)
    return ShardingRule([split(a)] * len(given), [split(a)])


def _widens(op: tir.CastOp) -> bool:
    """A cast from a float type to one at least as wide (every value kept)."""
    a, b = dtypes.tensor(op.input.type).element_type, dtypes.tensor(op.output.type).element_type
    return a == b or (isinstance(a, AnyFloat) and isinstance(b, Float32Type | Float64Type) and a.bitwidth <= b.bitwidth)


def _read_alone(v: SSAValue) -> bool:
    """Whether one op alone reads `v`. A partial sum goes on partial only
    through an op that reads it alone: one read twice is summed once for
    both readers, before them."""
    return v.uses.get_length() == 1


def _scales_a_sum(op: tir.BinaryOp, given: list[Sharding]) -> bool:
    """A partial value that nothing else reads times (or over) a replicated
    one that does not widen it: the product of the sum is the sum of the
    products (Gemm's alpha, an expert's routing weight). A partial value
    read twice is summed once for both (GELU's x and x/√2; a norm's input
    and the scale computed from it)."""
    fn = op.fn.data
    if given == [PARTIAL, REPLICATED] and fn in (BinaryFn.MUL, BinaryFn.DIV):
        summand = op.lhs
    elif given == [REPLICATED, PARTIAL] and fn == BinaryFn.MUL:
        summand = op.rhs
    else:
        return False
    return shape(summand) == shape(op.output) and _read_alone(summand)


def _unary(op: Operation, given: list[Sharding], devices: int) -> ShardingRule:
    if isinstance(op, tir.CastOp) and given[0].partial and _widens(op):
        return ShardingRule(given, given)  # exact on each summand (or part of a maximum)
    s = given[0]
    return _replicated(op) if s.partial else ShardingRule([s], [s])


def _adds_to_a_sum(op: tir.BinaryOp, given: list[Sharding]) -> bool:
    """A partial value that this add alone reads, plus a replicated one: the
    sum stays partial, the replicated term counted on the first device only
    (`tp/partition`). A bias or a residual then costs no all-reduce of its
    own, and a parallel block's attention and MLP sums meet before one."""
    if op.fn.data not in (BinaryFn.ADD, BinaryFn.SUB) or REPLICATED not in given or PARTIAL not in given:
        return False
    summand = op.operands[given.index(PARTIAL)]
    return _read_alone(summand) and isinstance(dtypes.tensor(op.output.type).element_type, AnyFloat)


def _binary(op: tir.BinaryOp, given: list[Sharding], devices: int) -> ShardingRule:
    if op.fn.data in (BinaryFn.ADD, BinaryFn.SUB) and all(g == PARTIAL for g in given):
        return ShardingRule(given, [PARTIAL])  # summands of a sum: GPT-2's token and position embeddings
    if _adds_to_a_sum(op, given):
        return ShardingRule([PARTIAL, PARTIAL], [PARTIAL])
    if _scales_a_sum(op, given):
        return ShardingRule(given, [PARTIAL])  # each summand scaled (Gemm's alpha)
    return _elementwise(op, given)


def _gather(op: tir.GatherOp, given: list[Sharding], devices: int) -> ShardingRule:
    table, indices = given
    axis = op.axis.value.data
    if table.axis is None and indices.axis is not None and axis == 0:
        return ShardingRule([REPLICATED, indices], [split(indices.axis)])
    if table == PARTIAL and indices == REPLICATED and _read_alone(op.operands[0]):
        return ShardingRule(given, [PARTIAL])  # rows of each summand
    if table.axis == 0 and axis == 0 and indices.axis is None:
        return ShardingRule([table, REPLICATED], [PARTIAL])  # vocab-parallel: tp/partition masks the indices
    if table.axis is not None and table.axis != axis and not indices.partial:
        # along another axis (nearest-neighbour Resize of split channels): each device its block
        a = table.axis if table.axis < axis else table.axis + len(shape(op.indices)) - 1
        return ShardingRule([table, REPLICATED], [split(a)])
    return _replicated(op)


def _window(op: tir.Conv2dOp | tir.ConvTranspose2dOp, given: list[Sharding], devices: int) -> ShardingRule:
    """The convolutions, by which weight axis `tensor-parallel` split: the
    output channels (the input replicated), each device's groups (the input
    split by channels; a depthwise convolution's channels), or the input
    channels (a partial sum, the bias in device 0's summand)."""
    w = given[1]
    groups = op.groups.value.data
    transposed = isinstance(op, tir.ConvTranspose2dOp)
    outputs, inputs = (1, 0) if transposed else (0, 1)  # the weight axes: (Cin, Cout/g, ...) transposed, else OIHW
    bias = [] if op.bias is None else [split(0)]
    if w.axis is None:
        return _replicated(op)
    if groups > 1 and groups % devices == 0 and w.axis == 0:
        return ShardingRule([split(1), w, *bias], [split(1)], {"groups": IntegerAttr(groups // devices, 64)})
    if groups == 1 and w.axis == outputs:
        return ShardingRule([REPLICATED, w, *bias], [split(1)])
    if groups == 1 and w.axis == inputs:  # the bias on device 0's summand only (`tp/partition`)
        return ShardingRule([split(1), w, *([PARTIAL] if bias else [])], [PARTIAL])
    return _replicated(op)


def _reduce(op: tir.ReduceOp, s: Sharding, a: int, devices: int) -> ShardingRule:
    """Over other axes (a global average pool of split channels): stays
    split. A sum over the split axis (a mixture's experts) is partial: each
    device sums its block; so is a mean, each device's scaled by its share
    of the axis (`tp/partition`: an RMSNorm's statistic over a residual
    stream split by columns, all-reduced, not the stream gathered); a
    maximum over it (a quantization's range) is each device's maximum,
    all-reduced by their maximum where needed."""
    rank = len(shape(op.input))
    axes = {x % rank for x in op.axes.get_values()}
    if a in axes:
        float_mean = isinstance(dtypes.tensor(op.output.type).element_type, AnyFloat)
        combined = {ReduceFn.SUM: PARTIAL, ReduceFn.MEAN: PARTIAL if float_mean else None,
                    ReduceFn.MAX: PARTIAL_MAX}.get(op.fn.data)
        return ShardingRule([s], [combined]) if combined is not None else _replicated(op)
    return ShardingRule([s], [split(a if op.keepdims.value.data else a - sum(1 for x in axes if x < a))])


def _per_channel(op: tir.BatchnormOp, s: Sharding, a: int, devices: int) -> ShardingRule:
    params = [split(0) if a == 1 else REPLICATED] * 4
    return ShardingRule([s, *params], [s])


def _reshape(op: tir.ReshapeOp, s: Sharding, a: int, devices: int) -> ShardingRule:
    b = reshape_axis(shape(op.input), shape(op.output), a)
    if b is None:
        return _replicated(op)
    if shape(op.output)[b] % devices:
        raise TPError(
            f"{describe(op)}: reshapes the dim of {shape(op.input)[a]} split over {devices} devices into "
            f"{shape(op.output)}, whose dim {b} ({shape(op.output)[b]}, e.g. a head count) {devices} does not "
            "divide; choose a P that divides it or keep the layers before it replicated (plan)"
        )
    return ShardingRule([s], [split(b)])


def _strided_slice(op: tir.StridedSliceOp, s: Sharding, a: int, devices: int) -> ShardingRule:
    rank = len(shape(op.input))
    cut = {x % rank for x in op.axes.get_values()}
    return ShardingRule([s], [s]) if a not in cut else _replicated(op)


def _broadcast(op: tir.BroadcastOp, s: Sharding, a: int, devices: int) -> ShardingRule:
    b = a + len(shape(op.output)) - len(shape(op.input))
    return ShardingRule([s], [split(b)]) if shape(op.input)[a] == shape(op.output)[b] else _replicated(op)


def _other_axis(op: Operation, given: list[Sharding], devices: int) -> ShardingRule:
    """A collective or block over another grid axis (the Galaxy layout's
    columns, when its rows are split): local along every dim but the one it
    gathers, scatters or slices; a sum's summands go through a sum, a
    gather or a slice alike."""
    s = given[0]
    moved = op.axis if isinstance(op, shard.AllGatherOp | shard.AllSliceOp | shard.ReduceScatterOp) else None
    summed = not isinstance(op, shard.AllReduceOp) or shard.reduction_of(op) == ReductionKind.SUM
    if (s == PARTIAL and summed) or (s.axis is not None and not s.partial and s.axis != moved):
        return ShardingRule([s], [s])
    return _replicated(op)


#: ops whose rule reads every operand's sharding
_BY_OPERANDS: dict[type[Operation], Callable[..., ShardingRule]] = {
    tir.UnaryOp: _unary,
    tir.CastOp: _unary,
    tir.ClipOp: _unary,
    tir.BinaryOp: _binary,
    tir.WhereOp: lambda op, given, devices: _elementwise(op, given),
    tir.MatmulOp: lambda op, given, devices: _matmul(op, given),
    tir.ConcatOp: lambda op, given, devices: _concat(op, given),
    tir.GatherOp: _gather,
    tir.Conv2dOp: _window,
    tir.ConvTranspose2dOp: _window,
    shard.AllReduceOp: _other_axis,
    shard.AllGatherOp: _other_axis,
    shard.AllSliceOp: _other_axis,
    shard.ReduceScatterOp: _other_axis,
}

#: ops that only move a value's elements (no growth): a partial sum that nothing else reads goes through them
_MOVES = (tir.ReshapeOp, tir.TransposeOp, tir.StridedSliceOp)

#: ops whose first operand is split along axis `a`: how the split goes through
_BY_AXIS: dict[type[Operation], Callable[..., ShardingRule]] = {
    tir.ReshapeOp: _reshape,
    tir.TransposeOp: lambda op, s, a, devices: ShardingRule([s], [split(list(op.perm.get_values()).index(a))]),
    tir.SoftmaxOp: lambda op, s, a, devices: ShardingRule([s], [s]) if op.axis.value.data != a else _replicated(op),
    tir.LayernormOp: lambda op, s, a, devices: (
        ShardingRule([s, REPLICATED, REPLICATED], [s]) if a != len(shape(op.input)) - 1 else _replicated(op)),
    tir.SplitOp: lambda op, s, a, devices: (
        ShardingRule([s], [s] * len(op.results)) if op.axis.value.data != a else _replicated(op)),
    tir.StridedSliceOp: _strided_slice,
    # repeated along other axes only (GQA's K/V: unsqueezed, tiled, reshaped)
    tir.TileOp: lambda op, s, a, devices: (
        ShardingRule([s], [s]) if op.repeats.get_values()[a] == 1 else _replicated(op)
    ),
    tir.BroadcastOp: _broadcast,
    tir.ReduceOp: _reduce,
    tir.BatchnormOp: _per_channel,
    # per channel and image: stays split along either
    tir.Pool2dOp: lambda op, s, a, devices: ShardingRule([s], [s]) if a in (0, 1) else _replicated(op),
    tir.PadOp: lambda op, s, a, devices: (
        ShardingRule([s], [s]) if not any(op.pads.get_values()[2 * a:2 * a + 2]) else _replicated(op)),
}


def rule(op: Operation, given: list[Sharding], devices: int) -> ShardingRule:
    """The shardings `op` runs with locally, given its operands' current
    ones. Ops in neither table run replicated. Operands split in k blocks
    (by a mesh's rows), with the others replicated, run as on a line of k
    devices; mixed with a split over every device, each is taken as its
    device's own block (a slice, free) where the devices divide its axis,
    whole elsewhere."""
    blocks = {g.blocks for g in given if g.blocks}
    if not blocks:
        return _rule(op, given, devices)
    if len(blocks) == 1 and all(g.blocks or g == REPLICATED for g in given):
        k = blocks.pop()
        r = _rule(op, [Sharding(g.axis) if g.blocks else g for g in given], k)
        if not any(s.partial for s in r.operands + r.results):  # (a sum over a row's block: not this case)
            return ShardingRule([_in_blocks(s, k) for s in r.operands], [_in_blocks(s, k) for s in r.results],
                                r.local)
    return _rule(op, [_per_device(g, v, devices) for g, v in zip(given, op.operands)], devices)


def _in_blocks(s: Sharding, blocks: int) -> Sharding:
    return s if s.axis is None else split(s.axis, blocks)


def _per_device(s: Sharding, v: SSAValue, devices: int) -> Sharding:
    """A value split in blocks as each device's own block of it, or whole
    where the devices do not divide its axis."""
    if not s.blocks or s.axis is None:
        return s
    return split(s.axis) if shape(v)[s.axis] % devices == 0 else REPLICATED


def _rule(op: Operation, given: list[Sharding], devices: int) -> ShardingRule:
    by_operands = _BY_OPERANDS.get(type(op))
    if by_operands is not None:
        return by_operands(op, given, devices)
    s = given[0] if given else REPLICATED
    if s.partial and isinstance(op, _MOVES) and _read_alone(op.operands[0]):
        return ShardingRule([s], [s])  # moved, not combined: each summand alike, summed later
    if s == PARTIAL and isinstance(op, tir.ReduceOp) and op.fn.data == ReduceFn.SUM and _read_alone(op.input):
        return ShardingRule([PARTIAL], [PARTIAL])  # a sum of summands (experts' partial sums over the experts)
    by_axis = _BY_AXIS.get(type(op))
    if by_axis is None or s.axis is None:
        return _replicated(op)
    return by_axis(op, s, s.axis, devices)
