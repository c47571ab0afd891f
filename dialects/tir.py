"""The `tir` dialect: framework-neutral tensor IR between `onnx` and `forge`.

Ops here may be richer than Forge's (multi-result, multi-axis); passes
decompose them until each maps onto one Forge function.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from xdsl.dialects.builtin import I64, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType, i64
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    ParsePropInAttrDict,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from forge_opt.dialects.irdl_fast import FastOp, op_definition
from forge_opt.dtypes import tensor_type


@lru_cache(maxsize=None)
def _fn_attr(fn: str) -> StringAttr:
    """The `fn` property; there are a few dozen functions, so each is made once."""
    return StringAttr(fn)


def _shape(value: SSAValue | Attribute) -> tuple[int, ...]:
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {t}")
    return t.get_shape()


def split_sections(dim: int, *, parts: int | None = None, size: int | None = None) -> list[int]:
    """Sections of a split by count (must divide) or by size per part (the
    last part smaller when it does not divide)."""
    if parts is not None:
        if parts <= 0:
            raise ValueError(f"a split into {parts} parts is not possible")
        if dim % parts:
            raise ValueError(f"dimension {dim} does not divide into {parts} equal parts")
        return [dim // parts] * parts
    assert size is not None
    if size <= 0:
        raise ValueError(f"a split into parts of size {size} is not possible")
    full, rest = divmod(dim, size)
    return [size] * full + ([rest] if rest else [])


@op_definition
class SplitOp(FastOp):
    """Split a tensor along one axis into consecutive pieces, one per result.

    `sections` lists the size of each piece; they sum to the axis' size and
    may be zero. Builders accept the three rules frameworks use (equal parts,
    size per part, explicit sections) and normalise them to sections.
    """

    name = "tir.split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sections = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axis` $axis `sections` $sections attr-dict `:` type($input) `->` type($outputs)"
    )

    def __init__(self, input: SSAValue, axis: int, sections: Sequence[int]):
        shape = list(_shape(input))
        rank = len(shape)
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        elem = input.type.element_type
        types = []
        for s in sections:
            shape[axis] = s
            types.append(tensor_type(elem, shape))
        super().__init__(
            operands=[input],
            result_types=[types],
            properties={
                "axis": IntegerAttr(axis, i64),
                "sections": DenseArrayBase.from_list(i64, list(sections)),
            },
        )

    def verify_(self) -> None:
        shape = _shape(self.input)
        rank = len(shape)
        axis = self.axis.value.data
        if not 0 <= axis < rank:
            raise VerifyException(f"axis {axis} is out of range for an input of rank {rank} (normalise to 0..{rank - 1})")
        sections = self.sections.get_values()
        if len(sections) != len(self.outputs):
            raise VerifyException(f"{len(sections)} sections but {len(self.outputs)} results")
        if any(s < 0 for s in sections):
            raise VerifyException(f"sections {list(sections)} contain a negative size")
        if shape[axis] >= 0 and sum(sections) != shape[axis]:
            raise VerifyException(
                f"sections {list(sections)} sum to {sum(sections)}, but dimension {axis} has size {shape[axis]}"
            )
        for i, (s, out) in enumerate(zip(sections, self.outputs)):
            expected = list(shape)
            expected[axis] = s
            if list(_shape(out)) != expected:
                raise VerifyException(f"result {i} has shape {list(_shape(out))}, expected {expected}")


@op_definition
class StridedSliceOp(FastOp):
    """Take `begin:end:stride` along each listed axis; other axes are kept."""

    name = "tir.strided_slice"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(i64))
    begin = prop_def(DenseArrayBase.constr(i64))
    end = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axes` $axes `begin` $begin `end` $end `strides` $strides attr-dict "
        "`:` type($input) `->` type($output)"
    )

    def __init__(
        self,
        input: SSAValue,
        axes: Sequence[int],
        begin: Sequence[int],
        end: Sequence[int],
        strides: Sequence[int],
    ):
        shape = list(_shape(input))
        for a, b, e, s in zip(axes, begin, end, strides):
            shape[a] = len(range(b, e, s))
        super().__init__(
            operands=[input],
            result_types=[tensor_type(input.type.element_type, shape)],
            properties={
                "axes": DenseArrayBase.from_list(i64, list(axes)),
                "begin": DenseArrayBase.from_list(i64, list(begin)),
                "end": DenseArrayBase.from_list(i64, list(end)),
                "strides": DenseArrayBase.from_list(i64, list(strides)),
            },
        )

    def slices(self) -> list[tuple[int, int, int, int]]:
        """(axis, begin, end, stride) per sliced axis."""
        return list(
            zip(
                self.axes.get_values(),
                self.begin.get_values(),
                self.end.get_values(),
                self.strides.get_values(),
            )
        )

    def verify_(self) -> None:
        shape = _shape(self.input)
        rank = len(shape)
        lists = [self.axes, self.begin, self.end, self.strides]
        if len({len(x.get_values()) for x in lists}) != 1:
            raise VerifyException("axes, begin, end and strides must have the same length")
        expected = list(shape)
        seen = set()
        for a, b, e, s in self.slices():
            if not 0 <= a < rank:
                raise VerifyException(f"axis {a} is out of range for an input of rank {rank}")
            if a in seen:
                raise VerifyException(f"axis {a} is sliced twice")
            seen.add(a)
            if s <= 0:
                raise VerifyException(f"stride {s} on axis {a} must be positive")
            if not 0 <= b <= e <= shape[a]:
                raise VerifyException(
                    f"slice {b}:{e} on axis {a} is outside 0..{shape[a]} or reversed"
                )
            expected[a] = len(range(b, e, s))
        if list(_shape(self.output)) != expected:
            raise VerifyException(f"result has shape {list(_shape(self.output))}, expected {expected}")



# -- values ---------------------------------------------------------------------


@op_definition
class ConstantOp(FastOp):
    """A tensor known at compile time. `name` is set for a model weight (an
    ONNX initializer), which Forge loads by that name."""

    name = "tir.constant"
    output = result_def(TensorType)
    value = prop_def(Attribute)
    weight_name = opt_prop_def(StringAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($output)"

    def __init__(self, value: Attribute, weight_name: str | None = None):
        super().__init__(
            result_types=[value.type],
            properties={
                "value": value,
                "weight_name": None if weight_name is None else StringAttr(weight_name),
            },
        )


@op_definition
class FullOp(FastOp):
    """A tensor of one repeated value (ONNX ConstantOfShape); never
    materialised at compile time, however large."""

    name = "tir.full"
    output = result_def(TensorType)
    fill = prop_def(Attribute)
    traits = traits_def(Pure())
    assembly_format = "$fill attr-dict `:` type($output)"

    def __init__(self, fill: Attribute, result_type: TensorType):
        super().__init__(result_types=[result_type], properties={"fill": fill})


# -- element-wise -----------------------------------------------------------------

UNARY_FUNCTIONS = (
    "abs", "atan", "ceil", "cos", "erf", "exp", "floor", "gelu", "gelu_tanh", "identity", "log",
    "neg", "not", "reciprocal", "relu", "sigmoid", "sign", "sin", "sqrt", "tanh",
)
BINARY_FUNCTIONS = (
    "add", "sub", "mul", "div", "max", "min", "pow", "eq", "ne", "gt", "ge", "lt", "le",
    "and", "or", "mod",
)


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """numpy-style broadcasting: align from the right, a 1 stretches."""
    rank = max(len(a), len(b))
    a = [1] * (rank - len(a)) + list(a)
    b = [1] * (rank - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return out


@op_definition
class UnaryOp(FastOp):
    """An element-wise function of one tensor (`fn` names it)."""

    name = "tir.unary"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    fn = prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, fn: str, input: SSAValue, result_type: Attribute | None = None):
        super().__init__(
            operands=[input], result_types=[result_type or input.type], properties={"fn": _fn_attr(fn)}
        )

    def verify_(self) -> None:
        if self.fn.data not in UNARY_FUNCTIONS:
            raise VerifyException(f"unknown unary function '{self.fn.data}'")
        if _shape(self.input) != _shape(self.output):
            raise VerifyException("result shape must equal the input shape")


@op_definition
class BinaryOp(FastOp):
    """An element-wise function of two tensors with numpy broadcasting."""

    name = "tir.binary"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    fn = prop_def(StringAttr)
    traits = traits_def(Pure())
    assembly_format = "$fn $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)"

    def __init__(self, fn: str, lhs: SSAValue, rhs: SSAValue, element_type: Attribute | None = None):
        shape = broadcast_shapes(_shape(lhs), _shape(rhs))
        elem = element_type or lhs.type.element_type
        super().__init__(
            operands=[lhs, rhs], result_types=[tensor_type(elem, shape)], properties={"fn": _fn_attr(fn)}
        )

    def verify_(self) -> None:
        if self.fn.data not in BINARY_FUNCTIONS:
            raise VerifyException(f"unknown binary function '{self.fn.data}'")
        try:
            shape = broadcast_shapes(_shape(self.lhs), _shape(self.rhs))
        except ValueError as e:
            raise VerifyException(str(e)) from None
        if list(_shape(self.output)) != shape:
            raise VerifyException(f"result has shape {list(_shape(self.output))}, expected {shape}")


@op_definition
class WhereOp(FastOp):
    """`condition ? x : y`, element-wise with broadcasting."""

    name = "tir.where"
    condition = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$condition `,` $x `,` $y attr-dict `:` type($condition) `,` type($x) `,` type($y) `->` type($output)"


@op_definition
class CastOp(FastOp):
    """Convert element type."""

    name = "tir.cast"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class ClipOp(FastOp):
    """Clamp to [min, max]."""

    name = "tir.clip"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    min = prop_def(FloatAttr)
    max = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


# -- linear algebra and neural-network ops ------------------------------------------


@op_definition
class MatmulOp(FastOp):
    """numpy `matmul`: batched, broadcasting over leading dimensions."""

    name = "tir.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($output)"


@op_definition
class Conv2dOp(FastOp):
    """2-D convolution, NCHW activations, OIHW weights; `pads` is
    [top, left, bottom, right]."""

    name = "tir.conv2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)
    strides = prop_def(DenseArrayBase.constr(i64))
    pads = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    groups = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)"


@op_definition
class Pool2dOp(FastOp):
    """2-D max or average pooling over NCHW; `pads` is [top, left, bottom, right]."""

    name = "tir.pool2d"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    kind = prop_def(StringAttr)
    kernel = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    pads = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    ceil_mode = prop_def(IntegerAttr[I64])
    count_include_pad = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($output)"


@op_definition
class BatchnormOp(FastOp):
    """Inference batch normalisation over dimension 1."""

    name = "tir.batchnorm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    mean = operand_def(TensorType)
    var = operand_def(TensorType)
    output = result_def(TensorType)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"


@op_definition
class SoftmaxOp(FastOp):
    """Softmax (or log-softmax with `log`) along one axis."""

    name = "tir.softmax"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    log = prop_def(IntegerAttr[I64], IntegerAttr(0, i64))
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class LayernormOp(FastOp):
    """Layer normalisation over the last axis with scale and bias."""

    name = "tir.layernorm"
    input = operand_def(TensorType)
    scale = operand_def(TensorType)
    bias = operand_def(TensorType)
    output = result_def(TensorType)
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"


# -- data movement ------------------------------------------------------------------


@op_definition
class ReshapeOp(FastOp):
    """Same elements, the result type's shape."""

    name = "tir.reshape"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[tensor_type(input.type.element_type, shape)])

    def verify_(self) -> None:
        import math

        a, b = _shape(self.input), _shape(self.output)
        if all(d >= 0 for d in a + b) and math.prod(a) != math.prod(b):
            raise VerifyException(f"cannot reshape {list(a)} into {list(b)}")


