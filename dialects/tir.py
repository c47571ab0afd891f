"""The `tir` dialect: framework-neutral tensor IR between `onnx` and `forge`.

Ops here may be richer than Forge's (multi-result, multi-axis); passes
decompose them until each maps onto one Forge function.

Every op has a builder taking plain Python values, which computes its
result types with the op's `infer`; its verifier calls the same `infer` on
the op's operands and properties and requires the result types it gives
(shape rules in `tir_shapes`). Function kinds (`fn`, `kind`) are enum
attributes from `tir_functions`, whose tables say what each computes.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f32,
    i1,
    i64,
)
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

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.irdl_fast import FastOp, op_definition
from forge_opt.dialects.tir_functions import (
    ATTRIBUTES,
    BINARY,
    BinaryFn,
    BinaryFnAttr,
    PoolKind,
    PoolKindAttr,
    ReduceFn,
    ReduceFnAttr,
    UnaryFn,
    UnaryFnAttr,
)
from forge_opt.dialects.tir_shapes import ShapeError
from forge_opt.dtypes import tensor_type


def _shape(t: Attribute) -> tuple[int, ...]:
    if not isinstance(t, TensorType):
        raise ShapeError(f"expected a ranked tensor, got {t}")
    return t.get_shape()


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


def _like(t: Attribute, shape: Sequence[int]) -> TensorType:
    """A tensor of `t`'s element type and `shape`."""
    assert isinstance(t, TensorType)
    return tensor_type(t.element_type, shape)


class TirOp(FastOp):
    """A `tir` op: its results have the types `inferred()` gives."""

    def inferred(self) -> Sequence[Attribute]:
        raise NotImplementedError

    def verify_(self) -> None:
        try:
            expected = self.inferred()
        except ShapeError as error:
            raise VerifyException(str(error)) from None
        if len(expected) != len(self.results):
            raise VerifyException(f"{len(self.results)} results, expected {len(expected)}")
        for i, (want, result) in enumerate(zip(expected, self.results)):
            got = result.type
            if got is want or got == want:
                continue
            if not (
                isinstance(got, TensorType)
                and isinstance(want, TensorType)
                and got.element_type == want.element_type
                and shapes.matches(want.get_shape(), got.get_shape())
            ):
                raise VerifyException(f"result {i} has type {got}, expected {want}")


