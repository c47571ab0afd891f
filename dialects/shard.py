"""MLIR's `shard` dialect: xDSL 0.74's ops plus the collectives it lacks.

xDSL has `shard.grid`, `shard.sharding`, `shard.shard`, `shard.all_reduce`
and the point-to-point ops; tensor parallelism also needs `all_gather`,
`all_slice` and `reduce_scatter`. They are written here with MLIR's textual
form (`mlir/include/mlir/Dialect/Shard/IR/ShardOps.td`), so MLIR reads what
we print, and with verifiers that check result shapes against the grid, as
MLIR's do. Written to go upstream to xDSL as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import shard as xshard
from xdsl.dialects.builtin import (
    I16,
    BytesAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolRefAttr,
    TensorType,
    i16,
)
from xdsl.ir import Attribute, Operation, SSAValue, VerifyException
from xdsl.irdl import irdl_op_definition, operand_def, prop_def, result_def, traits_def
from xdsl.traits import Pure, SymbolTable

from forge_opt.xdsl_internals import extend_dialect

AllReduceOp = xshard.AllReduceOp
GridOp = xshard.GridOp
ShardingOp = xshard.ShardingOp
ShardOp = xshard.ShardOp
SendOp = xshard.SendOp  # a pipeline's: `partition-for-forge{stages}`
RecvOp = xshard.RecvOp
ShardingType = xshard.ShardingType
ShardAxesArrayAttr = xshard.ShardAxesArrayAttr
ReductionKind = xshard.ReductionKind
ReductionKindAttr = xshard.ReductionKindAttr


def axes_attr(axes: Sequence[int]) -> DenseArrayBase[I16]:
    """A list of grid axes (`[0]`), as the collectives' `grid_axes` hold it."""
    return DenseArrayBase(i16, BytesAttr(i16.pack(list(axes))))


def split_axes_attr(per_dim: Sequence[Sequence[int]]) -> ShardAxesArrayAttr:
    """`split_axes` of a sharding: for each tensor dim, the grid axes it is
    split over (`[[], [0]]`: the second dim over grid axis 0)."""
    from xdsl.dialects.builtin import ArrayAttr

    return ShardAxesArrayAttr(ArrayAttr([axes_attr(axes) for axes in per_dim]))


def grid_axes(op: Operation) -> list[int]:
    """The grid axes a collective (or `all_slice`) runs over."""
    axes = op.properties["grid_axes"]
    assert isinstance(axes, DenseArrayBase)
    return list(axes.get_values())


def grid_of(op: Operation) -> GridOp:
    """The `shard.grid` an op's `grid` property names."""
    ref = op.properties.get("grid")
    if not isinstance(ref, SymbolRefAttr):
        raise VerifyException(f"'{op.name}' has no grid")
    found = SymbolTable.lookup_symbol(op, ref.root_reference)
    if not isinstance(found, GridOp):
        raise VerifyException(f"'{op.name}' names the grid @{ref.root_reference.data}, which is not a shard.grid")
    return found


def group_size(op: Operation) -> int | None:
    """How many devices an op's `grid_axes` span (None while the op is not
    in a module yet, where its grid would be)."""
    try:
        grid = grid_of(op)
    except VerifyException:
        top: Operation = op
        while (parent := top.parent_op()) is not None:
            top = parent
        if isinstance(top, ModuleOp):
            raise
        return None
    shape = grid.shape.get_values()
    size = 1
    for a in grid_axes(op):
        if not 0 <= a < len(shape):
            raise VerifyException(f"'{op.name}' grid axis {a} is outside the {len(shape)}-d grid")
        size *= shape[a]
    return size


class _AxisCollective(xshard.CollectiveCommunicationOp):
    """A collective that changes the size of one tensor axis by the device
    count of its group: `gather` multiplies, `slice` and `scatter` divide."""

    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    AXIS: ClassVar[str]
    GROWS: ClassVar[bool]

    def __init__(self, input: SSAValue, grid: str, grid_axes: Sequence[int], axis: int, result_type: Attribute):
        super().__init__(
            operands=[input],
            result_types=[result_type],
            properties={
                "grid": SymbolRefAttr(grid),
                "grid_axes": axes_attr(grid_axes),
                self.AXIS: IntegerAttr(axis, IndexType()),
            },
        )

    @property
    def axis(self) -> int:
        attr = self.properties[self.AXIS]
        assert isinstance(attr, IntegerAttr)
        return attr.value.data

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        assert isinstance(src, TensorType) and isinstance(dst, TensorType)
        a, src_shape, dst_shape = self.axis, src.get_shape(), dst.get_shape()
        if not 0 <= a < len(src_shape) or len(src_shape) != len(dst_shape):
            raise VerifyException(f"'{self.name}' {self.AXIS} {a} does not fit {src} -> {dst}")
        n = group_size(self)
        if n is None:
            return
        small, big = (src_shape[a], dst_shape[a]) if self.GROWS else (dst_shape[a], src_shape[a])
        others_equal = all(s == d for i, (s, d) in enumerate(zip(src_shape, dst_shape)) if i != a)
        if not others_equal or (small >= 0 and big >= 0 and small * n != big):
            raise VerifyException(
                f"'{self.name}' over {n} devices cannot make {dst} of {src} along axis {a}"
            )


