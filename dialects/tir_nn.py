"""`tir` ops of linear algebra and neural networks: matmul, convolutions,
pooling, batch and layer normalisation, softmax."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    ParsePropInAttrDict,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.irdl_fast import op_definition
from forge_opt.dialects.tir_base import OneInputOp, TirOp, int_attr, ints_attr, like, shape_of
from forge_opt.dialects.tir_functions import (
    PoolKind,
    PoolKindAttr,
)
from forge_opt.dialects.tir_shapes import ShapeError

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
        out = shapes.matmul(shape_of(lhs), shape_of(rhs))
        if bias is not None and (len(shape_of(bias)) > len(out) or shapes.broadcast(out, shape_of(bias)) != list(out)):
            raise ShapeError(f"a bias of shape {list(shape_of(bias))} does not broadcast to the product's {list(out)}")
        return like(lhs, out)

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
                "strides": ints_attr(strides),
                "pads": ints_attr(pads),
                "dilations": ints_attr(dilations),
                "groups": int_attr(groups),
            },
        )

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, groups: int) -> TensorType:
        bias_shape = None if bias is None else shape_of(bias)
        out = shapes.conv2d(shape_of(input), shape_of(weight), bias_shape, strides, pads, dilations, groups)
        return like(input, out)

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
                "strides": ints_attr(strides),
                "pads": ints_attr(pads),
                "dilations": ints_attr(dilations),
                "output_padding": ints_attr(output_padding),
                "groups": int_attr(groups),
            },
        )

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, output_padding, groups: int) -> TensorType:
        bias_shape = None if bias is None else shape_of(bias)
        shape = shapes.conv_transpose2d(
            shape_of(input), shape_of(weight), bias_shape, strides, pads, dilations, output_padding, groups
        )
        return like(input, shape)

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
                "kernel": ints_attr(kernel),
                "strides": ints_attr(strides),
                "pads": ints_attr(pads),
                "dilations": ints_attr(dilations),
                "ceil_mode": int_attr(ceil_mode),
                "count_include_pad": int_attr(count_include_pad),
            },
        )

    @staticmethod
    def infer(input, kernel, strides, pads, dilations, ceil_mode: bool) -> TensorType:
        return like(input, shapes.pool2d(shape_of(input), kernel, strides, pads, dilations, bool(ceil_mode)))

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
        return like(input, shapes.per_channel(shape_of(input), 1, *(shape_of(p) for p in params)))

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
            properties={"axis": int_attr(axis), "log": int_attr(log)},
        )

    @staticmethod
    def infer(input: Attribute, axis: int) -> TensorType:
        return like(input, shapes.same(shape_of(input), axis))

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
        return like(input, shapes.per_channel(shape_of(input), -1, shape_of(scale), shape_of(bias)))

    def inferred(self):
        return [self.infer(self.input.type, self.scale.type, self.bias.type)]