class OneInputOp(TirOp):
    """An op of one tensor giving one tensor."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


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
        super().__init__(
            result_types=[self.infer(value)],
            properties={"value": value, "weight_name": None if weight_name is None else StringAttr(weight_name)},
        )

    @staticmethod
    def infer(value: Attribute) -> Attribute:
        t = getattr(value, "type", None)
        if not isinstance(t, TensorType):
            raise ShapeError(f"a constant's value must be a tensor, not {value}")
        return t

    def inferred(self):
        return [self.infer(self.value)]


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
        if not isinstance(fill, FloatAttr | IntegerAttr) or fill.type != _like_elem(result_type):
            raise ShapeError(f"fill {fill} is not a value of the result's element type")
        return result_type

    def inferred(self):
        return [self.infer(self.fill, self.output.type)]


def _like_elem(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, TensorType) else t


# -- element-wise -----------------------------------------------------------------


@op_definition
class UnaryOp(OneInputOp):
    """An element-wise function of one tensor (`fn`, see `tir_functions.UNARY`)."""

    name = "tir.unary"
    fn = prop_def(UnaryFnAttr)
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, fn: UnaryFn | str, input: SSAValue):
        super().__init__(operands=[input], result_types=[self.infer(input.type)], properties={"fn": _unary(fn)})

    @staticmethod
    def infer(input: Attribute) -> Attribute:
        if not isinstance(input, TensorType):
            raise ShapeError(f"expected a ranked tensor, got {input}")
        return input

    def inferred(self):
        return [self.infer(self.input.type)]


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

    def __init__(self, fn: BinaryFn | str, lhs: SSAValue, rhs: SSAValue):
        attr = _binary(fn)
        super().__init__(
            operands=[lhs, rhs], result_types=[self.infer(attr.data, lhs.type, rhs.type)], properties={"fn": attr}
        )

    @staticmethod
    def infer(fn: BinaryFn, lhs: Attribute, rhs: Attribute) -> TensorType:
        shape = shapes.broadcast(_shape(lhs), _shape(rhs))
        assert isinstance(lhs, TensorType)
        return tensor_type(i1 if BINARY[fn].comparison else lhs.element_type, shape)

    def inferred(self):
        return [self.infer(self.fn.data, self.lhs.type, self.rhs.type)]


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
        super().__init__(operands=[condition, x, y], result_types=[self.infer(condition.type, x.type, y.type)])

    @staticmethod
    def infer(condition: Attribute, x: Attribute, y: Attribute) -> TensorType:
        return _like(x, shapes.broadcast(_shape(condition), _shape(x), _shape(y)))

    def inferred(self):
        return [self.infer(self.condition.type, self.x.type, self.y.type)]


@op_definition
class CastOp(OneInputOp):
    """Convert element type (to bool: x != 0)."""

    name = "tir.cast"

    def __init__(self, input: SSAValue, element_type: Attribute):
        super().__init__(operands=[input], result_types=[self.infer(input.type, element_type)])

    @staticmethod
    def infer(input: Attribute, element_type: Attribute) -> TensorType:
        return tensor_type(element_type, _shape(input))

    def inferred(self):
        return [self.infer(self.input.type, _like_elem(self.output.type))]


@op_definition
class ClipOp(OneInputOp):
    """Clamp to [min, max]."""

    name = "tir.clip"
    min = prop_def(FloatAttr)
    max = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, min: float, max: float):
        super().__init__(
            operands=[input],
            result_types=[UnaryOp.infer(input.type)],
            properties={"min": FloatAttr(min, f32), "max": FloatAttr(max, f32)},
        )

    def inferred(self):
        return [UnaryOp.infer(self.input.type)]


# -- linear algebra and neural-network ops ------------------------------------------


@op_definition
class MatmulOp(TirOp):
    """numpy `matmul` of operands of rank 2 or more, broadcasting over
    leading dimensions, plus an optional `bias` that broadcasts to the
    product without widening it (Forge's `Matmul(bias=)`)."""

    name = "tir.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$lhs `,` $rhs (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs) (`,` type($bias)^)? "
        "`->` type($output)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue, bias: SSAValue | None = None):
        super().__init__(
            operands=[lhs, rhs, [] if bias is None else [bias]],
            result_types=[self.infer(lhs.type, rhs.type, None if bias is None else bias.type)],
        )

    @staticmethod
    def infer(lhs: Attribute, rhs: Attribute, bias: Attribute | None = None) -> TensorType:
        out = shapes.matmul(_shape(lhs), _shape(rhs))
        if bias is not None and (len(_shape(bias)) > len(out) or shapes.broadcast(out, _shape(bias)) != list(out)):
            raise ShapeError(f"a bias of shape {list(_shape(bias))} does not broadcast to the product's {list(out)}")
        return _like(lhs, out)

    def inferred(self):
        return [self.infer(self.lhs.type, self.rhs.type, None if self.bias is None else self.bias.type)]


@op_definition
class Conv2dOp(TirOp):
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

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue,
        bias: SSAValue | None,
        strides: Sequence[int],
        pads: Sequence[int],
        dilations: Sequence[int],
        groups: int,
    ):
        result = self.infer(
            input.type, weight.type, None if bias is None else bias.type, strides, pads, dilations, groups
        )
        super().__init__(
            operands=[input, weight, [] if bias is None else [bias]],
            result_types=[result],
            properties={
                "strides": _ints(strides),
                "pads": _ints(pads),
                "dilations": _ints(dilations),
                "groups": _int(groups),
            },
        )

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, groups: int) -> TensorType:
        bias_shape = None if bias is None else _shape(bias)
        return _like(input, shapes.conv2d(_shape(input), _shape(weight), bias_shape, strides, pads, dilations, groups))

    def inferred(self):
        return [
            self.infer(
                self.input.type,
                self.weight.type,
                None if self.bias is None else self.bias.type,
                self.strides.get_values(),
                self.pads.get_values(),
                self.dilations.get_values(),
                self.groups.value.data,
            )
        ]


