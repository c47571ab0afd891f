"""`collectives-on-mesh`: a P-device program (`tp-partition`'s, on a 1-d
grid) laid on an R×C mesh of the same P = R·C devices, ranks row-major
(device r·C + c sits in row r, column c). Each device keeps its blocks;
each collective over the whole grid becomes collectives over one mesh axis
at a time, the hierarchical form that keeps the slow axis's traffic small:

- all-reduce: a reduce-scatter over the row's C devices (grid axis 1), an
  all-reduce of that 1/C over the column's R devices (axis 0), an
  all-gather back over the row; where no dim divides by C, or for a
  maximum (a quantization's range), an all-reduce over the row and then
  over the column;
- all-gather: over the row, then over the column (block r·C + c lands
  where a gather over all P devices puts it);
- reduce-scatter: over the column into R parts, then over the row;
- all-slice (no communication): over both axes, the block of rank r·C + c.

A program `tp-partition` made on the mesh itself (`tensor-parallel` with a
mesh: KV heads split by rows) keeps its collectives over one axis as they
are. Galaxy's hand-written layout (the residual stream split over columns,
MLP weights in [H/C, F/R] blocks) is not this one: here every weight but
those is split over all R·C devices as on a line of P, and the mesh shapes
the communication.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import shard

ROWS, COLUMNS = 0, 1  # the mesh's grid axes: an axis-0 collective runs down a column of R devices
LINE = "shard.line"  # on a collective made here: the index of the collective over the whole grid it is part of


def parse_mesh(text: str) -> tuple[int, int]:
    """`RxC` (`8x4`: Galaxy's 8 rows of 4) as (R, C)."""
    found = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not found or int(found.group(1)) < 1 or int(found.group(2)) < 1:
        raise ForgeOptError(f"mesh '{text}': give rows x columns, e.g. 2x4 (an n300 is 1x2, a T3K 2x4, a Galaxy 8x4)")
    rows, cols = int(found.group(1)), int(found.group(2))
    if rows * cols < 2:
        raise ForgeOptError(f"mesh '{text}' has one device: tensor parallelism needs 2 or more")
    return rows, cols


def mesh_grid(devices: int, mesh: str, flags: bool = False) -> list[int]:
    """`mesh` as [R, C], for a device count left out (1) or R·C; `flags`:
    the error names a tool's flags (`--devices`), not options (`devices=`)."""
    rows, cols = parse_mesh(mesh)
    if devices not in (1, rows * cols):
        named = "--devices" if flags else "devices"
        given = f"--devices {devices} with --mesh {mesh}" if flags else f"devices={devices} with mesh={mesh}"
        raise ForgeOptError(f"{given}: the mesh has {rows * cols} devices: leave {named} out")
    return [rows, cols]


def _with_dim(t, axis: int, size: int) -> TensorType:
    assert isinstance(t, TensorType)
    dims = list(t.get_shape())
    dims[axis] = size
    return TensorType(t.element_type, dims)


@dataclass(frozen=True)
class CollectivesOnMeshPass(ModulePass):
    """Lay a 1-d device grid on an R×C mesh (`mesh=RxC`, R·C its device
    count), or take the program made on that mesh, and run each collective
    over the whole grid over the mesh's axes in turn."""

    name = "collectives-on-mesh"
    mesh: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        grids = [g for g in op.ops if isinstance(g, shard.GridOp)]
        if not grids:
            return
        rows, cols = parse_mesh(self.mesh)
        grid = grids[0]
        name, dims = grid.sym_name.data, list(grid.shape.get_values())
        if dims == [rows * cols]:  # a line's program: laid on the mesh row-major
            Rewriter.replace_op(grid, shard.grid(name, [rows, cols]))
        elif dims != [rows, cols]:
            raise ForgeOptError(f"collectives-on-mesh: the grid @{name} is {dims}, neither the line of "
                                f"{rows * cols} devices a {rows}x{cols} mesh lays out nor that mesh")
        line, count = dims == [rows * cols], 0
        for o in list(op.walk()):
            if isinstance(o, shard.AllSliceOp) and line:
                o.properties["grid_axes"] = shard.axes_attr([ROWS, COLUMNS])
            elif isinstance(o, shard.AllReduceOp | shard.AllGatherOp | shard.ReduceScatterOp) and (
                    line or shard.grid_axes(o) == [ROWS, COLUMNS]):
                _on_axes(o, name, rows, cols, count)
                count += 1


def _on_axes(op: Operation, grid: str, rows: int, cols: int, index: int) -> None:
    """`op`, the `index`-th collective over the whole line, as collectives
    over one mesh axis each (an axis of one device skipped), each marked
    with `index` (`LINE`)."""
    x = op.operands[0]
    assert isinstance(x.type, TensorType)
    made: list[Operation] = []

    def add(new: Operation) -> SSAValue:
        made.append(new)
        return new.results[0]

    def reduce(v: SSAValue, axis: int) -> SSAValue:
        return v if (rows, cols)[axis] == 1 else add(shard.all_reduce(v, grid, [axis], shard.reduction_of(op)))

    def gather(v: SSAValue, axis: int, dim: int, size: int) -> SSAValue:
        if (rows, cols)[axis] == 1:
            return v
        return add(shard.AllGatherOp(v, grid, [axis], dim, _with_dim(v.type, dim, size)))

    def scatter(v: SSAValue, axis: int, dim: int, size: int) -> SSAValue:
        if (rows, cols)[axis] == 1:
            return v
        return add(shard.ReduceScatterOp(v, grid, [axis], dim, _with_dim(v.type, dim, size)))

    dims = x.type.get_shape()
    if isinstance(op, shard.AllReduceOp):
        even = [d for d in range(len(dims)) if dims[d] > 0 and dims[d] % cols == 0]
        if even and cols > 1 and shard.reduction_of(op) == shard.ReductionKind.SUM:  # (the scatter sums)
            d = max(even, key=lambda i: (dims[i], i))  # the largest: the most elements per message
            result = gather(reduce(scatter(x, COLUMNS, d, dims[d] // cols), ROWS), COLUMNS, d, dims[d])
        else:
            result = reduce(reduce(x, COLUMNS), ROWS)
    elif isinstance(op, shard.AllGatherOp):
        a = op.axis
        result = gather(gather(x, COLUMNS, a, dims[a] * cols), ROWS, a, dims[a] * cols * rows)
    else:
        assert isinstance(op, shard.ReduceScatterOp)
        a = op.axis
        result = scatter(scatter(x, ROWS, a, dims[a] // rows), COLUMNS, a, dims[a] // (rows * cols))
    for new in made:
        new.attributes[LINE] = IntegerAttr(index, 64)
        if new.results[0].name_hint is None:
            new.results[0].name_hint = op.results[0].name_hint
    if made:
        Rewriter.insert_op(made, InsertPoint.before(op))
    op.results[0].replace_all_uses_with(result)
    Rewriter.erase_op(op)
