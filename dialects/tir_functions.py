"""The functions `tir`'s element-wise and reduction ops compute: one enum per
kind (an `EnumAttribute` each, as xDSL's `linalg` does) and one table keyed
by it, saying what each means. What each computes in numpy is the
interpreter's (`interpreters/tir_kinds.py`); the Forge call that computes it
is `tir-to-forge`'s (`transforms/tir_forge_calls.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """What one function kind computes."""

    doc: str
    comparison: bool = False  # the result is bool


UNARY: dict[UnaryFn, Function] = {
    UnaryFn.ABS: Function("|x|"),
    UnaryFn.ATAN: Function("arctangent"),
    UnaryFn.COS: Function("cosine"),
    UnaryFn.ERF: Function("the error function"),
    UnaryFn.EXP: Function("e^x"),
    UnaryFn.GELU: Function("GELU, exact"),
    UnaryFn.GELU_TANH: Function("GELU, tanh approximation"),
    UnaryFn.LOG: Function("natural logarithm"),
    UnaryFn.NEG: Function("-x"),
    UnaryFn.NOT: Function("logical not"),
    UnaryFn.RECIPROCAL: Function("1 / x"),
    UnaryFn.RELU: Function("max(x, 0)"),
    UnaryFn.SIGMOID: Function("1 / (1 + e^-x)"),
    UnaryFn.SIN: Function("sine"),
    UnaryFn.SQRT: Function("square root"),
    UnaryFn.TANH: Function("hyperbolic tangent"),
}

BINARY: dict[BinaryFn, Function] = {
    BinaryFn.ADD: Function("a + b"),
    BinaryFn.SUB: Function("a - b"),
    BinaryFn.MUL: Function("a * b"),
    BinaryFn.DIV: Function("a / b, truncated toward zero for integers"),
    BinaryFn.MAX: Function("the larger"),
    BinaryFn.MIN: Function("the smaller"),
    BinaryFn.POW: Function("a ^ b"),
    BinaryFn.MOD: Function("remainder with the divisor's sign"),
    BinaryFn.EQ: Function("a == b", comparison=True),
    BinaryFn.NE: Function("a != b", comparison=True),
    BinaryFn.GT: Function("a > b", comparison=True),
    BinaryFn.GE: Function("a >= b", comparison=True),
    BinaryFn.LT: Function("a < b", comparison=True),
    BinaryFn.LE: Function("a <= b", comparison=True),
    BinaryFn.AND: Function("logical and (of booleans)"),
    BinaryFn.OR: Function("logical or (of booleans)"),
}

REDUCE: dict[ReduceFn, Function] = {
    ReduceFn.SUM: Function("sum"),
    ReduceFn.MEAN: Function("mean"),
    ReduceFn.MAX: Function("maximum"),
}

POOL: dict[PoolKind, Function] = {
    PoolKind.MAX: Function("maximum of each window"),
    PoolKind.AVG: Function("average of each window"),
}

TABLES: dict[type[StrEnum], dict] = {UnaryFn: UNARY, BinaryFn: BINARY, ReduceFn: REDUCE, PoolKind: POOL}
ATTRIBUTES = [UnaryFnAttr, BinaryFnAttr, ReduceFnAttr, PoolKindAttr]
