"""The functions `tir`'s element-wise and reduction ops compute: one enum per
kind (an `EnumAttribute` each, as xDSL's `linalg` does) and one table keyed
by it. The interpreter reads `numpy` from it, `tir-to-forge` reads `forge`
and `keywords`, and the docs read all of it; a function whose Forge form is
more than one call says so in `instead`, which `tir-to-forge` implements.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum

from forge_opt.interpreters import forge_kernels as k


class UnaryFn(StrEnum):
    ABS = "abs"
    ATAN = "atan"
    COS = "cos"
    ERF = "erf"
    EXP = "exp"
    GELU = "gelu"
    GELU_TANH = "gelu_tanh"
    LOG = "log"
    NEG = "neg"
    NOT = "not"
    RECIPROCAL = "reciprocal"
    RELU = "relu"
    SIGMOID = "sigmoid"
    SIN = "sin"
    SQRT = "sqrt"
    TANH = "tanh"


class BinaryFn(StrEnum):
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAX = "max"
    MIN = "min"
    POW = "pow"
    MOD = "mod"
    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GE = "ge"
    LT = "lt"
    LE = "le"
    AND = "and"
    OR = "or"


class ReduceFn(StrEnum):
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"


class PoolKind(StrEnum):
    MAX = "max"
    AVG = "avg"


@irdl_attr_definition
class UnaryFnAttr(EnumAttribute[UnaryFn], SpacedOpaqueSyntaxAttribute):
    name = "tir.unary_fn"


@irdl_attr_definition
class BinaryFnAttr(EnumAttribute[BinaryFn], SpacedOpaqueSyntaxAttribute):
    name = "tir.binary_fn"


@irdl_attr_definition
class ReduceFnAttr(EnumAttribute[ReduceFn], SpacedOpaqueSyntaxAttribute):
    name = "tir.reduce_fn"


@irdl_attr_definition
class PoolKindAttr(EnumAttribute[PoolKind], SpacedOpaqueSyntaxAttribute):
    name = "tir.pool_kind"


@dataclass(frozen=True)
class Function:
    """What one function kind computes and how Forge computes it."""

    doc: str
    numpy: Callable[..., Any]
    forge: str | None = None  # the one Forge function that computes it
    keywords: dict = field(default_factory=dict)  # its keywords
    instead: str | None = None  # how tir-to-forge computes it without a function of its own
    comparison: bool = False  # the result is bool

    @property
    def forge_function(self) -> str:
        """The one Forge function (for kinds that have one)."""
        assert self.forge is not None, self.instead
        return self.forge


UNARY: dict[UnaryFn, Function] = {
    UnaryFn.ABS: Function("|x|", np.abs, "Abs"),
    UnaryFn.ATAN: Function("arctangent", np.arctan, "Atan"),
    UnaryFn.COS: Function("cosine", np.cos, "Cosine"),
    UnaryFn.ERF: Function("the error function", k.erf, "Erf"),
    UnaryFn.EXP: Function("e^x", np.exp, "Exp"),
    UnaryFn.GELU: Function("GELU, exact", k.gelu, "Gelu", {"approximate": "none"}),
    UnaryFn.GELU_TANH: Function(
        "GELU, tanh approximation", lambda x: k.gelu(x, "tanh"), "Gelu", {"approximate": "tanh"}
    ),
    UnaryFn.LOG: Function("natural logarithm", np.log, "Log"),
    UnaryFn.NEG: Function("-x", np.negative, instead="Multiply by a constant -1"),
    UnaryFn.NOT: Function("logical not", np.logical_not, "LogicalNot"),
    UnaryFn.RECIPROCAL: Function("1 / x", np.reciprocal, "Reciprocal"),
    UnaryFn.RELU: Function("max(x, 0)", k.relu, "Relu"),
    UnaryFn.SIGMOID: Function("1 / (1 + e^-x)", k.KERNELS["Sigmoid"], "Sigmoid"),
    UnaryFn.SIN: Function("sine", np.sin, "Sine"),
    UnaryFn.SQRT: Function("square root", np.sqrt, "Sqrt"),
    UnaryFn.TANH: Function("hyperbolic tangent", np.tanh, "Tanh"),
}

BINARY: dict[BinaryFn, Function] = {
    BinaryFn.ADD: Function("a + b", np.add, "Add"),
    BinaryFn.SUB: Function("a - b", np.subtract, "Subtract"),
    BinaryFn.MUL: Function("a * b", np.multiply, "Multiply"),
    BinaryFn.DIV: Function("a / b, truncated toward zero for integers", k.divide, "Divide"),
    BinaryFn.MAX: Function("the larger", np.maximum, "Max"),
    BinaryFn.MIN: Function("the smaller", np.minimum, "Min"),
    BinaryFn.POW: Function("a ^ b", np.power, "Power"),
    BinaryFn.MOD: Function("remainder with the divisor's sign", np.mod, "Remainder"),
    BinaryFn.EQ: Function("a == b", np.equal, "Equal", comparison=True),
    BinaryFn.NE: Function("a != b", np.not_equal, "NotEqual", comparison=True),
    BinaryFn.GT: Function("a > b", np.greater, "Greater", comparison=True),
    BinaryFn.GE: Function("a >= b", np.greater_equal, "GreaterEqual", comparison=True),
    BinaryFn.LT: Function("a < b", np.less, "Less", comparison=True),
    BinaryFn.LE: Function("a <= b", np.less_equal, "LessEqual", comparison=True),
    # Forge holds booleans as Int32 0/1: and is their product, or their maximum
    BinaryFn.AND: Function("logical and (of booleans)", np.logical_and, "Multiply"),
    BinaryFn.OR: Function("logical or (of booleans)", np.logical_or, "Max"),
}

REDUCE: dict[ReduceFn, Function] = {
    ReduceFn.SUM: Function("sum", np.sum, "ReduceSum"),
    ReduceFn.MEAN: Function("mean", np.mean, "ReduceAvg"),
    ReduceFn.MAX: Function("maximum", np.max, "ReduceMax"),
}

POOL: dict[PoolKind, Function] = {
    PoolKind.MAX: Function("maximum of each window", k.max_pool2d, "MaxPool2d"),
    PoolKind.AVG: Function("average of each window", k.avg_pool2d, "AvgPool2d"),
}

TABLES: dict[type[StrEnum], dict] = {UnaryFn: UNARY, BinaryFn: BINARY, ReduceFn: REDUCE, PoolKind: POOL}
ATTRIBUTES = [UnaryFnAttr, BinaryFnAttr, ReduceFnAttr, PoolKindAttr]
