"""`forge-to-stablehlo`: a module of `forge` ops as one StableHLO program.

The public `@main` takes the graph's inputs in the model's order and returns
its outputs in order. A P-device program (`onnx-to-forge{devices=P}`) is one
SPMD module (`mhlo.num_partitions = P`): `@main` takes and returns whole
tensors, and its body is one Shardy `manual_computation` that each device
runs on its blocks (an input or output with `shard.split_axis` split along
it; with `shard.split_blocks`, by a mesh's rows; an R x C mesh's program
runs over the Shardy mesh `["r"=R, "c"=C]`); `shard.all_slice` is a `dynamic_slice` at the device's
index over the slice's grid axes (its `partition_id`, or on a mesh its row
or column), and `all_reduce`, `all_gather` and `reduce_scatter` are
StableHLO's over their devices (`replica_groups`, one channel each); weights are `stablehlo.constant`s, laid out as
`process_framework_parameters` lays them out; a matmul's block-float weight
operand (`mark-weight-formats`) is a constant of the values the device holds
(`device_values`), as the stand-in converts it. Each `forge` op becomes its record's StableHLO form
(`forge_functions/stablehlo_*.py`); an op of a narrow float type
(bfloat16, float16) computes in float32 and rounds its result once, as
Forge's golden does. An op with no form, or anything else the program
holds, is an error naming it and its ONNX node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    IntAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    StringAttr,
    TensorType,
    UnitAttr,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.data_formats import SATURATED_ATTR, SATURATED_WEIGHTS_ATTR, WEIGHT_FORMAT_ATTR, device_values
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import forge, sdy, shard
from forge_opt.dialects import stablehlo as hlo
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.forge_functions.stablehlo_forms import FORMS
from forge_opt.dialects.stablehlo_build import Hlo, element, shape
from forge_opt.interpreters.forge import fill_array, laid_out, weight_format
from forge_opt.interpreters.shard import group_of
from forge_opt.transforms.tp.partition import SPLIT_AXIS, SPLIT_BLOCKS, split_axes, split_blocks

ui32 = IntegerType(32, Signedness.UNSIGNED)


def _weight(op: forge.ParameterOp | forge.ConstantOp) -> np.ndarray:
    if isinstance(op, forge.ParameterOp):
        array = laid_out(attr_to_array(op.value), op.steps())
    else:
        array = attr_to_array(op.value) if op.value is not None else fill_array(op)
    return np.ascontiguousarray(array).reshape(array.shape)  # (ascontiguousarray makes a scalar 1-D)


def _narrow(t) -> bool:
    return isinstance(t, TensorType) and dtypes.is_narrow_float(dtypes.numpy_dtype(t.element_type))


def lower_op(h: Hlo, op: forge.ForgeOp, values: dict[SSAValue, SSAValue]) -> SSAValue:
    """One `forge` op as its StableHLO form."""
    fn = op.FUNCTION
    form = FORMS.get(fn.name)
    if form is None:
        raise ForgeOptError(f"{describe(op)}: forge.op.{fn.name} has no StableHLO form")
    out = op.results[0].type
    assert isinstance(out, TensorType)
    args: list[SSAValue | None] = []
    for name in fn.fields:
        v = getattr(op, name)
        if v is None or isinstance(v, SSAValue):
            args.append(None if v is None else values[v])
        else:
            args.extend(values[x] for x in v)
    i = fn.weight_operand
    if i is not None and (fmt := weight_format(op.operands[i])) is not None:  # as the device stores it
        weight = op.operands[i].owner
        if not isinstance(weight, forge.ParameterOp | forge.ConstantOp):
            made = describe(weight) if isinstance(weight, Operation) else "an argument"
            raise ForgeOptError(f"{describe(op)}: its {fmt} weight is computed by {made}; the "
                                "stablehlo target holds a block-float weight only as a weight read directly")
        args[i] = h.const(device_values(_weight(weight), fmt))
    narrow = _narrow(out) or any(a is not None and _narrow(a.type) for a in args)
    if narrow:  # the golden computes in float32 and rounds once
        args = [a if a is None or not _narrow(a.type) else h.convert(a, f32) for a in args]
        wide_out = TensorType(f32, out.get_shape()) if _narrow(out) else out
        result = form(h, forge.rule_call(op), args, wide_out)
        result = h.convert(result, out.element_type)
    else:
        result = form(h, forge.rule_call(op), args, out)
    if result.type != out:
        raise ForgeOptError(f"{describe(op)}: the StableHLO form of forge.op.{fn.name} gives {result.type}, "
                            f"where Forge gives {out}")
    return result


class _Collectives:
    """The `shard` ops of a P-device program as StableHLO's."""

    def __init__(self, grid: list[int]):
        self.grid = grid  # a line [P], or a mesh [R, C] whose collectives run over one axis each
        self.channels = 0
        self.index: SSAValue | None = None  # this device's partition id as i64, made at the first all_slice

    def device_index(self, h: Hlo) -> SSAValue:
        if self.index is None:  # ops are appended in order: the first definition comes before every use
            self.index = h.convert(h.add(hlo.PartitionIdOp(result_types=[TensorType(ui32, [])])), i64)
        return self.index

    def index_over(self, h: Hlo, axes: list[int]) -> SSAValue:
        """This device's index in its group over the grid `axes`: its own
        (every axis), or on a mesh its row (axis 0) or its column (axis 1)."""
        index = self.device_index(h)
        if axes == list(range(len(self.grid))):
            return index
        columns = h.full(self.grid[1], i64)
        return h.binary("divide" if axes == [0] else "remainder", index, columns)

    def _group(self, op: Operation) -> dict[str, Attribute]:
        """Its replica groups: every device, or on a mesh each row's or column's."""
        self.channels += 1
        axes = shard.grid_axes(op)
        groups = sorted({tuple(group_of(self.grid, axes, rank)) for rank in range(math.prod(self.grid))})
        return {"replica_groups": array_to_attr(np.array(groups, dtype=np.int64)),
                "channel_handle": hlo.ChannelHandleAttr(IntAttr(self.channels), IntAttr(1)),
                "use_global_device_ids": UnitAttr()}

    def lower(self, h: Hlo, op: Operation, x: SSAValue) -> SSAValue:
        out = op.results[0].type
        assert isinstance(out, TensorType)
        if isinstance(op, shard.AllSliceOp):  # this device's block: no communication
            size = out.get_shape()[op.axis]
            index = self.index_over(h, shard.grid_axes(op))
            starts = [h.binary("multiply", index, h.full(size, i64)) if d == op.axis else h.full(0, i64)
                      for d in range(len(shape(x)))]
            return h.add(hlo.DynamicSliceOp([x, *starts], out, {"slice_sizes": hlo.i64_array(out.get_shape())}))
        if isinstance(op, shard.AllGatherOp):
            return h.add(hlo.AllGatherOp([x], out, {"all_gather_dim": IntegerAttr(op.axis, i64), **self._group(op)}))
        combine = "maximum" if isinstance(op, shard.AllReduceOp) and \
            shard.reduction_of(op) == shard.ReductionKind.MAX else "add"
        region = h.combiner(combine, [element(x)])
        if isinstance(op, shard.ReduceScatterOp):
            return h.add(hlo.ReduceScatterOp(operands=[[x]], result_types=[[out]], regions=[region], properties={
                "scatter_dimension": IntegerAttr(op.axis, i64), **self._group(op)}))
        assert isinstance(op, shard.AllReduceOp)
        return h.add(hlo.AllReduceOp(operands=[[x]], result_types=[[out]], regions=[region],
                                     properties=self._group(op)))


