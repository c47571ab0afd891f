"""Forge's Python op API as data: each `forge.op.<Function>`, its positional
tensor parameters and its keyword parameters with Forge's defaults
(../shared/reference/forge_api.md). The `forge` dialect and the Forge
stand-in are both built from this table, so they cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass

REQUIRED = object()  # a keyword parameter without a default


@dataclass(frozen=True)
class ForgeFunction:
    name: str
    # (parameter name, "single" | "optional" | "variadic"), after `name: str`
    operands: tuple[tuple[str, str], ...]
    # (parameter name, default or REQUIRED), in Forge's order
    keywords: tuple[tuple[str, object], ...] = ()
    keyword_only: bool = False  # Softmax's dim, Concatenate's axis
    # keywords Forge asserts to be tuples (a list fails), printed as tuples
    tuple_keywords: tuple[str, ...] = ()

    @property
    def op_name(self) -> str:
        """`forge.<snake_case>`, e.g. `forge.reduce_avg` for ReduceAvg."""
        out = []
        name = self.name
        for i, c in enumerate(name):
            if c.isupper() and i and (not name[i - 1].isupper() or (i + 1 < len(name) and name[i + 1].islower())):
                out.append("_")
            out.append(c.lower())
        return "forge." + "".join(out).replace("2_d", "2d").replace("1_d", "1d")


_A = (("operandA", "single"),)
_AB = (("operandA", "single"), ("operandB", "single"))


def _f(name, operands=_A, keywords=(), keyword_only=False, tuple_keywords=()) -> ForgeFunction:
    return ForgeFunction(name, operands, tuple(keywords), keyword_only, tuple(tuple_keywords))


FUNCTIONS: tuple[ForgeFunction, ...] = (
    # element-wise binary (eltwise_binary)
    *(_f(n, _AB) for n in (
        "Add", "Subtract", "Multiply", "Divide", "Max", "Min", "Power", "Remainder",
        "Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual",
    )),
    # element-wise unary (eltwise_unary)
    *(_f(n) for n in (
        "Exp", "Log", "Sqrt", "Reciprocal", "Relu", "Sigmoid", "Tanh", "Abs", "Sine", "Cosine",
        "Atan", "Erf", "LogicalNot",
    )),
    _f("Gelu", keywords=[("approximate", "none")]),
    _f("LeakyRelu", keywords=[("alpha", REQUIRED)]),
    _f("Clip", keywords=[("min", REQUIRED), ("max", REQUIRED)]),
    _f("Cast", keywords=[("dtype", REQUIRED)]),
    _f("Identity", keywords=[("unsqueeze", None), ("unsqueeze_dim", None)]),
    _f("Where", (("condition", "single"), ("x", "single"), ("y", "single"))),
    # matmul, convolution, pooling
    _f("Matmul", (("operandA", "single"), ("operandB", "single"), ("bias", "optional"))),
    _f(
        "Conv2d",
        (("activations", "single"), ("weights", "single"), ("bias", "optional")),
        [("stride", 1), ("padding", "same"), ("dilation", 1), ("groups", 1), ("channel_last", False)],
    ),
    _f(
        "Conv2dTranspose",
        (("activations", "single"), ("weights", "single"), ("bias", "optional")),
        [
            ("stride", 1), ("padding", "same"), ("dilation", 1), ("groups", 1), ("channel_last", False),
            ("output_padding", 0),
        ],
        tuple_keywords=("padding",),
    ),
    _f(
        "MaxPool2d",
        (("activations", "single"),),
        [
            ("kernel_size", REQUIRED), ("stride", 1), ("padding", "same"), ("dilation", 1),
            ("ceil_mode", False), ("return_indices", False), ("max_pool_add_sub_surround", False),
            ("max_pool_add_sub_surround_value", 1.0), ("channel_last", False),
        ],
        tuple_keywords=("kernel_size",),
    ),
    _f(
        "AvgPool2d",
        (("activations", "single"),),
        [
            ("kernel_size", REQUIRED), ("stride", 1), ("padding", "same"), ("ceil_mode", False),
            ("count_include_pad", True), ("divisor_override", None), ("channel_last", False),
        ],
    ),
    # nn
    _f("Softmax", keywords=[("dim", REQUIRED), ("stable", True)], keyword_only=True),
    _f("LogSoftmax", keywords=[("dim", REQUIRED), ("stable", True)], keyword_only=True),
    _f(
        "Layernorm",
        (("operandA", "single"), ("weights", "single"), ("bias", "single")),
        [("dim", -1), ("epsilon", 1e-5)],
    ),
    _f(
        "Batchnorm",
        (("operandA", "single"), ("weights", "single"), ("bias", "single"),
         ("running_mean", "single"), ("running_var", "single")),
        [("epsilon", 1e-5)],
    ),
    # reductions
    *(_f(n, keywords=[("dim", REQUIRED), ("keep_dim", True)]) for n in ("ReduceSum", "ReduceAvg", "ReduceMax")),
    _f("Argmax", keywords=[("dim", None), ("keep_dim", False)]),
    _f("CumSum", keywords=[("dim", REQUIRED)]),
    # tensor manipulation (tm)
    _f("Transpose", keywords=[("dim0", REQUIRED), ("dim1", REQUIRED)]),
    _f("Reshape", keywords=[("shape", REQUIRED)]),
    _f("Index", keywords=[("dim", REQUIRED), ("start", REQUIRED), ("stop", None), ("stride", 1)]),
    _f("Broadcast", keywords=[("dim", REQUIRED), ("shape", REQUIRED)]),
    _f("Repeat", keywords=[("repeats", REQUIRED)]),
    _f("Unsqueeze", keywords=[("dim", REQUIRED)]),
    _f("Squeeze", keywords=[("dim", REQUIRED)]),
    # ConstantPad cannot be called from Python (rule constantpad-unusable); Pad is emitted instead
    _f("ConstantPad", keywords=[("padding", REQUIRED), ("value", 0.0)]),
    _f("Pad", keywords=[("pad", REQUIRED), ("mode", "constant"), ("value", 0.0), ("channel_last", False)]),
    _f("AdvIndex", _AB, [("dim", 0)]),
    _f("Concatenate", (("operands", "variadic"),), [("axis", REQUIRED)], keyword_only=True),
    _f("Embedding", (("indices", "single"), ("embedding_table", "single"))),
)

BY_NAME: dict[str, ForgeFunction] = {f.name: f for f in FUNCTIONS}
