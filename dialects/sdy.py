"""Shardy (`sdy`), as much of it as a P-device program needs: a 1-D mesh
(or, for an R x C mesh of devices, the mesh `["r"=R, "c"=C]`)
and one `manual_computation` whose body every device runs on its own
block, printed in Shardy's own syntax, as JAX's `shard_map` lowers:

    sdy.mesh @mesh = <["d"=2]>
    %0:2 = sdy.manual_computation(%a, %b) in_shardings=[<@mesh, [{"d"}, {}]>, <@mesh, [{}]>]
        out_shardings=[...] manual_axes={"d"} (%x: tensor<2x3xf32>, %y: tensor<3xf32>) { ... sdy.return ... }
        : (tensor<4x3xf32>, tensor<3xf32>) -> (...)

XLA's SPMD partitioner (Shardy) and tt-xla's multi-device path read this
form; xDSL 0.74 has no `sdy` dialect.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, IntAttr, StringAttr, TensorType
from xdsl.ir import Attribute, Block, Dialect, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.printer import Printer
from xdsl.traits import IsTerminator
from xdsl.utils.exceptions import VerifyException

AXIS = "d"  # the mesh's one axis
ROW, COLUMN = "r", "c"  # a mesh's two axes
MESH = "mesh"


def mesh_axes(rows: int) -> list[str]:
    """The mesh's axes: one (`rows` 0), or rows and columns."""
    return [ROW, COLUMN] if rows else [AXIS]


@irdl_op_definition
class MeshOp(IRDLOperation):
    """`sdy.mesh @mesh = <["d"=P]>`."""

    name = "sdy.mesh"
    sym_name = prop_def(StringAttr)
    size = prop_def(IntAttr)
    rows = prop_def(IntAttr)  # 0: a line of `size`; else `size` devices in this many rows

    def __init__(self, size: int, rows: int = 0):
        super().__init__(properties={"sym_name": StringAttr(MESH), "size": IntAttr(size), "rows": IntAttr(rows)})

    def print(self, printer: Printer) -> None:
        rows, size = self.rows.data, self.size.data
        sizes = [rows, size // rows] if rows else [size]
        axes = ", ".join(f'"{a}"={n}' for a, n in zip(mesh_axes(rows), sizes))
        printer.print_string(f" @{self.sym_name.data} = <[{axes}]>")


def _sharding(axis: int | None, blocks: int, rank: int, rows: int) -> str:
    """A split along `axis` over every device, or (`blocks`) over the rows."""
    over = ", ".join(f'"{a}"' for a in ([ROW] if blocks else mesh_axes(rows)))
    dims = ", ".join("{" + over + "}" if i == axis else "{}" for i in range(rank))
    return f"<@{MESH}, [{dims}]>"


@irdl_op_definition
class ManualComputationOp(IRDLOperation):
    """Every device runs the body on its block of each operand (split along
    the axis `in_axes` gives, -1 for a whole one; in `in_blocks` by the
    mesh's `rows`, 0 for one block a device); results are joined along
    `out_axes`, or are the same on every device."""

    name = "sdy.manual_computation"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    in_axes = prop_def(ArrayAttr[IntAttr])
    out_axes = prop_def(ArrayAttr[IntAttr])
    in_blocks = prop_def(ArrayAttr[IntAttr])
    out_blocks = prop_def(ArrayAttr[IntAttr])
    rows = prop_def(IntAttr)  # of the mesh (`MeshOp`); 0 for a line
    body = region_def("single_block")

    def __init__(self, inputs: Sequence[SSAValue], result_types: Sequence[Attribute], in_axes: Sequence[int | None],
                 out_axes: Sequence[int | None], body: Region, in_blocks: Sequence[int | None] = (),
                 out_blocks: Sequence[int | None] = (), rows: int = 0):
        def axes(values: Sequence[int | None]) -> ArrayAttr[IntAttr]:
            return ArrayAttr([IntAttr(-1 if a is None else a) for a in values])

        def blocks(values: Sequence[int | None], count: int) -> ArrayAttr[IntAttr]:
            return ArrayAttr([IntAttr(b or 0) for b in (list(values) or [0] * count)])
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)],
                         properties={"in_axes": axes(in_axes), "out_axes": axes(out_axes),
                                     "in_blocks": blocks(in_blocks, len(in_axes)),
                                     "out_blocks": blocks(out_blocks, len(out_axes)), "rows": IntAttr(rows)},
                         regions=[body])

    @staticmethod
    def _axes(attr: ArrayAttr[IntAttr]) -> list[int | None]:
        return [None if a.data < 0 else a.data for a in attr.data]

    def verify_(self) -> None:
        if len(self.in_axes.data) != len(self.inputs) or len(self.out_axes.data) != len(self.outputs) or \
                len(self.in_blocks.data) != len(self.inputs) or len(self.out_blocks.data) != len(self.outputs):
            raise VerifyException("sdy.manual_computation: one axis and block count per operand and per result")
        if any(b.data and b.data != self.rows.data for b in self.in_blocks.data + self.out_blocks.data):
            raise VerifyException("sdy.manual_computation: a value split in blocks is split by the mesh's rows")

    def print(self, printer: Printer) -> None:
        block: Block = self.body.block
        ranks_in = [len(TensorType.get_shape(v.type)) for v in self.inputs]  # type: ignore[arg-type]
        ranks_out = [len(TensorType.get_shape(v.type)) for v in self.outputs]  # type: ignore[arg-type]
        printer.print_string("(")
        printer.print_list(self.inputs, printer.print_operand)
        rows = self.rows.data
        printer.print_string(") in_shardings=[" + ", ".join(_sharding(a, b.data, r, rows) for a, b, r in zip(
            self._axes(self.in_axes), self.in_blocks.data, ranks_in)) + "]")
        printer.print_string(" out_shardings=[" + ", ".join(_sharding(a, b.data, r, rows) for a, b, r in zip(
            self._axes(self.out_axes), self.out_blocks.data, ranks_out)) + "]")
        manual = ", ".join(f'"{a}"' for a in mesh_axes(rows))
        printer.print_string(f" manual_axes={{{manual}}} (")
        printer.print_list(block.args, printer.print_block_argument)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_string(" : (")
        printer.print_list([v.type for v in self.inputs], printer.print_attribute)
        printer.print_string(") -> (")
        printer.print_list([v.type for v in self.outputs], printer.print_attribute)
        printer.print_string(")")


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "sdy.return"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator())

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.values, printer.print_operand)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.values], printer.print_attribute)


SDY = Dialect("sdy", [MeshOp, ManualComputationOp, ReturnOp])