def lower_function(source: func.FuncOp, name: str = "main", grid: list[int] | None = None) -> func.FuncOp:
    """`source`'s body as a public function of StableHLO ops named `name`
    (on a device `grid` of several, a Shardy manual computation of it)."""
    if grid is not None and math.prod(grid) > 1:
        return _spmd(source, name, grid)
    block = _named_block(source, source.function_type.inputs.data)
    values: dict[SSAValue, SSAValue] = dict(zip(source.body.block.args, block.args))
    _lower_body(source, block, values, func.ReturnOp, None)
    return func.FuncOp(name, source.function_type, Region(block), arg_attrs=source.arg_attrs,
                       res_attrs=source.res_attrs)


def _named_block(source: func.FuncOp, types) -> Block:
    """A block of arguments of `types`, named as `source`'s are."""
    block = Block(arg_types=types)
    for old, new in zip(source.body.block.args, block.args):
        if old.name_hint:
            new.name_hint = old.name_hint
    return block


def _lower_body(source: func.FuncOp, block: Block, values: dict[SSAValue, SSAValue], ret,
                collectives: _Collectives | None) -> None:
    """Each op of `source` appended to `block` as StableHLO, its return as `ret`."""
    h = Hlo(block)
    for op in source.body.block.ops:
        if collectives is not None and isinstance(op, shard.AllSliceOp | shard.AllGatherOp | shard.ReduceScatterOp |
                                                  shard.AllReduceOp):
            values[op.results[0]] = collectives.lower(h, op, values[op.operands[0]])
        elif isinstance(op, forge.ParameterOp | forge.ConstantOp):
            values[op.results[0]] = h.const(_weight(op))
            if element(values[op.results[0]]) != op.results[0].type.element_type:  # type: ignore[attr-defined]
                raise ForgeOptError(f"{describe(op)}: its value's type differs from its result's")
        elif isinstance(op, forge.ForgeOp):
            values[op.results[0]] = lower_op(h, op, values)
        elif isinstance(op, func.ReturnOp):
            block.add_op(ret(*(values[v] for v in op.arguments)))
        else:
            raise ForgeOptError(f"{describe(op)}: the stablehlo target takes forge and shard ops only, not {op.name}")
        if op.results and op.results[0].name_hint and op.results[0] in values:
            values[op.results[0]].name_hint = op.results[0].name_hint


