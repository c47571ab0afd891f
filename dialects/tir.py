"""The `tir` dialect: framework-neutral tensor IR between `onnx` and `forge`.

Ops here may be richer than Forge's (multi-result, multi-axis); passes
decompose them until each maps onto one Forge function.

Every op has a builder taking plain Python values, which computes its
result types with the op's `infer`; its verifier calls the same `infer` on
the op's operands and properties and requires the result types it gives
(shape rules in `tir_shapes`). Function kinds (`fn`, `kind`) are enum
attributes from `tir_functions`, whose tables say what each computes.

This module holds the values and the element-wise ops and assembles the
dialect; the other ops are in `tir_nn` (linear algebra, neural networks)
and `tir_data` (data movement), on `tir_base`; all are `tir.XOp`.
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    f32,
    i1,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    ParsePropInAttrDict,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.irdl_fast import op_definition
from forge_opt.dialects.tir_base import OneInputOp, TirOp, binary_attr, like, like_elem, shape_of, unary_attr
from forge_opt.dialects.tir_data import (  # the ops by family, all of them `tir.XOp`
    ArgmaxOp,
    BroadcastOp,
    ConcatOp,
    CumsumOp,
    GatherOp,
    PadOp,
    ReduceOp,
    ReshapeOp,
    SplitOp,
    StridedSliceOp,
    TileOp,
    TransposeOp,
)
from forge_opt.dialects.tir_functions import (
    ATTRIBUTES,
    BINARY,
    BinaryFn,
    BinaryFnAttr,
    UnaryFn,
    UnaryFnAttr,
)
from forge_opt.dialects.tir_nn import (
    BatchnormOp,
    Conv2dOp,
    ConvTranspose2dOp,
    LayernormOp,
    MatmulOp,
    Pool2dOp,
    SoftmaxOp,
)
from forge_opt.dialects.tir_shapes import ShapeError
from forge_opt.dtypes import tensor_type

# -- values ---------------------------------------------------------------------


@op_definition
class ConstantOp(TirOp):
    """A tensor known at compile time. `weight_name` is set for a model
    weight (an ONNX initializer), which Forge loads by that name."""

    name = "tir.constant"
    output = result_def(TensorType)
    value = prop_def(Attribute)
    weight_name = opt_prop_def(StringAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($output)"

    def __init__(self, value: Attribute, weight_name: str | None = None):
        self.init_inferred({}, value=value, weight_name=None if weight_name is None else StringAttr(weight_name))

    @staticmethod
    def infer(value: Attribute) -> Attribute:
        t = getattr(value, "type", None)
        if not isinstance(t, TensorType):
            raise ShapeError(f"a constant's value must be a tensor, not {value}")
        return t


@op_definition
class FullOp(TirOp):
    """A tensor of one repeated value (ONNX ConstantOfShape); never
    materialised at compile time, however large."""

    name = "tir.full"
    output = result_def(TensorType)
    fill = prop_def(Attribute)
    traits = traits_def(Pure())
    assembly_format = "$fill attr-dict `:` type($output)"

    def __init__(self, fill: FloatAttr | IntegerAttr, result_type: TensorType):
        super().__init__(result_types=[self.infer(fill, result_type)], properties={"fill": fill})

    @staticmethod
    def infer(fill: Attribute, result_type: Attribute) -> Attribute:
        if not isinstance(fill, FloatAttr | IntegerAttr) or fill.type != like_elem(result_type):
            raise ShapeError(f"fill {fill} is not a value of the result's element type")
        return result_type

    def inferred(self):
        return [self.infer(self.fill, self.output.type)]


# -- element-wise -----------------------------------------------------------------


@op_definition
class UnaryOp(OneInputOp):
    """An element-wise function of one tensor (`fn`, see `tir_functions.UNARY`)."""

    name = "tir.unary"
    fn = prop_def(UnaryFnAttr)
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, fn: UnaryFn, input: SSAValue):
        self.init_inferred({"input": input}, fn=unary_attr(fn))

    @staticmethod
    def infer(input: Attribute) -> Attribute:
        if not isinstance(input, TensorType):
            raise ShapeError(f"expected a ranked tensor, got {input}")
        return input


@op_definition
class BinaryOp(TirOp):
    """An element-wise function of two tensors with numpy broadcasting (`fn`,
    see `tir_functions.BINARY`); comparisons give bool."""

    name = "tir.binary"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    fn = prop_def(BinaryFnAttr)
    traits = traits_def(Pure())
    assembly_format = "$fn $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)"

    def __init__(self, fn: BinaryFn, lhs: SSAValue, rhs: SSAValue):
        self.init_inferred({"lhs": lhs, "rhs": rhs}, fn=binary_attr(fn))

    @staticmethod
    def infer(fn: BinaryFn, lhs: Attribute, rhs: Attribute) -> TensorType:
        shape = shapes.broadcast(shape_of(lhs), shape_of(rhs))
        assert isinstance(lhs, TensorType) and isinstance(rhs, TensorType)
        if lhs.element_type != rhs.element_type and fn != BinaryFn.POW:  # ONNX's Pow alone takes two types
            raise ShapeError(
                f"tir.binary {fn} of {lhs.element_type} and {rhs.element_type}: "
                "the operands' element types must be equal (only pow's exponent may differ)"
            )
        return tensor_type(i1 if BINARY[fn].comparison else lhs.element_type, shape)


@op_definition
class WhereOp(TirOp):
    """`condition ? x : y`, element-wise with broadcasting."""

    name = "tir.where"
    condition = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$condition `,` $x `,` $y attr-dict `:` type($condition) `,` type($x) `,` type($y) `->` type($output)"
    )

    def __init__(self, condition: SSAValue, x: SSAValue, y: SSAValue):
        self.init_inferred({"condition": condition, "x": x, "y": y})

    @staticmethod
    def infer(condition: Attribute, x: Attribute, y: Attribute) -> TensorType:
        shape = shapes.broadcast(shape_of(condition), shape_of(x), shape_of(y))
        if like_elem(x) != like_elem(y):
            raise ShapeError(f"tir.where of {like_elem(x)} and {like_elem(y)}: the two branches' element types differ")
        return like(x, shape)


@op_definition
class CastOp(OneInputOp):
    """Convert element type (to bool: x != 0)."""

    name = "tir.cast"

    def __init__(self, input: SSAValue, element_type: Attribute):
        super().__init__(operands=[input], result_types=[self.infer(input.type, element_type)])

    @staticmethod
    def infer(input: Attribute, element_type: Attribute) -> TensorType:
        return tensor_type(element_type, shape_of(input))

    def inferred(self):
        return [self.infer(self.input.type, like_elem(self.output.type))]


@op_definition
class ClipOp(OneInputOp):
    """Clamp to [min, max]."""

    name = "tir.clip"
    min = prop_def(FloatAttr)
    max = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min: float, max: float):
        self.init_inferred({"input": input}, min=FloatAttr(min, f32), max=FloatAttr(max, f32))

    @staticmethod
    def infer(input: Attribute) -> Attribute:
        return UnaryOp.infer(input)


TIR = Dialect(
    "tir",
    [
        SplitOp,
        StridedSliceOp,
        ConstantOp,
        FullOp,
        UnaryOp,
        BinaryOp,
        WhereOp,
        CastOp,
        ClipOp,
        MatmulOp,
        Conv2dOp,
        ConvTranspose2dOp,
        Pool2dOp,
        BatchnormOp,
        SoftmaxOp,
        LayernormOp,
        ReshapeOp,
        TransposeOp,
        ConcatOp,
        ReduceOp,
        ArgmaxOp,
        TileOp,
        CumsumOp,
        PadOp,
        GatherOp,
        BroadcastOp,
    ],
    ATTRIBUTES,
)
