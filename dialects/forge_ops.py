"""The `forge` dialect's ops: one class per `forge.op` function, named
after it (`MatmulOp` is `forge.matmul`, `forge.op.Matmul`), and one typed
builder with Forge's parameter names (`Matmul(a, b)`). Keywords left None
take Forge's default; a call Forge rejects raises `ForgeRuleError`
(`forge_op.build`).

GENERATED from dialects/forge_functions/ by `python -m forge_opt.tools.gen_forge_ops`; do not edit.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I64, BoolAttr, DenseArrayBase, FloatAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Attribute, SSAValue, TypeAttribute
from xdsl.irdl import operand_def, opt_operand_def, opt_prop_def, prop_def, var_operand_def

from forge_opt.dialects.forge_functions import BY_NAME as FUNCTIONS
from forge_opt.dialects.forge_functions import ForgeFunction
from forge_opt.dialects.forge_op import ForgeOp, build
from forge_opt.dialects.irdl_fast import op_definition


@op_definition
class AddOp(ForgeOp):
    """`forge.op.Add`."""

    name = "forge.add"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Add"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Add(operandA: SSAValue, operandB: SSAValue) -> AddOp:
    """`forge.op.Add`."""
    return build(AddOp, [operandA, operandB])


@op_definition
class SubtractOp(ForgeOp):
    """`forge.op.Subtract`."""

    name = "forge.subtract"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Subtract"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Subtract(operandA: SSAValue, operandB: SSAValue) -> SubtractOp:
    """`forge.op.Subtract`."""
    return build(SubtractOp, [operandA, operandB])


@op_definition
class MultiplyOp(ForgeOp):
    """`forge.op.Multiply`."""

    name = "forge.multiply"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Multiply"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Multiply(operandA: SSAValue, operandB: SSAValue) -> MultiplyOp:
    """`forge.op.Multiply`."""
    return build(MultiplyOp, [operandA, operandB])


@op_definition
class DivideOp(ForgeOp):
    """`forge.op.Divide`."""

    name = "forge.divide"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Divide"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Divide(operandA: SSAValue, operandB: SSAValue) -> DivideOp:
    """`forge.op.Divide`."""
    return build(DivideOp, [operandA, operandB])


@op_definition
class MaxOp(ForgeOp):
    """`forge.op.Max`."""

    name = "forge.max"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Max"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Max(operandA: SSAValue, operandB: SSAValue) -> MaxOp:
    """`forge.op.Max`."""
    return build(MaxOp, [operandA, operandB])


@op_definition
class MinOp(ForgeOp):
    """`forge.op.Min`."""

    name = "forge.min"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Min"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Min(operandA: SSAValue, operandB: SSAValue) -> MinOp:
    """`forge.op.Min`."""
    return build(MinOp, [operandA, operandB])


@op_definition
class PowerOp(ForgeOp):
    """`forge.op.Power`."""

    name = "forge.power"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Power"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Power(operandA: SSAValue, operandB: SSAValue) -> PowerOp:
    """`forge.op.Power`."""
    return build(PowerOp, [operandA, operandB])


@op_definition
class RemainderOp(ForgeOp):
    """`forge.op.Remainder`."""

    name = "forge.remainder"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Remainder"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Remainder(operandA: SSAValue, operandB: SSAValue) -> RemainderOp:
    """`forge.op.Remainder`."""
    return build(RemainderOp, [operandA, operandB])


@op_definition
class EqualOp(ForgeOp):
    """`forge.op.Equal`."""

    name = "forge.equal"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Equal"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Equal(operandA: SSAValue, operandB: SSAValue) -> EqualOp:
    """`forge.op.Equal`."""
    return build(EqualOp, [operandA, operandB])


@op_definition
class NotEqualOp(ForgeOp):
    """`forge.op.NotEqual`."""

    name = "forge.not_equal"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["NotEqual"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def NotEqual(operandA: SSAValue, operandB: SSAValue) -> NotEqualOp:
    """`forge.op.NotEqual`."""
    return build(NotEqualOp, [operandA, operandB])


@op_definition
class GreaterOp(ForgeOp):
    """`forge.op.Greater`."""

    name = "forge.greater"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Greater"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Greater(operandA: SSAValue, operandB: SSAValue) -> GreaterOp:
    """`forge.op.Greater`."""
    return build(GreaterOp, [operandA, operandB])


@op_definition
class GreaterEqualOp(ForgeOp):
    """`forge.op.GreaterEqual`."""

    name = "forge.greater_equal"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["GreaterEqual"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def GreaterEqual(operandA: SSAValue, operandB: SSAValue) -> GreaterEqualOp:
    """`forge.op.GreaterEqual`."""
    return build(GreaterEqualOp, [operandA, operandB])


@op_definition
class LessOp(ForgeOp):
    """`forge.op.Less`."""

    name = "forge.less"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Less"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def Less(operandA: SSAValue, operandB: SSAValue) -> LessOp:
    """`forge.op.Less`."""
    return build(LessOp, [operandA, operandB])


@op_definition
class LessEqualOp(ForgeOp):
    """`forge.op.LessEqual`."""

    name = "forge.less_equal"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["LessEqual"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)


def LessEqual(operandA: SSAValue, operandB: SSAValue) -> LessEqualOp:
    """`forge.op.LessEqual`."""
    return build(LessEqualOp, [operandA, operandB])


@op_definition
class ExpOp(ForgeOp):
    """`forge.op.Exp`."""

    name = "forge.exp"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Exp"]
    operandA = operand_def(TensorType)


def Exp(operandA: SSAValue) -> ExpOp:
    """`forge.op.Exp`."""
    return build(ExpOp, [operandA])


@op_definition
class LogOp(ForgeOp):
    """`forge.op.Log`."""

    name = "forge.log"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Log"]
    operandA = operand_def(TensorType)


def Log(operandA: SSAValue) -> LogOp:
    """`forge.op.Log`."""
    return build(LogOp, [operandA])


@op_definition
class SqrtOp(ForgeOp):
    """`forge.op.Sqrt`."""

    name = "forge.sqrt"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Sqrt"]
    operandA = operand_def(TensorType)


def Sqrt(operandA: SSAValue) -> SqrtOp:
    """`forge.op.Sqrt`."""
    return build(SqrtOp, [operandA])


@op_definition
class ReciprocalOp(ForgeOp):
    """`forge.op.Reciprocal`."""

    name = "forge.reciprocal"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Reciprocal"]
    operandA = operand_def(TensorType)


def Reciprocal(operandA: SSAValue) -> ReciprocalOp:
    """`forge.op.Reciprocal`."""
    return build(ReciprocalOp, [operandA])


@op_definition
class ReluOp(ForgeOp):
    """`forge.op.Relu`."""

    name = "forge.relu"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Relu"]
    operandA = operand_def(TensorType)


def Relu(operandA: SSAValue) -> ReluOp:
    """`forge.op.Relu`."""
    return build(ReluOp, [operandA])


@op_definition
class SigmoidOp(ForgeOp):
    """`forge.op.Sigmoid`."""

    name = "forge.sigmoid"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Sigmoid"]
    operandA = operand_def(TensorType)


def Sigmoid(operandA: SSAValue) -> SigmoidOp:
    """`forge.op.Sigmoid`."""
    return build(SigmoidOp, [operandA])


@op_definition
class TanhOp(ForgeOp):
    """`forge.op.Tanh`."""

    name = "forge.tanh"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Tanh"]
    operandA = operand_def(TensorType)


def Tanh(operandA: SSAValue) -> TanhOp:
    """`forge.op.Tanh`."""
    return build(TanhOp, [operandA])


@op_definition
class AbsOp(ForgeOp):
    """`forge.op.Abs`."""

    name = "forge.abs"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Abs"]
    operandA = operand_def(TensorType)


def Abs(operandA: SSAValue) -> AbsOp:
    """`forge.op.Abs`."""
    return build(AbsOp, [operandA])


@op_definition
class SineOp(ForgeOp):
    """`forge.op.Sine`."""

    name = "forge.sine"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Sine"]
    operandA = operand_def(TensorType)


def Sine(operandA: SSAValue) -> SineOp:
    """`forge.op.Sine`."""
    return build(SineOp, [operandA])


@op_definition
class CosineOp(ForgeOp):
    """`forge.op.Cosine`."""

    name = "forge.cosine"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Cosine"]
    operandA = operand_def(TensorType)


def Cosine(operandA: SSAValue) -> CosineOp:
    """`forge.op.Cosine`."""
    return build(CosineOp, [operandA])


@op_definition
class AtanOp(ForgeOp):
    """`forge.op.Atan`."""

    name = "forge.atan"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Atan"]
    operandA = operand_def(TensorType)


def Atan(operandA: SSAValue) -> AtanOp:
    """`forge.op.Atan`."""
    return build(AtanOp, [operandA])


@op_definition
class ErfOp(ForgeOp):
    """`forge.op.Erf`."""

    name = "forge.erf"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Erf"]
    operandA = operand_def(TensorType)


def Erf(operandA: SSAValue) -> ErfOp:
    """`forge.op.Erf`."""
    return build(ErfOp, [operandA])


@op_definition
class LogicalNotOp(ForgeOp):
    """`forge.op.LogicalNot`."""

    name = "forge.logical_not"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["LogicalNot"]
    operandA = operand_def(TensorType)


def LogicalNot(operandA: SSAValue) -> LogicalNotOp:
    """`forge.op.LogicalNot`."""
    return build(LogicalNotOp, [operandA])


@op_definition
class GeluOp(ForgeOp):
    """`forge.op.Gelu`."""

    name = "forge.gelu"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Gelu"]
    operandA = operand_def(TensorType)
    approximate = opt_prop_def(StringAttr)


def Gelu(operandA: SSAValue, *, approximate: str | None = None) -> GeluOp:
    """`forge.op.Gelu`."""
    return build(GeluOp, [operandA], approximate=approximate)


@op_definition
class LeakyReluOp(ForgeOp):
    """`forge.op.LeakyRelu`."""

    name = "forge.leaky_relu"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["LeakyRelu"]
    operandA = operand_def(TensorType)
    alpha = prop_def(FloatAttr | IntegerAttr[I64])


def LeakyRelu(operandA: SSAValue, *, alpha: float) -> LeakyReluOp:
    """`forge.op.LeakyRelu`."""
    return build(LeakyReluOp, [operandA], alpha=alpha)


@op_definition
class ClipOp(ForgeOp):
    """`forge.op.Clip`."""

    name = "forge.clip"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Clip"]
    operandA = operand_def(TensorType)
    min = prop_def(FloatAttr | IntegerAttr[I64])
    max = prop_def(FloatAttr | IntegerAttr[I64])


def Clip(operandA: SSAValue, *, min: float, max: float) -> ClipOp:
    """`forge.op.Clip`."""
    return build(ClipOp, [operandA], min=min, max=max)


@op_definition
class CastOp(ForgeOp):
    """`forge.op.Cast`."""

    name = "forge.cast"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Cast"]
    operandA = operand_def(TensorType)
    dtype = prop_def(TypeAttribute)


def Cast(operandA: SSAValue, *, dtype: Attribute) -> CastOp:
    """`forge.op.Cast`."""
    return build(CastOp, [operandA], dtype=dtype)


@op_definition
class IdentityOp(ForgeOp):
    """`forge.op.Identity`."""

    name = "forge.identity"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Identity"]
    operandA = operand_def(TensorType)
    unsqueeze = opt_prop_def(StringAttr)
    unsqueeze_dim = opt_prop_def(IntegerAttr[I64])


def Identity(operandA: SSAValue, *, unsqueeze: str | None = None, unsqueeze_dim: int | None = None) -> IdentityOp:
    """`forge.op.Identity`."""
    return build(IdentityOp, [operandA], unsqueeze=unsqueeze, unsqueeze_dim=unsqueeze_dim)


@op_definition
class WhereOp(ForgeOp):
    """`forge.op.Where`."""

    name = "forge.where"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Where"]
    condition = operand_def(TensorType)
    x = operand_def(TensorType)
    y = operand_def(TensorType)


def Where(condition: SSAValue, x: SSAValue, y: SSAValue) -> WhereOp:
    """`forge.op.Where`."""
    return build(WhereOp, [condition, x, y])


@op_definition
class MatmulOp(ForgeOp):
    """`forge.op.Matmul`."""

    name = "forge.matmul"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Matmul"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)
    bias = opt_operand_def(TensorType)


def Matmul(operandA: SSAValue, operandB: SSAValue, bias: SSAValue | None = None) -> MatmulOp:
    """`forge.op.Matmul`."""
    return build(MatmulOp, [operandA, operandB, bias])


@op_definition
class SoftmaxOp(ForgeOp):
    """`forge.op.Softmax`."""

    name = "forge.softmax"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Softmax"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    stable = opt_prop_def(BoolAttr)


def Softmax(operandA: SSAValue, *, dim: int, stable: bool | None = None) -> SoftmaxOp:
    """`forge.op.Softmax`."""
    return build(SoftmaxOp, [operandA], dim=dim, stable=stable)


@op_definition
class LogSoftmaxOp(ForgeOp):
    """`forge.op.LogSoftmax`."""

    name = "forge.log_softmax"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["LogSoftmax"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    stable = opt_prop_def(BoolAttr)


def LogSoftmax(operandA: SSAValue, *, dim: int, stable: bool | None = None) -> LogSoftmaxOp:
    """`forge.op.LogSoftmax`."""
    return build(LogSoftmaxOp, [operandA], dim=dim, stable=stable)


@op_definition
class LayernormOp(ForgeOp):
    """`forge.op.Layernorm`."""

    name = "forge.layernorm"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Layernorm"]
    operandA = operand_def(TensorType)
    weights = operand_def(TensorType)
    bias = operand_def(TensorType)
    dim = opt_prop_def(IntegerAttr[I64])
    epsilon = opt_prop_def(FloatAttr | IntegerAttr[I64])


def Layernorm(operandA: SSAValue, weights: SSAValue, bias: SSAValue, *, dim: int | None = None, epsilon: float | None = None) -> LayernormOp:
    """`forge.op.Layernorm`."""
    return build(LayernormOp, [operandA, weights, bias], dim=dim, epsilon=epsilon)


@op_definition
class BatchnormOp(ForgeOp):
    """`forge.op.Batchnorm`."""

    name = "forge.batchnorm"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Batchnorm"]
    operandA = operand_def(TensorType)
    weights = operand_def(TensorType)
    bias = operand_def(TensorType)
    running_mean = operand_def(TensorType)
    running_var = operand_def(TensorType)
    epsilon = opt_prop_def(FloatAttr | IntegerAttr[I64])


def Batchnorm(operandA: SSAValue, weights: SSAValue, bias: SSAValue, running_mean: SSAValue, running_var: SSAValue, *, epsilon: float | None = None) -> BatchnormOp:
    """`forge.op.Batchnorm`."""
    return build(BatchnormOp, [operandA, weights, bias, running_mean, running_var], epsilon=epsilon)


@op_definition
class EmbeddingOp(ForgeOp):
    """`forge.op.Embedding`."""

    name = "forge.embedding"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Embedding"]
    indices = operand_def(TensorType)
    embedding_table = operand_def(TensorType)


def Embedding(indices: SSAValue, embedding_table: SSAValue) -> EmbeddingOp:
    """`forge.op.Embedding`."""
    return build(EmbeddingOp, [indices, embedding_table])


@op_definition
class Conv2dOp(ForgeOp):
    """`forge.op.Conv2d`."""

    name = "forge.conv2d"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Conv2d"]
    activations = operand_def(TensorType)
    weights = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    stride = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    padding = opt_prop_def(StringAttr | IntegerAttr[I64] | DenseArrayBase)
    dilation = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    groups = opt_prop_def(IntegerAttr[I64])
    channel_last = opt_prop_def(BoolAttr)


def Conv2d(activations: SSAValue, weights: SSAValue, bias: SSAValue | None = None, *, stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, groups: int | None = None, channel_last: bool | None = None) -> Conv2dOp:
    """`forge.op.Conv2d`."""
    return build(Conv2dOp, [activations, weights, bias], stride=stride, padding=padding, dilation=dilation, groups=groups, channel_last=channel_last)


@op_definition
class Conv2dTransposeOp(ForgeOp):
    """`forge.op.Conv2dTranspose`."""

    name = "forge.conv2d_transpose"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Conv2dTranspose"]
    activations = operand_def(TensorType)
    weights = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    stride = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    padding = opt_prop_def(StringAttr | IntegerAttr[I64] | DenseArrayBase)
    dilation = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    groups = opt_prop_def(IntegerAttr[I64])
    channel_last = opt_prop_def(BoolAttr)
    output_padding = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)


def Conv2dTranspose(activations: SSAValue, weights: SSAValue, bias: SSAValue | None = None, *, stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, groups: int | None = None, channel_last: bool | None = None, output_padding: int | Sequence[int] | None = None) -> Conv2dTransposeOp:
    """`forge.op.Conv2dTranspose`."""
    return build(Conv2dTransposeOp, [activations, weights, bias], stride=stride, padding=padding, dilation=dilation, groups=groups, channel_last=channel_last, output_padding=output_padding)


@op_definition
class MaxPool2dOp(ForgeOp):
    """`forge.op.MaxPool2d`."""

    name = "forge.max_pool2d"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["MaxPool2d"]
    activations = operand_def(TensorType)
    kernel_size = prop_def(IntegerAttr[I64] | DenseArrayBase)
    stride = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    padding = opt_prop_def(StringAttr | IntegerAttr[I64] | DenseArrayBase)
    dilation = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    ceil_mode = opt_prop_def(BoolAttr)
    return_indices = opt_prop_def(BoolAttr)
    max_pool_add_sub_surround = opt_prop_def(BoolAttr)
    max_pool_add_sub_surround_value = opt_prop_def(FloatAttr | IntegerAttr[I64])
    channel_last = opt_prop_def(BoolAttr)


def MaxPool2d(activations: SSAValue, *, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, ceil_mode: bool | None = None, return_indices: bool | None = None, max_pool_add_sub_surround: bool | None = None, max_pool_add_sub_surround_value: float | None = None, channel_last: bool | None = None) -> MaxPool2dOp:
    """`forge.op.MaxPool2d`."""
    return build(MaxPool2dOp, [activations], kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices, max_pool_add_sub_surround=max_pool_add_sub_surround, max_pool_add_sub_surround_value=max_pool_add_sub_surround_value, channel_last=channel_last)


@op_definition
class AvgPool2dOp(ForgeOp):
    """`forge.op.AvgPool2d`."""

    name = "forge.avg_pool2d"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["AvgPool2d"]
    activations = operand_def(TensorType)
    kernel_size = prop_def(IntegerAttr[I64] | DenseArrayBase)
    stride = opt_prop_def(IntegerAttr[I64] | DenseArrayBase)
    padding = opt_prop_def(StringAttr | IntegerAttr[I64] | DenseArrayBase)
    ceil_mode = opt_prop_def(BoolAttr)
    count_include_pad = opt_prop_def(BoolAttr)
    divisor_override = opt_prop_def(IntegerAttr[I64])
    channel_last = opt_prop_def(BoolAttr)


def AvgPool2d(activations: SSAValue, *, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, ceil_mode: bool | None = None, count_include_pad: bool | None = None, divisor_override: int | None = None, channel_last: bool | None = None) -> AvgPool2dOp:
    """`forge.op.AvgPool2d`."""
    return build(AvgPool2dOp, [activations], kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor_override, channel_last=channel_last)


@op_definition
class ReduceSumOp(ForgeOp):
    """`forge.op.ReduceSum`."""

    name = "forge.reduce_sum"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["ReduceSum"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    keep_dim = opt_prop_def(BoolAttr)


def ReduceSum(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ReduceSumOp:
    """`forge.op.ReduceSum`."""
    return build(ReduceSumOp, [operandA], dim=dim, keep_dim=keep_dim)


@op_definition
class ReduceAvgOp(ForgeOp):
    """`forge.op.ReduceAvg`."""

    name = "forge.reduce_avg"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["ReduceAvg"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    keep_dim = opt_prop_def(BoolAttr)


def ReduceAvg(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ReduceAvgOp:
    """`forge.op.ReduceAvg`."""
    return build(ReduceAvgOp, [operandA], dim=dim, keep_dim=keep_dim)


@op_definition
class ReduceMaxOp(ForgeOp):
    """`forge.op.ReduceMax`."""

    name = "forge.reduce_max"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["ReduceMax"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    keep_dim = opt_prop_def(BoolAttr)


def ReduceMax(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ReduceMaxOp:
    """`forge.op.ReduceMax`."""
    return build(ReduceMaxOp, [operandA], dim=dim, keep_dim=keep_dim)


@op_definition
class ArgmaxOp(ForgeOp):
    """`forge.op.Argmax`."""

    name = "forge.argmax"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Argmax"]
    operandA = operand_def(TensorType)
    dim = opt_prop_def(IntegerAttr[I64])
    keep_dim = opt_prop_def(BoolAttr)


def Argmax(operandA: SSAValue, *, dim: int | None = None, keep_dim: bool | None = None) -> ArgmaxOp:
    """`forge.op.Argmax`."""
    return build(ArgmaxOp, [operandA], dim=dim, keep_dim=keep_dim)


@op_definition
class CumSumOp(ForgeOp):
    """`forge.op.CumSum`."""

    name = "forge.cum_sum"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["CumSum"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])


def CumSum(operandA: SSAValue, *, dim: int) -> CumSumOp:
    """`forge.op.CumSum`."""
    return build(CumSumOp, [operandA], dim=dim)


@op_definition
class TransposeOp(ForgeOp):
    """`forge.op.Transpose`."""

    name = "forge.transpose"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Transpose"]
    operandA = operand_def(TensorType)
    dim0 = prop_def(IntegerAttr[I64])
    dim1 = prop_def(IntegerAttr[I64])


def Transpose(operandA: SSAValue, *, dim0: int, dim1: int) -> TransposeOp:
    """`forge.op.Transpose`."""
    return build(TransposeOp, [operandA], dim0=dim0, dim1=dim1)


@op_definition
class ReshapeOp(ForgeOp):
    """`forge.op.Reshape`."""

    name = "forge.reshape"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Reshape"]
    operandA = operand_def(TensorType)
    shape = prop_def(DenseArrayBase)


def Reshape(operandA: SSAValue, *, shape: Sequence[int]) -> ReshapeOp:
    """`forge.op.Reshape`."""
    return build(ReshapeOp, [operandA], shape=shape)


@op_definition
class IndexOp(ForgeOp):
    """`forge.op.Index`."""

    name = "forge.index"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Index"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    stop = opt_prop_def(IntegerAttr[I64])
    stride = opt_prop_def(IntegerAttr[I64])


def Index(operandA: SSAValue, *, dim: int, start: int, stop: int | None = None, stride: int | None = None) -> IndexOp:
    """`forge.op.Index`."""
    return build(IndexOp, [operandA], dim=dim, start=start, stop=stop, stride=stride)


@op_definition
class BroadcastOp(ForgeOp):
    """`forge.op.Broadcast`."""

    name = "forge.broadcast"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Broadcast"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    shape = prop_def(IntegerAttr[I64])


def Broadcast(operandA: SSAValue, *, dim: int, shape: int) -> BroadcastOp:
    """`forge.op.Broadcast`."""
    return build(BroadcastOp, [operandA], dim=dim, shape=shape)


@op_definition
class RepeatOp(ForgeOp):
    """`forge.op.Repeat`."""

    name = "forge.repeat"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Repeat"]
    operandA = operand_def(TensorType)
    repeats = prop_def(DenseArrayBase)


def Repeat(operandA: SSAValue, *, repeats: Sequence[int]) -> RepeatOp:
    """`forge.op.Repeat`."""
    return build(RepeatOp, [operandA], repeats=repeats)


@op_definition
class UnsqueezeOp(ForgeOp):
    """`forge.op.Unsqueeze`."""

    name = "forge.unsqueeze"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Unsqueeze"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])


def Unsqueeze(operandA: SSAValue, *, dim: int) -> UnsqueezeOp:
    """`forge.op.Unsqueeze`."""
    return build(UnsqueezeOp, [operandA], dim=dim)


@op_definition
class SqueezeOp(ForgeOp):
    """`forge.op.Squeeze`."""

    name = "forge.squeeze"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Squeeze"]
    operandA = operand_def(TensorType)
    dim = prop_def(IntegerAttr[I64])


def Squeeze(operandA: SSAValue, *, dim: int) -> SqueezeOp:
    """`forge.op.Squeeze`."""
    return build(SqueezeOp, [operandA], dim=dim)


@op_definition
class ConstantPadOp(ForgeOp):
    """`forge.op.ConstantPad`."""

    name = "forge.constant_pad"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["ConstantPad"]
    operandA = operand_def(TensorType)
    padding = prop_def(StringAttr | IntegerAttr[I64] | DenseArrayBase)
    value = opt_prop_def(FloatAttr | IntegerAttr[I64])


def ConstantPad(operandA: SSAValue, *, padding: str | int | Sequence[int], value: float | None = None) -> ConstantPadOp:
    """`forge.op.ConstantPad`."""
    return build(ConstantPadOp, [operandA], padding=padding, value=value)


@op_definition
class PadOp(ForgeOp):
    """`forge.op.Pad`."""

    name = "forge.pad"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Pad"]
    operandA = operand_def(TensorType)
    pad = prop_def(DenseArrayBase)
    mode = opt_prop_def(StringAttr)
    value = opt_prop_def(FloatAttr | IntegerAttr[I64])
    channel_last = opt_prop_def(BoolAttr)


def Pad(operandA: SSAValue, *, pad: Sequence[int], mode: str | None = None, value: float | None = None, channel_last: bool | None = None) -> PadOp:
    """`forge.op.Pad`."""
    return build(PadOp, [operandA], pad=pad, mode=mode, value=value, channel_last=channel_last)


@op_definition
class AdvIndexOp(ForgeOp):
    """`forge.op.AdvIndex`."""

    name = "forge.adv_index"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["AdvIndex"]
    operandA = operand_def(TensorType)
    operandB = operand_def(TensorType)
    dim = opt_prop_def(IntegerAttr[I64])


def AdvIndex(operandA: SSAValue, operandB: SSAValue, *, dim: int | None = None) -> AdvIndexOp:
    """`forge.op.AdvIndex`."""
    return build(AdvIndexOp, [operandA, operandB], dim=dim)


@op_definition
class ConcatenateOp(ForgeOp):
    """`forge.op.Concatenate`."""

    name = "forge.concatenate"
    FUNCTION: ClassVar[ForgeFunction] = FUNCTIONS["Concatenate"]
    inputs = var_operand_def(TensorType)
    axis = prop_def(IntegerAttr[I64])


def Concatenate(*operands: SSAValue, axis: int) -> ConcatenateOp:
    """`forge.op.Concatenate`."""
    return build(ConcatenateOp, [*operands], axis=axis)


#: every op class, in the records' order
OPS: tuple[type[ForgeOp], ...] = (
    AddOp,
    SubtractOp,
    MultiplyOp,
    DivideOp,
    MaxOp,
    MinOp,
    PowerOp,
    RemainderOp,
    EqualOp,
    NotEqualOp,
    GreaterOp,
    GreaterEqualOp,
    LessOp,
    LessEqualOp,
    ExpOp,
    LogOp,
    SqrtOp,
    ReciprocalOp,
    ReluOp,
    SigmoidOp,
    TanhOp,
    AbsOp,
    SineOp,
    CosineOp,
    AtanOp,
    ErfOp,
    LogicalNotOp,
    GeluOp,
    LeakyReluOp,
    ClipOp,
    CastOp,
    IdentityOp,
    WhereOp,
    MatmulOp,
    SoftmaxOp,
    LogSoftmaxOp,
    LayernormOp,
    BatchnormOp,
    EmbeddingOp,
    Conv2dOp,
    Conv2dTransposeOp,
    MaxPool2dOp,
    AvgPool2dOp,
    ReduceSumOp,
    ReduceAvgOp,
    ReduceMaxOp,
    ArgmaxOp,
    CumSumOp,
    TransposeOp,
    ReshapeOp,
    IndexOp,
    BroadcastOp,
    RepeatOp,
    UnsqueezeOp,
    SqueezeOp,
    ConstantPadOp,
    PadOp,
    AdvIndexOp,
    ConcatenateOp,
)

#: the builders by Forge's function name, for lowerings that look one up
BUILDERS: dict[str, Callable[..., ForgeOp]] = {
    "Add": Add,
    "Subtract": Subtract,
    "Multiply": Multiply,
    "Divide": Divide,
    "Max": Max,
    "Min": Min,
    "Power": Power,
    "Remainder": Remainder,
    "Equal": Equal,
    "NotEqual": NotEqual,
    "Greater": Greater,
    "GreaterEqual": GreaterEqual,
    "Less": Less,
    "LessEqual": LessEqual,
    "Exp": Exp,
    "Log": Log,
    "Sqrt": Sqrt,
    "Reciprocal": Reciprocal,
    "Relu": Relu,
    "Sigmoid": Sigmoid,
    "Tanh": Tanh,
    "Abs": Abs,
    "Sine": Sine,
    "Cosine": Cosine,
    "Atan": Atan,
    "Erf": Erf,
    "LogicalNot": LogicalNot,
    "Gelu": Gelu,
    "LeakyRelu": LeakyRelu,
    "Clip": Clip,
    "Cast": Cast,
    "Identity": Identity,
    "Where": Where,
    "Matmul": Matmul,
    "Softmax": Softmax,
    "LogSoftmax": LogSoftmax,
    "Layernorm": Layernorm,
    "Batchnorm": Batchnorm,
    "Embedding": Embedding,
    "Conv2d": Conv2d,
    "Conv2dTranspose": Conv2dTranspose,
    "MaxPool2d": MaxPool2d,
    "AvgPool2d": AvgPool2d,
    "ReduceSum": ReduceSum,
    "ReduceAvg": ReduceAvg,
    "ReduceMax": ReduceMax,
    "Argmax": Argmax,
    "CumSum": CumSum,
    "Transpose": Transpose,
    "Reshape": Reshape,
    "Index": Index,
    "Broadcast": Broadcast,
    "Repeat": Repeat,
    "Unsqueeze": Unsqueeze,
    "Squeeze": Squeeze,
    "ConstantPad": ConstantPad,
    "Pad": Pad,
    "AdvIndex": AdvIndex,
    "Concatenate": Concatenate,
}