@op_definition
class ConvTranspose2dOp(TirOp):
    """2-D transposed convolution (torch's conv_transpose2d): NCHW
    activations, (Cin, Cout/groups, kH, kW) weights; `pads` [pH, pW] are
    cut from both ends of each dim of the full result."""

    name = "tir.conv_transpose2d"
    input = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    output = result_def(TensorType)
    strides = prop_def(DenseArrayBase.constr(i64))
    pads = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    output_padding = prop_def(DenseArrayBase.constr(i64))
    groups = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)"

    def __init__(
        self,
        input: SSAValue,
        weight: SSAValue,
        bias: SSAValue | None,
        strides: Sequence[int],
        pads: Sequence[int],
        dilations: Sequence[int],
        output_padding: Sequence[int],
        groups: int,
    ):
        bias_type = None if bias is None else bias.type
        result = self.infer(input.type, weight.type, bias_type, strides, pads, dilations, output_padding, groups)
        super().__init__(
            operands=[input, weight, [] if bias is None else [bias]],
            result_types=[result],
            properties={
                "strides": _ints(strides),
                "pads": _ints(pads),
                "dilations": _ints(dilations),
                "output_padding": _ints(output_padding),
                "groups": _int(groups),
            },
        )

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, output_padding, groups: int) -> TensorType:
        bias_shape = None if bias is None else _shape(bias)
        shape = shapes.conv_transpose2d(
            _shape(input), _shape(weight), bias_shape, strides, pads, dilations, output_padding, groups
        )
        return _like(input, shape)

    def inferred(self):
        return [
            self.infer(
                self.input.type,
                self.weight.type,
                None if self.bias is None else self.bias.type,
                self.strides.get_values(),
                self.pads.get_values(),
                self.dilations.get_values(),
                self.output_padding.get_values(),
                self.groups.value.data,
            )
        ]


@op_definition
class Pool2dOp(OneInputOp):
    """2-D max or average pooling over NCHW; `pads` is [top, left, bottom, right]."""

    name = "tir.pool2d"
    kind = prop_def(PoolKindAttr)
    kernel = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    pads = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))
    ceil_mode = prop_def(IntegerAttr[I64])
    count_include_pad = prop_def(IntegerAttr[I64])
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($output)"

    def __init__(
        self,
        kind: PoolKind | str,
        input: SSAValue,
        kernel: Sequence[int],
        strides: Sequence[int],
        pads: Sequence[int],
        dilations: Sequence[int],
        ceil_mode: bool,
        count_include_pad: bool,
    ):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, kernel, strides, pads, dilations, ceil_mode)],
            properties={
                "kind": PoolKindAttr(PoolKind(kind)),
                "kernel": _ints(kernel),
                "strides": _ints(strides),
                "pads": _ints(pads),
                "dilations": _ints(dilations),
                "ceil_mode": _int(ceil_mode),
                "count_include_pad": _int(count_include_pad),
            },
        )

    @staticmethod
    def infer(input, kernel, strides, pads, dilations, ceil_mode: bool) -> TensorType:
        return _like(input, shapes.pool2d(_shape(input), kernel, strides, pads, dilations, bool(ceil_mode)))

    def inferred(self):
        return [
            self.infer(
                self.input.type,
                self.kernel.get_values(),
                self.strides.get_values(),
                self.pads.get_values(),
                self.dilations.get_values(),
                bool(self.ceil_mode.value.data),
            )
        ]


