"""Typed builders of the `forge` ops: one function per `forge.op` function,
with Forge's parameter names. Keywords left None take Forge's default; a
call Forge rejects raises `forge_rules.ForgeRuleError` (`forge.build`).

GENERATED from dialects/forge_api.py by `python -m forge_opt.tools.gen_forge_calls`; do not edit.
"""

# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Attribute, SSAValue

from forge_opt.dialects.forge import ForgeOp, build


def Add(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Add`."""
    return build("Add", [operandA, operandB])


def Subtract(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Subtract`."""
    return build("Subtract", [operandA, operandB])


def Multiply(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Multiply`."""
    return build("Multiply", [operandA, operandB])


def Divide(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Divide`."""
    return build("Divide", [operandA, operandB])


def Max(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Max`."""
    return build("Max", [operandA, operandB])


def Min(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Min`."""
    return build("Min", [operandA, operandB])


def Power(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Power`."""
    return build("Power", [operandA, operandB])


def Remainder(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Remainder`."""
    return build("Remainder", [operandA, operandB])


def Equal(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Equal`."""
    return build("Equal", [operandA, operandB])


def NotEqual(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.NotEqual`."""
    return build("NotEqual", [operandA, operandB])


def Greater(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Greater`."""
    return build("Greater", [operandA, operandB])


def GreaterEqual(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.GreaterEqual`."""
    return build("GreaterEqual", [operandA, operandB])


def Less(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.Less`."""
    return build("Less", [operandA, operandB])


def LessEqual(operandA: SSAValue, operandB: SSAValue) -> ForgeOp:
    """`forge.op.LessEqual`."""
    return build("LessEqual", [operandA, operandB])


def Exp(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Exp`."""
    return build("Exp", [operandA])


def Log(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Log`."""
    return build("Log", [operandA])


def Sqrt(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Sqrt`."""
    return build("Sqrt", [operandA])


def Reciprocal(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Reciprocal`."""
    return build("Reciprocal", [operandA])


def Relu(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Relu`."""
    return build("Relu", [operandA])


def Sigmoid(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Sigmoid`."""
    return build("Sigmoid", [operandA])


def Tanh(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Tanh`."""
    return build("Tanh", [operandA])


def Abs(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Abs`."""
    return build("Abs", [operandA])


def Sine(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Sine`."""
    return build("Sine", [operandA])


def Cosine(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Cosine`."""
    return build("Cosine", [operandA])


def Atan(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Atan`."""
    return build("Atan", [operandA])


def Erf(operandA: SSAValue) -> ForgeOp:
    """`forge.op.Erf`."""
    return build("Erf", [operandA])


def LogicalNot(operandA: SSAValue) -> ForgeOp:
    """`forge.op.LogicalNot`."""
    return build("LogicalNot", [operandA])


def Gelu(operandA: SSAValue, *, approximate: str | None = None) -> ForgeOp:
    """`forge.op.Gelu`."""
    return build("Gelu", [operandA], approximate=approximate)


def LeakyRelu(operandA: SSAValue, *, alpha: float) -> ForgeOp:
    """`forge.op.LeakyRelu`."""
    return build("LeakyRelu", [operandA], alpha=alpha)


def Clip(operandA: SSAValue, *, min: float, max: float) -> ForgeOp:
    """`forge.op.Clip`."""
    return build("Clip", [operandA], min=min, max=max)


def Cast(operandA: SSAValue, *, dtype: Attribute) -> ForgeOp:
    """`forge.op.Cast`."""
    return build("Cast", [operandA], dtype=dtype)


def Identity(operandA: SSAValue, *, unsqueeze: str | None = None, unsqueeze_dim: int | None = None) -> ForgeOp:
    """`forge.op.Identity`."""
    return build("Identity", [operandA], unsqueeze=unsqueeze, unsqueeze_dim=unsqueeze_dim)


def Where(condition: SSAValue, x: SSAValue, y: SSAValue) -> ForgeOp:
    """`forge.op.Where`."""
    return build("Where", [condition, x, y])


def Matmul(operandA: SSAValue, operandB: SSAValue, bias: SSAValue | None = None) -> ForgeOp:
    """`forge.op.Matmul`."""
    return build("Matmul", [operandA, operandB, bias])


def Conv2d(activations: SSAValue, weights: SSAValue, bias: SSAValue | None = None, *, stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, groups: int | None = None, channel_last: bool | None = None) -> ForgeOp:
    """`forge.op.Conv2d`."""
    return build("Conv2d", [activations, weights, bias], stride=stride, padding=padding, dilation=dilation, groups=groups, channel_last=channel_last)


def Conv2dTranspose(activations: SSAValue, weights: SSAValue, bias: SSAValue | None = None, *, stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, groups: int | None = None, channel_last: bool | None = None, output_padding: int | Sequence[int] | None = None) -> ForgeOp:
    """`forge.op.Conv2dTranspose`."""
    return build("Conv2dTranspose", [activations, weights, bias], stride=stride, padding=padding, dilation=dilation, groups=groups, channel_last=channel_last, output_padding=output_padding)


def MaxPool2d(activations: SSAValue, *, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, dilation: int | Sequence[int] | None = None, ceil_mode: bool | None = None, return_indices: bool | None = None, max_pool_add_sub_surround: bool | None = None, max_pool_add_sub_surround_value: float | None = None, channel_last: bool | None = None) -> ForgeOp:
    """`forge.op.MaxPool2d`."""
    return build("MaxPool2d", [activations], kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode, return_indices=return_indices, max_pool_add_sub_surround=max_pool_add_sub_surround, max_pool_add_sub_surround_value=max_pool_add_sub_surround_value, channel_last=channel_last)


def AvgPool2d(activations: SSAValue, *, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None, padding: str | int | Sequence[int] | None = None, ceil_mode: bool | None = None, count_include_pad: bool | None = None, divisor_override: int | None = None, channel_last: bool | None = None) -> ForgeOp:
    """`forge.op.AvgPool2d`."""
    return build("AvgPool2d", [activations], kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad, divisor_override=divisor_override, channel_last=channel_last)


def Softmax(operandA: SSAValue, *, dim: int, stable: bool | None = None) -> ForgeOp:
    """`forge.op.Softmax`."""
    return build("Softmax", [operandA], dim=dim, stable=stable)


def LogSoftmax(operandA: SSAValue, *, dim: int, stable: bool | None = None) -> ForgeOp:
    """`forge.op.LogSoftmax`."""
    return build("LogSoftmax", [operandA], dim=dim, stable=stable)


def Layernorm(operandA: SSAValue, weights: SSAValue, bias: SSAValue, *, dim: int | None = None, epsilon: float | None = None) -> ForgeOp:
    """`forge.op.Layernorm`."""
    return build("Layernorm", [operandA, weights, bias], dim=dim, epsilon=epsilon)


def Batchnorm(operandA: SSAValue, weights: SSAValue, bias: SSAValue, running_mean: SSAValue, running_var: SSAValue, *, epsilon: float | None = None) -> ForgeOp:
    """`forge.op.Batchnorm`."""
    return build("Batchnorm", [operandA, weights, bias, running_mean, running_var], epsilon=epsilon)


def ReduceSum(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ForgeOp:
    """`forge.op.ReduceSum`."""
    return build("ReduceSum", [operandA], dim=dim, keep_dim=keep_dim)


def ReduceAvg(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ForgeOp:
    """`forge.op.ReduceAvg`."""
    return build("ReduceAvg", [operandA], dim=dim, keep_dim=keep_dim)


def ReduceMax(operandA: SSAValue, *, dim: int, keep_dim: bool | None = None) -> ForgeOp:
    """`forge.op.ReduceMax`."""
    return build("ReduceMax", [operandA], dim=dim, keep_dim=keep_dim)


def Argmax(operandA: SSAValue, *, dim: int | None = None, keep_dim: bool | None = None) -> ForgeOp:
    """`forge.op.Argmax`."""
    return build("Argmax", [operandA], dim=dim, keep_dim=keep_dim)


def CumSum(operandA: SSAValue, *, dim: int) -> ForgeOp:
    """`forge.op.CumSum`."""
    return build("CumSum", [operandA], dim=dim)


def Transpose(operandA: SSAValue, *, dim0: int, dim1: int) -> ForgeOp:
    """`forge.op.Transpose`."""
    return build("Transpose", [operandA], dim0=dim0, dim1=dim1)


def Reshape(operandA: SSAValue, *, shape: Sequence[int]) -> ForgeOp:
    """`forge.op.Reshape`."""
    return build("Reshape", [operandA], shape=shape)


def Index(operandA: SSAValue, *, dim: int, start: int, stop: int | None = None, stride: int | None = None) -> ForgeOp:
    """`forge.op.Index`."""
    return build("Index", [operandA], dim=dim, start=start, stop=stop, stride=stride)


def Broadcast(operandA: SSAValue, *, dim: int, shape: int) -> ForgeOp:
    """`forge.op.Broadcast`."""
    return build("Broadcast", [operandA], dim=dim, shape=shape)


def Repeat(operandA: SSAValue, *, repeats: Sequence[int]) -> ForgeOp:
    """`forge.op.Repeat`."""
    return build("Repeat", [operandA], repeats=repeats)


def Unsqueeze(operandA: SSAValue, *, dim: int) -> ForgeOp:
    """`forge.op.Unsqueeze`."""
    return build("Unsqueeze", [operandA], dim=dim)


def Squeeze(operandA: SSAValue, *, dim: int) -> ForgeOp:
    """`forge.op.Squeeze`."""
    return build("Squeeze", [operandA], dim=dim)


def ConstantPad(operandA: SSAValue, *, padding: str | int | Sequence[int], value: float | None = None) -> ForgeOp:
    """`forge.op.ConstantPad`."""
    return build("ConstantPad", [operandA], padding=padding, value=value)


def Pad(operandA: SSAValue, *, pad: Sequence[int], mode: str | None = None, value: float | None = None, channel_last: bool | None = None) -> ForgeOp:
    """`forge.op.Pad`."""
    return build("Pad", [operandA], pad=pad, mode=mode, value=value, channel_last=channel_last)


def AdvIndex(operandA: SSAValue, operandB: SSAValue, *, dim: int | None = None) -> ForgeOp:
    """`forge.op.AdvIndex`."""
    return build("AdvIndex", [operandA, operandB], dim=dim)


def Concatenate(*operands: SSAValue, axis: int) -> ForgeOp:
    """`forge.op.Concatenate`."""
    return build("Concatenate", [*operands], axis=axis)


def Embedding(indices: SSAValue, embedding_table: SSAValue) -> ForgeOp:
    """`forge.op.Embedding`."""
    return build("Embedding", [indices, embedding_table])


#: the builders by Forge's function name, for lowerings that look one up
BY_NAME: dict[str, Callable[..., ForgeOp]] = {
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
    "Conv2d": Conv2d,
    "Conv2dTranspose": Conv2dTranspose,
    "MaxPool2d": MaxPool2d,
    "AvgPool2d": AvgPool2d,
    "Softmax": Softmax,
    "LogSoftmax": LogSoftmax,
    "Layernorm": Layernorm,
    "Batchnorm": Batchnorm,
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
    "Embedding": Embedding,
}