def _whole(t: Attribute, axis: int | None, devices: int) -> Attribute:
    if axis is None:
        return t
    dims = list(t.get_shape())  # type: ignore[attr-defined]
    dims[axis] *= devices
    return TensorType(t.element_type, dims)  # type: ignore[attr-defined]


def _spmd(source: func.FuncOp, name: str, grid: list[int]) -> func.FuncOp:
    """@main over whole tensors, its body one manual computation of the device program."""
    devices = math.prod(grid)
    ins, outs = source.function_type.inputs.data, source.function_type.outputs.data
    in_axes, out_axes = split_axes(source.arg_attrs, len(ins)), split_axes(source.res_attrs, len(outs))
    in_blocks, out_blocks = split_blocks(source.arg_attrs, len(ins)), split_blocks(source.res_attrs, len(outs))
    whole_ins = [_whole(t, a, b or devices) for t, a, b in zip(ins, in_axes, in_blocks)]
    whole_outs = [_whole(t, a, b or devices) for t, a, b in zip(outs, out_axes, out_blocks)]
    outer = _named_block(source, whole_ins)
    inner = Block(arg_types=ins)
    values: dict[SSAValue, SSAValue] = dict(zip(source.body.block.args, inner.args))
    _lower_body(source, inner, values, lambda *vs: sdy.ReturnOp(operands=[list(vs)]), _Collectives(grid))
    manual = sdy.ManualComputationOp(outer.args, whole_outs, in_axes, out_axes, Region(inner), in_blocks, out_blocks,
                                     mesh_rows(grid))
    outer.add_op(manual)
    outer.add_op(func.ReturnOp(*manual.results))
    return func.FuncOp(name, FunctionType.from_lists(whole_ins, whole_outs), Region(outer),
                       arg_attrs=_without_split(source.arg_attrs), res_attrs=_without_split(source.res_attrs))


def mesh_rows(grid: list[int]) -> int:
    """The rows of the Shardy mesh: the grid's R on an R x C mesh, whose
    two axes a collective over a row or a column names (tt-mlir lowers a
    collective over one axis of the mesh it opens, not a group of a line);
    0 on a line of devices."""
    return grid[0] if len(grid) == 2 else 0


def _without_split(attrs: ArrayAttr | None) -> ArrayAttr[DictionaryAttr] | None:
    """Argument or result attributes without `shard.split_axis`: @main's are whole tensors."""
    if attrs is None:
        return None
    return ArrayAttr([DictionaryAttr({k: v for k, v in d.data.items() if k not in (SPLIT_AXIS, SPLIT_BLOCKS)})
                      if isinstance(d, DictionaryAttr) else DictionaryAttr({}) for d in attrs.data])


def public_function(module: ModuleOp) -> tuple[func.FuncOp, list[int]]:
    """The module's one function, and its device grid's shape ([1] if none)."""
    public = [op for op in module.ops if isinstance(op, func.FuncOp)
              and (op.sym_visibility is None or op.sym_visibility == StringAttr("public"))]
    if len(public) != 1:
        raise ForgeOptError(f"the stablehlo target takes a module with one public function, not {len(public)}")
    grids = [op for op in module.ops if isinstance(op, shard.GridOp)]
    shape = [1]
    for grid in grids:
        shape = [int(d) for d in grid.shape.get_values()]
        if len(shape) > 2:
            raise ForgeOptError(f"{describe(grid)}: the stablehlo target takes a line or a mesh of devices, not "
                                f"{shape}")
    others = [op for op in module.ops if op is not public[0] and op not in grids]
    if others:
        raise ForgeOptError(f"{describe(others[0])}: the stablehlo target takes one function of forge ops; "
                            f"this module also holds {others[0].name} (a split program: print each part)")
    return public[0], shape


@dataclass(frozen=True)
class ForgeToStableHLO(ModulePass):
    """Rewrites a module of one function of `forge` ops into `@main` of StableHLO ops."""

    name = "forge-to-stablehlo"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        source, grid = public_function(op)
        devices, rows = math.prod(grid), mesh_rows(grid)
        lowered = lower_function(source, grid=grid)
        op.body.block.insert_op_before(lowered, source)
        op.body.block.erase_op(source)
        for forge_attr in (WEIGHT_FORMAT_ATTR, SATURATED_ATTR, SATURATED_WEIGHTS_ATTR):  # the constants hold it now
            op.attributes.pop(forge_attr, None)
        for grid in [g for g in op.ops if isinstance(g, shard.GridOp)]:
            op.body.block.erase_op(grid)
        if devices > 1:
            op.body.block.insert_op_before(sdy.MeshOp(devices, rows), lowered)
            op.attributes["mhlo.num_partitions"] = IntegerAttr(devices, i32)
            op.attributes["mhlo.num_replicas"] = IntegerAttr(1, i32)



