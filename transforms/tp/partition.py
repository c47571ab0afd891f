"""`tp-partition`: the annotated global program (`shard.shard` on weights
and layer outputs, from `tensor-parallel`) becomes the program each of the
P devices runs: local shapes, weights taken in blocks (`shard.all_slice`,
which costs no communication) and explicit collectives where a value's
sharding must change (`shard.all_reduce`, `shard.all_gather`,
`shard.reduce_scatter`). MLIR's shard partition pass does the same for its
ops; the rules for ours are `tp/rules`.

On a mesh (`tensor-parallel` with `mesh=RxC`, the grid [R, C]) a split over
every device runs over both grid axes, row-major, and a split by the
mesh's rows (KV heads) over axis 0 alone: a device's own block of a row's
is an `all_slice` along axis 1 (free), a row's block of the whole an
`all_slice` along axis 0.

A gather from a table split by rows (vocab-parallel embedding) becomes
Paddle's masked lookup: device k's table is its N/P rows; an index in its
range [k·N/P, (k+1)·N/P) reads the local row, any other gives zeros, and
the devices' results are summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import (
    AnyFloat,
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    i1,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import shard, tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.shard import ReductionKind
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn
from forge_opt.transforms.tp.mesh import COLUMNS, ROWS
from forge_opt.transforms.tp.rules import (
    PARTIAL,
    REPLICATED,
    Sharding,
    constant_root,
    local_type,
    nonnegative_indices,
    rule,
    shape,
    split,
)


def grid_info(module: ModuleOp) -> tuple[str, list[int]] | None:
    """The name and shape of the module's device grid, if it has one: a
    line of P, or an R×C mesh (`collectives-on-mesh`)."""
    for op in module.ops:
        if isinstance(op, shard.GridOp):
            dims = list(op.shape.get_values())
            if not 1 <= len(dims) <= 2:
                raise ForgeOptError(f"grid @{op.sym_name.data}: tensor parallelism uses a line or a mesh of "
                                    f"devices, not {dims}")
            return op.sym_name.data, dims
    return None


def sharding_of(op: shard.ShardingOp, dims: list[int], axis: int | None = None) -> Sharding:
    """A `shard.sharding` on the grid `dims`: split over every grid axis (a
    line's, or a mesh's row-major), or over a mesh's rows alone (each row
    one block, whole along it); with `axis`, over that grid axis alone."""
    per_dim = shard.split_axes(op)
    axes = [i for i, grid_axes in enumerate(per_dim) if grid_axes]
    if len(axes) > 1:
        raise ForgeOptError(f"a sharding splits {len(axes)} dims; tp-partition splits one")
    if not axes:
        return REPLICATED
    over = list(per_dim[axes[0]])
    if over == (list(range(len(dims))) if axis is None else [axis]):
        return split(axes[0])
    if len(dims) == 2 and over == [ROWS]:
        return split(axes[0], dims[ROWS])
    raise ForgeOptError(f"a sharding over grid axes {over} of the grid {dims}: tp-partition splits over all of "
                        "them, or over a mesh's rows")


SPLIT_AXIS = "shard.split_axis"
SPLIT_BLOCKS = "shard.split_blocks"  # of an input or result split by a mesh's rows: their count


def _with_split_axes(attrs: ArrayAttr | None, count: int, axes: dict[int, Sharding]) -> ArrayAttr[DictionaryAttr]:
    """Argument or result attributes with `shard.split_axis` added to the
    entries `axes` names: what each device receives or returns is its
    block along that axis."""
    entries: list[dict[str, Attribute]] = [{} for _ in range(count)]
    for i, d in enumerate(attrs.data if attrs is not None else []):
        if isinstance(d, DictionaryAttr):
            entries[i] = dict(d.data)
    for i, s in axes.items():
        assert s.axis is not None
        entries[i][SPLIT_AXIS] = IntegerAttr(s.axis, 64)
        if s.blocks:
            entries[i][SPLIT_BLOCKS] = IntegerAttr(s.blocks, 64)
    return ArrayAttr([DictionaryAttr(e) for e in entries])


def split_axes(attrs: ArrayAttr | None, count: int) -> list[int | None]:
    """Per argument or result, its `shard.split_axis` (None: whole)."""
    return _per_entry(attrs, count, SPLIT_AXIS)


def split_blocks(attrs: ArrayAttr | None, count: int) -> list[int | None]:
    """Per argument or result, its `shard.split_blocks` (None: one block a device)."""
    return _per_entry(attrs, count, SPLIT_BLOCKS)


def _per_entry(attrs: ArrayAttr | None, count: int, key: str) -> list[int | None]:
    out: list[int | None] = [None] * count
    for i, d in enumerate(attrs.data if attrs is not None else []):
        value = d.data.get(key) if isinstance(d, DictionaryAttr) else None
        if isinstance(value, IntegerAttr):
            out[i] = value.value.data
    return out


class _Partitioner:
    def __init__(self, func: FuncOp, grid: str, dims: list[int], axis: int | None = None):
        self.func, self.grid, self.dims, self.axis = func, grid, dims, axis
        # the grid axes a split over every device names (row-major), or the one axis partitioned (`axis`)
        self.line = list(range(len(dims))) if axis is None else [axis]
        self.devices = math.prod(dims) if axis is None else dims[axis]
        self.block: Block = func.body.block
        self.new: dict[SSAValue, SSAValue] = {}
        self.sharding: dict[SSAValue, Sharding] = {}
        self.resharded: dict[tuple[SSAValue, Sharding], SSAValue] = {}
        self.before: Operation | None = None
        self.kept: set[SSAValue] = set()  # results returned split
        self.kept_inputs: dict[int, Sharding] = {}
        self.kept_outputs: dict[int, Sharding] = {}
        self.first: SSAValue | None = None  # whether this device is device 0 (`first_device_only`)

    def add(self, op: Operation, sharding: Sharding = REPLICATED) -> SSAValue:
        """Insert `op` before the op being partitioned, with its location
        (diagnostics and names keep pointing at the ONNX node); its result."""
        assert self.before is not None
        self.block.insert_op_before(op, self.before)
        op.location = self.before.location
        for r in op.results:
            self.sharding[r] = sharding
        return op.results[0]

    def reshard(self, v: SSAValue, want: Sharding) -> SSAValue:
        have = self.sharding[v]
        if have == want:
            return v
        key = (v, want)
        if key in self.resharded:
            return self.resharded[key]
        t = v.type
        assert isinstance(t, TensorType)
        p, g, line = self.devices, self.grid, self.line
        if have.blocks or want.blocks:
            out = self.reshard_blocks(v, have, want)
        elif want.partial:
            if have != REPLICATED:
                raise ForgeOptError(f"tp-partition cannot make a partial value of a {have} one")
            # the maximum of copies is the value: a sum's other summands are zeros
            out = v if want.combine == ReductionKind.MAX else self.first_device_only(v)
        elif have.partial and have.combine != ReductionKind.SUM:  # the maximum, on every device
            out = self.add(shard.all_reduce(v, g, line, have.combine))
            if want.axis is not None:
                out = self.reshard(out, want)
        elif have.partial:
            if want.axis is None:
                out = self.add(shard.all_reduce(v, g, line))
            else:
                out = self.add(shard.ReduceScatterOp(v, g, line, want.axis, local_type(t, want, p)), want)
        elif have.axis is None:
            assert want.axis is not None
            out = self.sliced_scaling(v, want)
            if out is None:
                out = self.add(shard.AllSliceOp(v, g, line, want.axis, local_type(t, want, p)), want)
        else:
            full = list(t.get_shape())
            full[have.axis] *= p
            out = self.add(shard.AllGatherOp(v, g, line, have.axis, TensorType(t.element_type, full)))
            if want.axis is not None:
                out = self.reshard(out, want)
        self.resharded[key] = out
        return out

    def reshard_blocks(self, v: SSAValue, have: Sharding, want: Sharding) -> SSAValue:
        """To or from a split by the mesh's rows: a row's block is its C
        devices' blocks joined (an all-gather along the row), a device's
        block its column's part of the row's (a slice, free); anything else
        goes through the whole value (an all-gather down the columns)."""
        t = dtypes.tensor(v.type)
        if (want.blocks or have.blocks) != self.dims[0] or len(self.dims) != 2:
            raise ForgeOptError(f"tp-partition splits in blocks by a mesh's rows, not in {want.blocks or have.blocks} "
                                f"on the grid {self.dims}")
        dims = list(t.get_shape())
        if want.blocks:
            assert want.axis is not None
            if have == split(want.axis):
                dims[want.axis] *= self.dims[COLUMNS]
                return self.add(shard.AllGatherOp(v, self.grid, [COLUMNS], want.axis,
                                                  TensorType(t.element_type, dims)), want)
            whole = self.reshard(v, REPLICATED)
            local = local_type(dtypes.tensor(whole.type), want, self.devices)
            return self.add(shard.AllSliceOp(whole, self.grid, [ROWS], want.axis, local), want)
        assert have.axis is not None
        if want == split(have.axis):
            dims[have.axis] //= self.dims[COLUMNS]
            return self.add(shard.AllSliceOp(v, self.grid, [COLUMNS], have.axis, TensorType(t.element_type, dims)),
                            want)
        dims[have.axis] *= self.dims[ROWS]
        whole = self.add(shard.AllGatherOp(v, self.grid, [ROWS], have.axis, TensorType(t.element_type, dims)))
        return self.reshard(whole, want)

    def sliced_scaling(self, v: SSAValue, want: Sharding) -> SSAValue | None:
        """A block of a constant scaled by a value it broadcasts against
        (a per-channel quantization scale times the input's scale, computed
        per run): the constant's block scaled, so each device stores the
        constant's block, not the whole."""
        op = v.owner
        if not isinstance(op, tir.BinaryOp) or want.axis is None:
            return None
        rank = len(shape(v))
        operands = []
        for o in (op.lhs, op.rhs):
            a = want.axis - (rank - len(shape(o)))
            if a < 0 or shape(o)[a] == 1:
                operands.append(o)  # broadcast along the split axis: whole on every device
            elif constant_root(o) is not None and shape(o) == shape(v):
                operands.append(self.reshard(o, want))
            else:
                return None
        if operands == [op.lhs, op.rhs]:
            return None
        return self.add(tir.BinaryOp(op.fn.data, *operands), want)

    def run(self) -> None:
        for arg in self.block.args:
            self.new[arg], self.sharding[arg] = arg, REPLICATED
        old_ops = list(self.block.ops)
        for op in old_ops:
            self.before = op
            if isinstance(op, shard.ShardingOp | shard.GridOp):
                continue
            if isinstance(op, shard.ShardOp):
                target = op.sharding.owner
                if not isinstance(target, shard.ShardingOp):
                    raise ForgeOptError("shard.shard: its sharding must come from a shard.sharding op")
                want = sharding_of(target, self.dims, self.axis)
                src = op.src
                if isinstance(src, BlockArgument) and op.annotate_for_users is None and want.axis is not None:
                    # an input that arrives split: each device is given its block
                    local = Rewriter.replace_value_with_new_type(src, local_type(dtypes.tensor(src.type), want,
                                                                                 self.devices))
                    self.new[op.result], self.sharding[local] = local, want
                    self.kept_inputs[src.index] = want
                elif op.annotate_for_users is not None and all(isinstance(u.operation, ReturnOp)
                                                                for u in op.result.uses):
                    self.new[op.result] = self.reshard(self.new[src], want)
                    self.kept.add(op.result)  # a result each device returns its block of
                else:
                    self.new[op.result] = self.reshard(self.new[src], want)
                continue
            if isinstance(op, ReturnOp):
                outs = []
                for i, v in enumerate(op.arguments):
                    if v in self.kept:
                        self.kept_outputs[i] = self.sharding[self.new[v]]
                        outs.append(self.new[v])
                    else:
                        outs.append(self.reshard(self.new[v], REPLICATED))
                self.block.insert_op_before(ReturnOp(*outs), op)
                continue
            operands = [self.new[v] for v in op.operands]
            given = [self.sharding[v] for v in operands]
            r = rule(op, given, self.devices)
            local = [self.reshard(v, want) for v, want in zip(operands, r.operands)]
            if isinstance(op, tir.GatherOp) and r.results[0].partial:
                self.new[op.output] = self.masked_lookup(op, local[0], local[1])
                continue
            types = [local_type(dtypes.tensor(t), s, self.devices) for t, s in zip(op.result_types, r.results)]
            clone = type(op).create(
                operands=local, result_types=types, properties={**op.properties, **r.local},
                attributes=dict(op.attributes)
            )
            clone.location = op.location
            self.block.insert_op_before(clone, op)
            for old, new, s in zip(op.results, clone.results, r.results):
                new.name_hint = old.name_hint
                self.new[old], self.sharding[new] = new, s
            if isinstance(op, tir.ReduceOp) and op.fn.data == ReduceFn.MEAN and r.results[0] == PARTIAL and \
                    r.operands[0].axis is not None:  # each device's mean over its block, a 1/P share of the whole's
                self.new[op.output] = self.scaled(clone.results[0], 1 / self.devices)
        for op in reversed(old_ops):
            if not isinstance(op, shard.ShardingOp | shard.GridOp):
                op.detach()
                op.erase(safe_erase=False)
        for op in list(self.block.ops):  # the shardings the annotations used
            if isinstance(op, shard.ShardingOp) and not op.result.uses:
                op.detach()
                op.erase()
        if self.kept_inputs or self.kept_outputs:
            self.retype()

    def scaled(self, v: SSAValue, factor: float) -> SSAValue:
        """`v` times `factor`, partial as `v` is."""
        t = dtypes.tensor(v.type)
        by = self.add(tir.FullOp(FloatAttr(factor, cast(AnyFloat, t.element_type)), TensorType(t.element_type, [1])))
        out = self.add(tir.BinaryOp(BinaryFn.MUL, v, by), PARTIAL)
        out.name_hint = v.name_hint
        return out

    def retype(self) -> None:
        """The function's type with the inputs and results each device
        holds a block of, each marked with its split axis."""
        ret = self.block.last_op
        assert isinstance(ret, ReturnOp)
        f = self.func
        f.function_type = FunctionType.from_lists([a.type for a in self.block.args], list(ret.arguments.types))
        f.arg_attrs = _with_split_axes(f.arg_attrs, len(self.block.args), self.by_rows(self.kept_inputs))
        f.res_attrs = _with_split_axes(f.res_attrs, len(ret.arguments), self.by_rows(self.kept_outputs))

    def by_rows(self, kept: dict[int, Sharding]) -> dict[int, Sharding]:
        """Inputs and results kept split, as the runners read them: over
        the mesh's rows alone (its one axis partitioned) as blocks by rows."""
        if self.axis is None:
            return kept
        if self.axis != ROWS or len(self.dims) != 2:
            raise ForgeOptError(f"tp-partition keeps inputs and results split over grid axis {self.axis}: only a "
                                "mesh's rows (axis 0) hold blocks of them")
        return {i: split(s.axis, self.dims[ROWS]) for i, s in kept.items() if s.axis is not None}

    def first_device_only(self, v: SSAValue) -> SSAValue:
        """A replicated value as a partial one: itself on device 0, zeros on
        the others (a bias or residual added to a partial sum, once)."""
        et = dtypes.tensor(v.type).element_type
        if self.first is None:  # [1] on device 0, [0] on the others: made once
            flags = self.add(tir.ConstantOp(array_to_attr(np.asarray([True] + [False] * (self.devices - 1)))))
            self.first = self.add(shard.AllSliceOp(flags, self.grid, self.line, 0, TensorType(i1, [1])), split(0))
        zero = self.add(tir.FullOp(FloatAttr(0.0, cast(AnyFloat, et)), TensorType(et, [1])))
        return self.add(tir.WhereOp(self.first, v, zero), PARTIAL)

    def masked_lookup(self, op: tir.GatherOp, table: SSAValue, indices: SSAValue) -> SSAValue:
        """Paddle's vocab-parallel embedding on device k: rows [k·n, (k+1)·n)
        looked up locally, every other index's row zeroed. The table is the
        block as stored (no zero row appended), so a tied LM head reads
        the same block."""
        p, g = self.devices, self.grid
        rows = shape(table)[0]
        total = rows * p
        it = indices.type
        assert isinstance(it, TensorType) and isinstance(it.element_type, IntegerType)
        np_int = dtypes.numpy_dtype(it.element_type)

        def const(values) -> SSAValue:
            return self.add(tir.ConstantOp(array_to_attr(np.asarray(values, np_int))))

        def per_device(values) -> SSAValue:  # device k's entry of a [P] constant, as [1]
            whole = const(values)
            one = TensorType(it.element_type, [1])
            return self.add(shard.AllSliceOp(whole, g, self.line, 0, one), split(0))

        def binary(fn: BinaryFn, a: SSAValue, b: SSAValue) -> SSAValue:
            return self.add(tir.BinaryOp(fn, a, b))

        idx = nonnegative_indices(self.add, indices, total)
        first = per_device([k * rows for k in range(p)])  # device k's first row
        local, zero_index = binary(BinaryFn.SUB, idx, first), const([0])
        inside = binary(BinaryFn.AND, binary(BinaryFn.GE, local, zero_index), binary(BinaryFn.LT, local, const([rows])))
        local = self.add(tir.WhereOp(inside, local, zero_index))
        looked_up = self.add(tir.GatherOp(table, local, 0))
        et = dtypes.tensor(table.type)
        zero = IntegerAttr(0, et.element_type) if isinstance(et.element_type, IntegerType) else \
            FloatAttr(0.0, cast(AnyFloat, et.element_type))
        kept = self.add(tir.ReshapeOp(inside, [*shape(inside), 1]))
        out = self.add(tir.WhereOp(kept, looked_up, self.add(tir.FullOp(zero, TensorType(et.element_type, [1])))))
        out.name_hint = op.output.name_hint
        self.sharding[out] = PARTIAL
        return out


@dataclass(frozen=True)
class TPPartitionPass(ModulePass):
    """Rewrite the annotated global program into the per-device program
    with explicit collectives (a no-op on a module without a grid); with
    `axis`, over that grid axis alone (the Galaxy layout's columns, then
    its rows), the collectives of an earlier one kept as they are."""

    name = "tp-partition"
    axis: int = -1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        found = grid_info(op)
        if found is None:
            return
        grid, dims = found
        if not -1 <= self.axis < len(dims):
            raise ForgeOptError(f"tp-partition{{axis={self.axis}}}: the grid @{grid} {dims} has no such axis")
        for func in op.ops:
            if isinstance(func, FuncOp) and func.body.blocks:
                _Partitioner(func, grid, dims, None if self.axis < 0 else self.axis).run()