@op_definition
class BatchnormOp(TirOp):
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

    def __init__(self, input, scale, bias, mean, var, epsilon: float):
        params = [scale, bias, mean, var]
        super().__init__(
            operands=[input, *params],
            result_types=[self.infer(input.type, *(p.type for p in params))],
            properties={"epsilon": FloatAttr(epsilon, f32)},
        )

    @staticmethod
    def infer(input, *params) -> TensorType:
        return _like(input, shapes.per_channel(_shape(input), 1, *(_shape(p) for p in params)))

    def inferred(self):
        return [self.infer(*(v.type for v in self.operands))]


@op_definition
class SoftmaxOp(OneInputOp):
    """Softmax (or log-softmax with `log`) along one axis."""

    name = "tir.softmax"
    axis = prop_def(IntegerAttr[I64])
    log = prop_def(IntegerAttr[I64], IntegerAttr(0, i64))

    def __init__(self, input: SSAValue, axis: int, log: bool = False):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, axis)],
            properties={"axis": _int(axis), "log": _int(log)},
        )

    @staticmethod
    def infer(input: Attribute, axis: int) -> TensorType:
        return _like(input, shapes.same(_shape(input), axis))

    def inferred(self):
        return [self.infer(self.input.type, self.axis.value.data)]


@op_definition
class LayernormOp(TirOp):
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

    def __init__(self, input: SSAValue, scale: SSAValue, bias: SSAValue, epsilon: float):
        super().__init__(
            operands=[input, scale, bias],
            result_types=[self.infer(input.type, scale.type, bias.type)],
            properties={"epsilon": FloatAttr(epsilon, f32)},
        )

    @staticmethod
    def infer(input, scale, bias) -> TensorType:
        return _like(input, shapes.per_channel(_shape(input), -1, _shape(scale), _shape(bias)))

    def inferred(self):
        return [self.infer(self.input.type, self.scale.type, self.bias.type)]


# -- data movement ------------------------------------------------------------------


@op_definition
class ReshapeOp(OneInputOp):
    """Same elements, the result type's shape."""

    name = "tir.reshape"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[self.infer(input.type, shape)])

    @staticmethod
    def infer(input: Attribute, shape: Sequence[int]) -> TensorType:
        return _like(input, shapes.reshape(_shape(input), shape))

    def inferred(self):
        return [self.infer(self.input.type, _shape(self.output.type))]


@op_definition
class BroadcastOp(OneInputOp):
    """Expand size-1 (or missing leading) dimensions to the result shape."""

    name = "tir.broadcast"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[self.infer(input.type, shape)])

    @staticmethod
    def infer(input: Attribute, shape: Sequence[int]) -> TensorType:
        return _like(input, shapes.broadcast_to(_shape(input), shape))

    def inferred(self):
        return [self.infer(self.input.type, _shape(self.output.type))]


@op_definition
class TransposeOp(OneInputOp):
    """Permute dimensions: result dim i is input dim perm[i]."""

    name = "tir.transpose"
    perm = prop_def(DenseArrayBase.constr(i64))
    assembly_format = "$input `perm` $perm attr-dict `:` type($input) `->` type($output)"

    def __init__(self, input: SSAValue, perm: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[self.infer(input.type, perm)], properties={"perm": _ints(perm)}
        )

    @staticmethod
    def infer(input: Attribute, perm: Sequence[int]) -> TensorType:
        return _like(input, shapes.transpose(_shape(input), perm))

    def inferred(self):
        return [self.infer(self.input.type, self.perm.get_values())]


