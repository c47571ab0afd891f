"""A quantized weight split where it is stored narrow. A Linear's weight
dequantized from 8-bit integers (DequantizeLinear, MatMulInteger's zero
point, a Cast then Mul) is split before its widening cast, not after: each
device then stores its block of the integers (and the per-channel scales
and zero points by the same blocks, sliced as the partition carries the
split through the element-wise ops), and dequantizes it as one device
does, instead of storing a float32 block four times its size."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import AnyFloat, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue

from forge_opt import dtypes
from forge_opt.dialects import shard, tir
from forge_opt.transforms.tp.rules import REPLICATED, Sharding, reshape_axis, rule, shape, split, weight_chain

#: inserts an op before another; its result
Insert = Callable[[Operation, Operation], SSAValue]


def dequantizes(source: Attribute, result: Attribute) -> bool:
    """A cast of these tensor types turns integers into floats."""
    a, b = dtypes.tensor(source).element_type, dtypes.tensor(result).element_type
    return isinstance(a, IntegerType) and isinstance(b, AnyFloat)


def _source_axis(op: Operation, v: SSAValue, up: SSAValue, axis: int) -> int | None:
    """The axis of `up` (`op`'s operand the chain goes on to) that `v`'s
    `axis` is, if the op keeps a split of it local."""
    if isinstance(op, tir.TransposeOp):
        return list(op.perm.get_values())[axis]
    if isinstance(op, tir.ReshapeOp):
        return reshape_axis(shape(v), shape(up), axis)
    if isinstance(op, tir.StridedSliceOp):
        return None if axis in [a % len(shape(v)) for a in op.axes.get_values()] else axis
    if isinstance(op, tir.GatherOp):
        g, index_rank = op.axis.value.data, len(shape(op.indices))
        if index_rank == 0:
            return axis if axis < g else axis + 1
        return None if axis == g or index_rank != 1 else axis
    return axis if isinstance(op, tir.BinaryOp) else None  # (an element-wise shift or scale: the same type)


def narrow_source(weight: SSAValue, axis: int) -> tuple[tir.CastOp, int, list[Operation]] | None:
    """The integer-to-float cast in `weight`'s chain (`rules.weight_chain`),
    the axis of its input that `weight`'s `axis` is, and the ops after it
    up to `weight` in order; None if the chain has none or does not keep
    the split local."""
    chain = weight_chain(weight)
    ops: list[Operation] = []
    for v, up in zip(chain or [], (chain or [])[1:]):
        op = v.owner
        assert isinstance(op, Operation)
        ops.append(op)
        if isinstance(op, tir.CastOp) and dequantizes(op.input.type, op.output.type):
            return op, axis, ops[::-1]
        found = _source_axis(op, v, up, axis)
        if found is None:
            return None
        axis = found
    return None


def split_narrow(weight: SSAValue, want: Sharding, sharding: dict[SSAValue, Sharding], devices: int, grid: str,
                 grid_axes: list[int], insert: Insert) -> bool:
    """Split a dequantized weight before its cast, over `grid_axes` of
    `grid`, the split carried through the ops after it (`sharding` updated
    as the annotator keeps it); whether the weight arrives split as `want`."""
    assert want.axis is not None
    found = narrow_source(weight, want.axis)
    if found is None:
        return False
    cast, at, chain = found
    source = cast.input
    if not isinstance(source.owner, shard.ShardOp):  # (else an earlier reader split it)
        if source.uses.get_length() > 1:  # read whole elsewhere too
            return False
        target = insert(shard.sharding(grid, [grid_axes if d == at else [] for d in range(len(shape(source)))]),
                        cast)
        annotated = insert(shard.ShardOp(source, target, None), cast)
        cast.operands[0] = annotated
        sharding[annotated] = split(at, want.blocks)
    for op in chain:
        r = rule(op, [sharding.get(o, REPLICATED) for o in op.operands], devices)
        for res, s in zip(op.results, r.results):
            sharding[res] = s
    return sharding.get(weight, REPLICATED) == want
