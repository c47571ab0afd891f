"""The StableHLO ops (and CHLO's `erf`) the `stablehlo` target prints.

xDSL 0.74 has no `stablehlo` dialect. These are its ops as the OpenXLA spec
defines them, with the operands, results and properties the target uses,
printed in MLIR's generic op syntax, which jaxlib's and tt-mlir's parsers
read, and StableHLO's attributes in their own syntax:
`#stablehlo<comparison_direction GT>`, `#stablehlo.dot<...>`,
`#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>`,
`#stablehlo.gather<...>`, `#stablehlo.channel_handle<...>`. Shape rules the
target relies on are verified next to each op.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    IntAttr,
    IntegerAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum


def ints(values: Sequence[int]) -> ArrayAttr[IntAttr]:
    return ArrayAttr([IntAttr(int(v)) for v in values])


def i64_array(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _list(values: ArrayAttr[IntAttr]) -> str:
    return "[" + ", ".join(str(v.data) for v in values.data) + "]"


# -- attributes -------------------------------------------------------------------


class ComparisonDirection(StrEnum):
    EQ = "EQ"
    NE = "NE"
    GE = "GE"
    GT = "GT"
    LE = "LE"
    LT = "LT"


@irdl_attr_definition
class ComparisonDirectionAttr(EnumAttribute[ComparisonDirection], SpacedOpaqueSyntaxAttribute):
    """`#stablehlo<comparison_direction GT>`."""

    name = "stablehlo.comparison_direction"


@irdl_attr_definition
class DotAttr(ParametrizedAttribute):
    """`#stablehlo.dot<lhs_batching_dimensions = [0], ...>` (empty lists left out, as StableHLO prints)."""

    name = "stablehlo.dot"

    lhs_batching_dimensions: ArrayAttr[IntAttr]
    rhs_batching_dimensions: ArrayAttr[IntAttr]
    lhs_contracting_dimensions: ArrayAttr[IntAttr]
    rhs_contracting_dimensions: ArrayAttr[IntAttr]

    def print_parameters(self, printer: Printer) -> None:
        fields = [(n, getattr(self, n)) for n in ("lhs_batching_dimensions", "rhs_batching_dimensions",
                                                   "lhs_contracting_dimensions", "rhs_contracting_dimensions")]
        printer.print_string("<" + ", ".join(f"{n} = {_list(v)}" for n, v in fields if v.data) + ">")


@irdl_attr_definition
class ConvAttr(ParametrizedAttribute):
    """`#stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>`: each
    layout lists, per dim of the tensor, its role (`b`/`f` batch and
    feature, `o`/`i` the kernel's output and input features, a digit the
    spatial dim)."""

    name = "stablehlo.conv"

    input_layout: ArrayAttr[IntAttr]  # per tensor dim: -1 batch, -2 feature, k >= 0 spatial dim k
    kernel_layout: ArrayAttr[IntAttr]  # -1 output feature, -2 input feature
    output_layout: ArrayAttr[IntAttr]

    def print_parameters(self, printer: Printer) -> None:
        def text(layout: ArrayAttr[IntAttr], roles: str) -> str:
            return "[" + ", ".join(roles[-v.data - 1] if v.data < 0 else str(v.data) for v in layout.data) + "]"
        printer.print_string(f"<{text(self.input_layout, 'bf')}x{text(self.kernel_layout, 'oi')}"
                             f"->{text(self.output_layout, 'bf')}>")


@irdl_attr_definition
class GatherAttr(ParametrizedAttribute):
    """`#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0],
    index_vector_dim = 1>`."""

    name = "stablehlo.gather"

    offset_dims: ArrayAttr[IntAttr]
    collapsed_slice_dims: ArrayAttr[IntAttr]
    start_index_map: ArrayAttr[IntAttr]
    index_vector_dim: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(
            f"<offset_dims = {_list(self.offset_dims)}, collapsed_slice_dims = {_list(self.collapsed_slice_dims)}, "
            f"start_index_map = {_list(self.start_index_map)}, index_vector_dim = {self.index_vector_dim.data}>")


@irdl_attr_definition
class ChannelHandleAttr(ParametrizedAttribute):
    """`#stablehlo.channel_handle<handle = 1, type = 1>` (type 1: device to device)."""

    name = "stablehlo.channel_handle"

    handle: IntAttr
    type: IntAttr

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<handle = {self.handle.data}, type = {self.type.data}>")


# -- ops ----------------------------------------------------------------------------


class HloOp(IRDLOperation):
    """An op on tensors: its operands and one result."""

    operands_ = var_operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())

    def __init__(self, operands: Sequence, result_type: Attribute, properties: dict[str, Attribute] | None = None):
        super().__init__(operands=[list(operands)], result_types=[result_type], properties=properties or {})


class ElementwiseOp(HloOp):
    """Operands and result of one shape (the element types may differ: compare, convert)."""

    def verify_(self) -> None:
        shapes = {tuple(TensorType.get_shape(v.type)) for v in (*self.operands, self.result)}  # type: ignore[arg-type]
        if len(self.operands) != ARITY[self.name]:
            raise VerifyException(f"{self.name} takes {ARITY[self.name]} operands, got {len(self.operands)}")
        if len(shapes) != 1:
            raise VerifyException(f"{self.name}: operands and result differ in shape: {sorted(shapes)}")


def _elementwise(op_name: str, arity: int) -> type[ElementwiseOp]:
    ARITY[op_name] = arity
    cls = type(op_name.split(".")[1].title().replace("_", "") + "Op", (ElementwiseOp,),
               {"name": op_name, "__doc__": f"`{op_name}`, element by element."})
    return irdl_op_definition(cls)


ARITY: dict[str, int] = {"stablehlo.compare": 2}


UNARY_NAMES = ("abs", "exponential", "log", "sqrt", "tanh", "logistic", "sine", "cosine", "convert")
BINARY_NAMES = ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2",
                "and", "or")
ELEMENTWISE: dict[str, type[ElementwiseOp]] = {
    **{f"stablehlo.{n}": _elementwise(f"stablehlo.{n}", 1) for n in UNARY_NAMES},
    **{f"stablehlo.{n}": _elementwise(f"stablehlo.{n}", 2) for n in BINARY_NAMES},
    "stablehlo.select": _elementwise("stablehlo.select", 3),
}
ERF = ELEMENTWISE["chlo.erf"] = _elementwise("chlo.erf", 1)


@irdl_op_definition
class CompareOp(ElementwiseOp):
    name = "stablehlo.compare"
    comparison_direction = prop_def(ComparisonDirectionAttr)


@irdl_op_definition
class ClampOp(HloOp):
    """`clamp(min, x, max)`; min and max may be scalars."""

    name = "stablehlo.clamp"


@irdl_op_definition
class ConstantOp(HloOp):
    name = "stablehlo.constant"
    value = prop_def(DenseIntOrFPElementsAttr)

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException(f"stablehlo.constant: value {self.value.type} is not the result's {self.result.type}")


@irdl_op_definition
class IotaOp(HloOp):
    name = "stablehlo.iota"
    iota_dimension = prop_def(IntegerAttr)


@irdl_op_definition
class ReshapeOp(HloOp):
    name = "stablehlo.reshape"

    def verify_(self) -> None:
        sizes = [math.prod(TensorType.get_shape(v.type)) for v in (self.operands[0], self.result)]  # type: ignore[arg-type]
        if sizes[0] != sizes[1]:
            raise VerifyException(f"stablehlo.reshape: {sizes[0]} elements into {sizes[1]}")


@irdl_op_definition
class TransposeOp(HloOp):
    name = "stablehlo.transpose"
    permutation = prop_def(DenseArrayBase)


@irdl_op_definition
class BroadcastInDimOp(HloOp):
    name = "stablehlo.broadcast_in_dim"
    broadcast_dimensions = prop_def(DenseArrayBase)


@irdl_op_definition
class SliceOp(HloOp):
    name = "stablehlo.slice"
    start_indices = prop_def(DenseArrayBase)
    limit_indices = prop_def(DenseArrayBase)
    strides = prop_def(DenseArrayBase)


@irdl_op_definition
class DynamicSliceOp(HloOp):
    """`dynamic_slice(x, start_0, start_1, ...)`: scalar starts, one per dim."""

    name = "stablehlo.dynamic_slice"
    slice_sizes = prop_def(DenseArrayBase)


@irdl_op_definition
class ConcatenateOp(HloOp):
    name = "stablehlo.concatenate"
    dimension = prop_def(IntegerAttr)


@irdl_op_definition
class PadOp(HloOp):
    """`pad(x, value)`: edges low and high (negative crops), interior between elements."""

    name = "stablehlo.pad"
    edge_padding_low = prop_def(DenseArrayBase)
    edge_padding_high = prop_def(DenseArrayBase)
    interior_padding = prop_def(DenseArrayBase)


@irdl_op_definition
class ReverseOp(HloOp):
    name = "stablehlo.reverse"
    dimensions = prop_def(DenseArrayBase)


@irdl_op_definition
class DotGeneralOp(HloOp):
    name = "stablehlo.dot_general"
    dot_dimension_numbers = prop_def(DotAttr)


@irdl_op_definition
class ConvolutionOp(HloOp):
    name = "stablehlo.convolution"
    dimension_numbers = prop_def(ConvAttr)
    window_strides = prop_def(DenseArrayBase)
    padding = prop_def(DenseIntOrFPElementsAttr)  # tensor<Nx2xi64>: low and high per spatial dim
    lhs_dilation = prop_def(DenseArrayBase)
    rhs_dilation = prop_def(DenseArrayBase)
    feature_group_count = prop_def(IntegerAttr)
    batch_group_count = prop_def(IntegerAttr)


@irdl_op_definition
class GatherOp(HloOp):
    name = "stablehlo.gather"
    dimension_numbers = prop_def(GatherAttr)
    slice_sizes = prop_def(DenseArrayBase)


class RegionOp(IRDLOperation):
    """An op whose region combines two elements (reduce, reduce_window, all_reduce)."""

    operands_ = var_operand_def(TensorType)
    results_ = var_result_def(TensorType)
    body = region_def("single_block")


@irdl_op_definition
class ReduceOp(RegionOp):
    """`reduce(inputs..., inits...)` over `dimensions`."""

    name = "stablehlo.reduce"
    dimensions = prop_def(DenseArrayBase)


@irdl_op_definition
class ReduceWindowOp(RegionOp):
    name = "stablehlo.reduce_window"
    window_dimensions = prop_def(DenseArrayBase)
    window_strides = opt_prop_def(DenseArrayBase)
    window_dilations = opt_prop_def(DenseArrayBase)
    padding = opt_prop_def(DenseIntOrFPElementsAttr)


class CollectiveOp(IRDLOperation):
    """Who takes part: `replica_groups` of device ids (global ones, with
    `use_global_device_ids`), over a channel of its own."""

    replica_groups = prop_def(DenseIntOrFPElementsAttr)
    channel_handle = prop_def(ChannelHandleAttr)
    use_global_device_ids = opt_prop_def(UnitAttr)


@irdl_op_definition
class AllReduceOp(RegionOp, CollectiveOp):
    name = "stablehlo.all_reduce"


@irdl_op_definition
class ReduceScatterOp(RegionOp, CollectiveOp):
    name = "stablehlo.reduce_scatter"
    scatter_dimension = prop_def(IntegerAttr)


@irdl_op_definition
class AllGatherOp(HloOp, CollectiveOp):
    name = "stablehlo.all_gather"
    all_gather_dim = prop_def(IntegerAttr)


@irdl_op_definition
class PartitionIdOp(IRDLOperation):
    """This device's index in the SPMD program, a `tensor<ui32>`."""

    name = "stablehlo.partition_id"
    result = result_def(TensorType)


@irdl_op_definition
class ReturnOp(IRDLOperation):
    name = "stablehlo.return"
    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator())


STABLEHLO = Dialect("stablehlo", [
    *(op for op in ELEMENTWISE.values() if op is not ERF), CompareOp, ClampOp, ConstantOp, IotaOp, ReshapeOp,
    TransposeOp, BroadcastInDimOp, SliceOp, DynamicSliceOp, ConcatenateOp, PadOp, ReverseOp, DotGeneralOp,
    ConvolutionOp, GatherOp, ReduceOp, ReduceWindowOp, AllReduceOp, ReduceScatterOp, AllGatherOp, PartitionIdOp,
    ReturnOp,
], [ComparisonDirectionAttr, DotAttr, ConvAttr, GatherAttr, ChannelHandleAttr])
CHLO = Dialect("chlo", [ERF])