@op_definition
class ConcatOp(TirOp):
    """Join tensors along one axis."""

    name = "tir.concat"
    inputs = var_operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($output)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        super().__init__(
            operands=[list(inputs)],
            result_types=[self.infer([v.type for v in inputs], axis)],
            properties={"axis": _int(axis)},
        )

    @staticmethod
    def infer(inputs: Sequence[Attribute], axis: int) -> TensorType:
        return _like(inputs[0], shapes.concat([_shape(t) for t in inputs], axis))

    def inferred(self):
        return [self.infer([v.type for v in self.inputs], self.axis.value.data)]


@op_definition
class ReduceOp(OneInputOp):
    """Reduce (`fn`: sum, mean, max) over `axes`, keeping them as size 1 or not."""

    name = "tir.reduce"
    fn = prop_def(ReduceFnAttr)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdims = prop_def(IntegerAttr[I64])
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, fn: ReduceFn | str, input: SSAValue, axes: Sequence[int], keepdims: bool):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, axes, keepdims)],
            properties={"fn": ReduceFnAttr(ReduceFn(fn)), "axes": _ints(axes), "keepdims": _int(keepdims)},
        )

    @staticmethod
    def infer(input: Attribute, axes: Sequence[int], keepdims: bool) -> TensorType:
        return _like(input, shapes.reduce(_shape(input), list(axes), bool(keepdims)))

    def inferred(self):
        return [self.infer(self.input.type, self.axes.get_values(), bool(self.keepdims.value.data))]


@op_definition
class ArgmaxOp(OneInputOp):
    """Index of the first maximum along `axis`, as i64."""

    name = "tir.argmax"
    axis = prop_def(IntegerAttr[I64])
    keepdims = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, axis: int, keepdims: bool):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, axis, keepdims)],
            properties={"axis": _int(axis), "keepdims": _int(keepdims)},
        )

    @staticmethod
    def infer(input: Attribute, axis: int, keepdims: bool) -> TensorType:
        return tensor_type(i64, shapes.reduce(_shape(input), [axis], bool(keepdims)))

    def inferred(self):
        return [self.infer(self.input.type, self.axis.value.data, bool(self.keepdims.value.data))]


@op_definition
class TileOp(OneInputOp):
    """Repeat the whole tensor `repeats[i]` times along each dimension."""

    name = "tir.tile"
    repeats = prop_def(DenseArrayBase.constr(i64))

    def __init__(self, input: SSAValue, repeats: Sequence[int]):
        super().__init__(
            operands=[input], result_types=[self.infer(input.type, repeats)], properties={"repeats": _ints(repeats)}
        )

    @staticmethod
    def infer(input: Attribute, repeats: Sequence[int]) -> TensorType:
        return _like(input, shapes.tile(_shape(input), repeats))

    def inferred(self):
        return [self.infer(self.input.type, self.repeats.get_values())]


@op_definition
class CumsumOp(OneInputOp):
    """Inclusive running sum along `axis`."""

    name = "tir.cumsum"
    axis = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, axis: int):
        super().__init__(operands=[input], result_types=[self.infer(input.type, axis)], properties={"axis": _int(axis)})

    infer = staticmethod(SoftmaxOp.infer)

    def inferred(self):
        return [self.infer(self.input.type, self.axis.value.data)]


@op_definition
class PadOp(OneInputOp):
    """Pad with a constant; `pads` is [d0_lo, d0_hi, d1_lo, d1_hi, ...]."""

    name = "tir.pad"
    pads = prop_def(DenseArrayBase.constr(i64))
    value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, pads: Sequence[int], value: float):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, pads)],
            properties={"pads": _ints(pads), "value": FloatAttr(value, f32)},
        )

    @staticmethod
    def infer(input: Attribute, pads: Sequence[int]) -> TensorType:
        return _like(input, shapes.pad(_shape(input), pads))

    def inferred(self):
        return [self.infer(self.input.type, self.pads.get_values())]


