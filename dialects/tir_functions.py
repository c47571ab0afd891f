"""The functions `tir`'s element-wise and reduction ops compute: one enum per
kind (an `EnumAttribute` each, as xDSL's `linalg` does) and one table keyed
by it. `tir-to-forge` reads `forge` and `keywords`, and the docs read all of
it; a function whose Forge form is more than one call says so in `instead`,
which `tir-to-forge` implements. What each computes in numpy is the
interpreter's (`interpreters/tir_kinds.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import SpacedOpaqueSyntaxAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.utils.str_enum import StrEnum


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
    UnaryFn.ABS: Function("|x|", "Abs"),
    UnaryFn.ATAN: Function("arctangent", "Atan"),
    UnaryFn.COS: Function("cosine", "Cosine"),
    UnaryFn.ERF: Function("the error function", "Erf"),
    UnaryFn.EXP: Function("e^x", "Exp"),
    UnaryFn.GELU: Function("GELU, exact", "Gelu", {"approximate": "none"}),
    UnaryFn.GELU_TANH: Function("GELU, tanh approximation", "Gelu", {"approximate": "tanh"}),
    UnaryFn.LOG: Function("natural logarithm", "Log"),
    UnaryFn.NEG: Function("-x", instead="Multiply by a constant -1"),
    UnaryFn.NOT: Function("logical not", "LogicalNot"),
    UnaryFn.RECIPROCAL: Function("1 / x", "Reciprocal"),
    UnaryFn.RELU: Function("max(x, 0)", "Relu"),
    UnaryFn.SIGMOID: Function("1 / (1 + e^-x)", "Sigmoid"),
    UnaryFn.SIN: Function("sine", "Sine"),
    UnaryFn.SQRT: Function("square root", "Sqrt"),
    UnaryFn.TANH: Function("hyperbolic tangent", "Tanh"),
}

BINARY: dict[BinaryFn, Function] = {
    BinaryFn.ADD: Function("a + b", "Add"),
    BinaryFn.SUB: Function("a - b", "Subtract"),
    BinaryFn.MUL: Function("a * b", "Multiply"),
    BinaryFn.DIV: Function("a / b, truncated toward zero for integers", "Divide"),
    BinaryFn.MAX: Function("the larger", "Max"),
    BinaryFn.MIN: Function("the smaller", "Min"),
    BinaryFn.POW: Function("a ^ b", "Power"),
    BinaryFn.MOD: Function("remainder with the divisor's sign", "Remainder"),
    BinaryFn.EQ: Function("a == b", "Equal", comparison=True),
    BinaryFn.NE: Function("a != b", "NotEqual", comparison=True),
    BinaryFn.GT: Function("a > b", "Greater", comparison=True),
    BinaryFn.GE: Function("a >= b", "GreaterEqual", comparison=True),
    BinaryFn.LT: Function("a < b", "Less", comparison=True),
    BinaryFn.LE: Function("a <= b", "LessEqual", comparison=True),
    # Forge holds booleans as Int32 0/1: and is their product, or their maximum
    BinaryFn.AND: Function("logical and (of booleans)", "Multiply"),
    BinaryFn.OR: Function("logical or (of booleans)", "Max"),
}

REDUCE: dict[ReduceFn, Function] = {
    ReduceFn.SUM: Function("sum", "ReduceSum"),
    ReduceFn.MEAN: Function("mean", "ReduceAvg"),
    ReduceFn.MAX: Function("maximum", "ReduceMax"),
}

POOL: dict[PoolKind, Function] = {
    PoolKind.MAX: Function("maximum of each window", "MaxPool2d"),
    PoolKind.AVG: Function("average of each window", "AvgPool2d"),
}

TABLES: dict[type[StrEnum], dict] = {UnaryFn: UNARY, BinaryFn: BINARY, ReduceFn: REDUCE, PoolKind: POOL}
ATTRIBUTES = [UnaryFnAttr, BinaryFnAttr, ReduceFnAttr, PoolKindAttr]