@irdl_op_definition
class AllGatherOp(_AxisCollective):
    """Each device gets the concatenation, along `gather_axis`, of every
    device's tensor in its group (MLIR `shard.all_gather`)."""

    name = "shard.all_gather"
    gather_axis = prop_def(IntegerAttr[IndexType])
    AXIS: ClassVar[str] = "gather_axis"
    GROWS: ClassVar[bool] = True
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? `gather_axis` `=` $gather_axis "
        "attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class AllSliceOp(_AxisCollective):
    """Each device keeps its own block, along `slice_axis`, of a tensor all
    devices hold whole: no communication (MLIR `shard.all_slice`)."""

    name = "shard.all_slice"
    slice_axis = prop_def(IntegerAttr[IndexType])
    AXIS: ClassVar[str] = "slice_axis"
    GROWS: ClassVar[bool] = False
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? `slice_axis` `=` $slice_axis "
        "attr-dict `:` type($input) `->` type($result)"
    )


@irdl_op_definition
class ReduceScatterOp(_AxisCollective):
    """Reduce over the group, each device keeping its block of the result
    along `scatter_axis` (MLIR `shard.reduce_scatter`)."""

    name = "shard.reduce_scatter"
    scatter_axis = prop_def(IntegerAttr[IndexType])
    reduction = prop_def(ReductionKindAttr, default_value=ReductionKindAttr(ReductionKind.SUM))
    AXIS: ClassVar[str] = "scatter_axis"
    GROWS: ClassVar[bool] = False
    assembly_format = (
        "$input `on` $grid (`grid_axes` `=` $grid_axes^)? (`reduction` `=` $reduction^)? "
        "`scatter_axis` `=` $scatter_axis attr-dict `:` type($input) `->` type($result)"
    )


def all_reduce(input: SSAValue, grid: str, grid_axes: Sequence[int],
               reduction: ReductionKind = ReductionKind.SUM) -> AllReduceOp:
    """An all-reduce, a sum unless `reduction` says (xDSL's op has no builder)."""
    properties: dict[str, Attribute] = {"grid": SymbolRefAttr(grid), "grid_axes": axes_attr(grid_axes)}
    if reduction != ReductionKind.SUM:
        properties["reduction"] = ReductionKindAttr(reduction)
    return AllReduceOp.build(operands=[input], result_types=[input.type], properties=properties)


def reduction_of(op: Operation) -> ReductionKind:
    """How an all-reduce combines: sum, or max."""
    attr = op.properties.get("reduction")
    kind = attr.data if isinstance(attr, ReductionKindAttr) else ReductionKind.SUM
    if kind not in (ReductionKind.SUM, ReductionKind.MAX):
        raise VerifyException(f"'{op.name}' reduction {kind}: the collectives here sum or take the maximum")
    return kind


def grid(name: str, shape: Sequence[int]) -> GridOp:
    from xdsl.dialects.builtin import i64

    return GridOp.build(
        properties={"sym_name": StringAttr(name), "shape": DenseArrayBase(i64, BytesAttr(i64.pack(list(shape))))}
    )


def sharding(grid: str, per_dim: Sequence[Sequence[int]]) -> ShardingOp:
    return ShardingOp.build(
        operands=[[], []],
        result_types=[ShardingType()],
        properties={"grid": SymbolRefAttr(grid), "split_axes": split_axes_attr(per_dim)},
    )


def split_axes(op: ShardingOp) -> list[list[int]]:
    return [list(a.get_values()) for a in op.split_axes.axes.data]


COLLECTIVES = (AllReduceOp, AllGatherOp, ReduceScatterOp)

#: xDSL's `shard` with our collectives added in place, so that every context
#: loading xDSL's own dialect (stock xdsl-opt through our `xdsl.universe`
#: plug-in, which imports this module) reads what tp-partition writes
SHARD = extend_dialect(xshard.Shard, [AllGatherOp, AllSliceOp, ReduceScatterOp])