@op_definition
class TransposeOp(FastOp):
    """Permute dimensions: result dim i is input dim perm[i]."""

    name = "tir.transpose"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = "$input `perm` $perm attr-dict `:` type($input) `->` type($output)"

    def __init__(self, input: SSAValue, perm: Sequence[int]):
        shape = _shape(input)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(input.type.element_type, [shape[p] for p in perm])],
            properties={"perm": DenseArrayBase.from_list(i64, list(perm))},
        )


@op_definition
class ConcatOp(FastOp):
    """Join tensors along one axis."""

    name = "tir.concat"
    inputs = var_operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($output)"


@op_definition
class ReduceOp(FastOp):
    """Reduce (`fn`: sum, mean, max) over `axes`, keeping them as size 1 or not."""

    name = "tir.reduce"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    fn = prop_def(StringAttr)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdims = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"


@op_definition
class ArgmaxOp(FastOp):
    """Index of the first maximum along `axis`, as i64."""

    name = "tir.argmax"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    keepdims = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class TileOp(FastOp):
    """Repeat the whole tensor `repeats[i]` times along each dimension."""

    name = "tir.tile"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    repeats = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class CumsumOp(FastOp):
    """Inclusive running sum along `axis`."""

    name = "tir.cumsum"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class PadOp(FastOp):
    """Pad with a constant; `pads` is [d0_lo, d0_hi, d1_lo, d1_hi, ...]."""

    name = "tir.pad"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    pads = prop_def(DenseArrayBase.constr(i64))
    value = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


@op_definition
class GatherOp(FastOp):
    """numpy `take(input, indices, axis)`."""

    name = "tir.gather"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($output)"


@op_definition
class BroadcastOp(FastOp):
    """Expand size-1 (or missing leading) dimensions to the result shape."""

    name = "tir.broadcast"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


TIR = Dialect(
    "tir",
    [
        SplitOp, StridedSliceOp, ConstantOp, FullOp, UnaryOp, BinaryOp, WhereOp, CastOp, ClipOp,
        MatmulOp, Conv2dOp, Pool2dOp, BatchnormOp, SoftmaxOp, LayernormOp, ReshapeOp,
        TransposeOp, ConcatOp, ReduceOp, ArgmaxOp, TileOp, CumsumOp, PadOp, GatherOp, BroadcastOp,
    ],
    [],
)
