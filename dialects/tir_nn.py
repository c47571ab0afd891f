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
from forge_opt.dialects.tir_base import OneInputOp, TirOp, int_attr, ints_attr, like, shape_of, tied
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
    lhs = operand_def(tied())
    rhs = operand_def(tied())
    bias = opt_operand_def(tied())
    output = result_def(tied())
    traits = traits_def(Pure())
    assembly_format = (
        "$lhs `,` $rhs (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs) (`,` type($bias)^)? "
        "`->` type($output)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue, bias: SSAValue | None = None):
        self.init_inferred({"lhs": lhs, "rhs": rhs, "bias": bias})

    @staticmethod
    def infer(lhs: Attribute, rhs: Attribute, bias: Attribute | None = None) -> TensorType:
        out = shapes.matmul(shape_of(lhs), shape_of(rhs))
        if bias is not None and (len(shape_of(bias)) > len(out) or shapes.broadcast(out, shape_of(bias)) != list(out)):
            raise ShapeError(f"a bias of shape {list(shape_of(bias))} does not broadcast to the product's {list(out)}")
        return like(lhs, out)


class WindowBase(TirOp):
    """A window slid over NCHW: its strides, pads and dilations (checked
    together by `tir_shapes`), shared by the convolutions and pooling."""

    strides = prop_def(DenseArrayBase.constr(i64))
    pads = prop_def(DenseArrayBase.constr(i64))
    dilations = prop_def(DenseArrayBase.constr(i64))


class WindowOp(WindowBase):
    """The convolutions: an NCHW input, a weight, an optional bias, and a
    window's strides, pads, dilations and groups."""

    input = operand_def(tied())
    weight = operand_def(tied())
    bias = opt_operand_def(tied())
    output = result_def(tied())
    groups = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)"

    def init_window(self, input, weight, bias, strides, pads, dilations, groups, **more: Attribute) -> None:
        self.init_inferred(
            {"input": input, "weight": weight, "bias": bias},
            strides=ints_attr(strides), pads=ints_attr(pads), dilations=ints_attr(dilations), **more,
            groups=int_attr(groups),
        )


@op_definition
class Conv2dOp(WindowOp):
    """2-D convolution, NCHW activations, OIHW weights; `pads` is
    [top, left, bottom, right]."""

    name = "tir.conv2d"

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
        self.init_window(input, weight, bias, strides, pads, dilations, groups)

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, groups: int) -> TensorType:
        bias_shape = None if bias is None else shape_of(bias)
        out = shapes.conv2d(shape_of(input), shape_of(weight), bias_shape, strides, pads, dilations, groups)
        return like(input, out)


@op_definition
class ConvTranspose2dOp(WindowOp):
    """2-D transposed convolution (torch's conv_transpose2d): NCHW
    activations, (Cin, Cout/groups, kH, kW) weights; `pads` [pH, pW] are
    cut from both ends of each dim of the full result."""

    name = "tir.conv_transpose2d"
    output_padding = prop_def(DenseArrayBase.constr(i64))

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
        self.init_window(
            input, weight, bias, strides, pads, dilations, groups, output_padding=ints_attr(output_padding)
        )

    @staticmethod
    def infer(input, weight, bias, strides, pads, dilations, output_padding, groups: int) -> TensorType:
        bias_shape = None if bias is None else shape_of(bias)
        shape = shapes.conv_transpose2d(
            shape_of(input), shape_of(weight), bias_shape, strides, pads, dilations, output_padding, groups
        )
        return like(input, shape)


@op_definition
class Pool2dOp(OneInputOp, WindowBase):
    """2-D max or average pooling over NCHW; `pads` is [top, left, bottom, right]."""

    name = "tir.pool2d"
    kind = prop_def(PoolKindAttr)
    kernel = prop_def(DenseArrayBase.constr(i64))
    ceil_mode = prop_def(IntegerAttr[I64])
    count_include_pad = prop_def(IntegerAttr[I64])
    assembly_format = "$kind $input attr-dict `:` type($input) `->` type($output)"

    def __init__(
        self,
        kind: PoolKind,
        input: SSAValue,
        kernel: Sequence[int],
        strides: Sequence[int],
        pads: Sequence[int],
        dilations: Sequence[int],
        ceil_mode: bool,
        count_include_pad: bool,
    ):
        if not isinstance(kind, PoolKind):  # a string would build an attribute that prints and compares wrongly
            raise TypeError(f"tir.pool2d takes a PoolKind, not {kind!r}")
        self.init_inferred(
            {"input": input},
            kind=PoolKindAttr(kind),
            kernel=ints_attr(kernel),
            strides=ints_attr(strides),
            pads=ints_attr(pads),
            dilations=ints_attr(dilations),
            ceil_mode=int_attr(ceil_mode),
            count_include_pad=int_attr(count_include_pad),
        )

    @staticmethod
    def infer(input, kernel, strides, pads, dilations, ceil_mode: bool) -> TensorType:
        return like(input, shapes.pool2d(shape_of(input), kernel, strides, pads, dilations, bool(ceil_mode)))


@op_definition
class BatchnormOp(TirOp):
    """Inference batch normalisation over dimension 1."""

    name = "tir.batchnorm"
    input = operand_def(tied())
    scale = operand_def(tied())
    bias = operand_def(tied())
    mean = operand_def(tied())
    var = operand_def(tied())
    output = result_def(tied())
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    def __init__(self, input, scale, bias, mean, var, epsilon: float):
        operands = {"input": input, "scale": scale, "bias": bias, "mean": mean, "var": var}
        self.init_inferred(operands, epsilon=FloatAttr(epsilon, f32))

    @staticmethod
    def infer(input, scale, bias, mean, var) -> TensorType:
        return like(input, shapes.per_channel(shape_of(input), 1, *(shape_of(p) for p in (scale, bias, mean, var))))


@op_definition
class SoftmaxOp(OneInputOp):
    """Softmax (or log-softmax with `log`) along one axis."""

    name = "tir.softmax"
    axis = prop_def(IntegerAttr[I64])
    log = prop_def(IntegerAttr[I64], IntegerAttr(0, i64))

    def __init__(self, input: SSAValue, axis: int, log: bool = False):
        self.init_inferred({"input": input}, axis=int_attr(axis), log=int_attr(log))

    @staticmethod
    def infer(input: Attribute, axis: int) -> TensorType:
        return like(input, shapes.same(shape_of(input), axis))


@op_definition
class LayernormOp(TirOp):
    """Layer normalisation over the last axis with scale and bias."""

    name = "tir.layernorm"
    input = operand_def(tied())
    scale = operand_def(tied())
    bias = operand_def(tied())
    output = result_def(tied())
    epsilon = prop_def(FloatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    def __init__(self, input: SSAValue, scale: SSAValue, bias: SSAValue, epsilon: float):
        self.init_inferred({"input": input, "scale": scale, "bias": bias}, epsilon=FloatAttr(epsilon, f32))

    @staticmethod
    def infer(input, scale, bias) -> TensorType:
        return like(input, shapes.per_channel(shape_of(input), -1, shape_of(scale), shape_of(bias)))