@op_definition
class GatherOp(TirOp):
    """numpy `take(input, indices, axis)`; negative indices count from the end."""

    name = "tir.gather"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($output)"

    def __init__(self, input: SSAValue, indices: SSAValue, axis: int):
        super().__init__(
            operands=[input, indices],
            result_types=[self.infer(input.type, indices.type, axis)],
            properties={"axis": _int(axis)},
        )

    @staticmethod
    def infer(input: Attribute, indices: Attribute, axis: int) -> TensorType:
        if not isinstance(_like_elem(indices), IntegerType):
            raise ShapeError(f"indices must be integers, not {indices}")
        return _like(input, shapes.gather(_shape(input), _shape(indices), axis))

    def inferred(self):
        return [self.infer(self.input.type, self.indices.type, self.axis.value.data)]


@op_definition
class SplitOp(TirOp):
    """Split a tensor along one axis into consecutive pieces, one per result.

    `sections` lists the size of each piece; they sum to the axis' size and
    may be zero. `split_sections` turns the other rules frameworks use
    (equal parts, size per part) into sections.
    """

    name = "tir.split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sections = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = "$input `axis` $axis `sections` $sections attr-dict `:` type($input) `->` type($outputs)"

    def __init__(self, input: SSAValue, axis: int, sections: Sequence[int]):
        rank = len(_shape(input.type))
        if not -rank <= axis < rank:
            raise ShapeError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, axis, sections)],
            properties={"axis": _int(axis), "sections": _ints(sections)},
        )

    @staticmethod
    def infer(input: Attribute, axis: int, sections: Sequence[int]) -> list[TensorType]:
        return [_like(input, s) for s in shapes.split(_shape(input), axis, list(sections))]

    def inferred(self):
        return self.infer(self.input.type, self.axis.value.data, self.sections.get_values())


@op_definition
class StridedSliceOp(OneInputOp):
    """Take `begin:end:stride` along each listed axis; other axes are kept."""

    name = "tir.strided_slice"
    axes = prop_def(DenseArrayBase.constr(i64))
    begin = prop_def(DenseArrayBase.constr(i64))
    end = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    assembly_format = (
        "$input `axes` $axes `begin` $begin `end` $end `strides` $strides attr-dict `:` type($input) `->` type($output)"
    )

    def __init__(
        self, input: SSAValue, axes: Sequence[int], begin: Sequence[int], end: Sequence[int], strides: Sequence[int]
    ):
        super().__init__(
            operands=[input],
            result_types=[self.infer(input.type, axes, begin, end, strides)],
            properties={"axes": _ints(axes), "begin": _ints(begin), "end": _ints(end), "strides": _ints(strides)},
        )

    @staticmethod
    def infer(input: Attribute, axes, begin, end, strides) -> TensorType:
        return _like(input, shapes.strided_slice(_shape(input), axes, begin, end, strides))

    def slices(self) -> list[tuple[int, int, int, int]]:
        """(axis, begin, end, stride) per sliced axis."""
        return list(
            zip(self.axes.get_values(), self.begin.get_values(), self.end.get_values(), self.strides.get_values())
        )

    def inferred(self):
        return [
            self.infer(
                self.input.type,
                self.axes.get_values(),
                self.begin.get_values(),
                self.end.get_values(),
                self.strides.get_values(),
            )
        ]


def _unary(fn: UnaryFn | str) -> UnaryFnAttr:
    try:
        return _UNARY_ATTRS[fn]
    except KeyError:
        raise ShapeError(f"unknown unary function '{fn}'") from None


def _binary(fn: BinaryFn | str) -> BinaryFnAttr:
    try:
        return _BINARY_ATTRS[fn]
    except KeyError:
        raise ShapeError(f"unknown binary function '{fn}'") from None


# one attribute per function, made once (StrEnum members hash as their strings)
_UNARY_ATTRS: dict[str, UnaryFnAttr] = {fn: UnaryFnAttr(fn) for fn in UnaryFn}
_BINARY_ATTRS: dict[str, BinaryFnAttr] = {fn: BinaryFnAttr(fn) for fn in BinaryFn}


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
