"""Which Forge function computes each `tir` function kind (`tir.unary`'s,
`tir.binary`'s and `tir.reduce`'s `fn`, `tir.pool2d`'s `kind`): its typed
builder from `dialects/forge_ops.py` and the keywords it takes, or, for a
kind with no function of its own, how `tir-to-forge` computes it. A
builder, not a name: a Forge function renamed or gone fails at import and
in the type check, not at a lookup during a compile. `tir-to-forge` and the
docs read these tables; what a kind means is `dialects/tir_functions.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from forge_opt.dialects import forge_ops as F
from forge_opt.dialects.forge_op import ForgeOp
from forge_opt.dialects.tir_functions import BinaryFn, PoolKind, ReduceFn, UnaryFn


@dataclass(frozen=True)
class ForgeCall:
    """The one Forge call that computes a kind, or `instead`, how it is computed without one."""

    builder: Callable[..., ForgeOp] | None
    keywords: dict = field(default_factory=dict)
    instead: str = ""

    @property
    def function(self) -> Callable[..., ForgeOp]:
        """The builder, of a kind that has one."""
        assert self.builder is not None, self.instead
        return self.builder

    def __str__(self) -> str:
        if self.builder is None:
            return self.instead
        keywords = "".join(f", {k}={v!r}" for k, v in self.keywords.items())
        return f"`forge.op.{self.builder.__name__}(...{keywords})`"


UNARY: dict[UnaryFn, ForgeCall] = {
    UnaryFn.ABS: ForgeCall(F.Abs),
    UnaryFn.ATAN: ForgeCall(F.Atan),
    UnaryFn.COS: ForgeCall(F.Cosine),
    UnaryFn.ERF: ForgeCall(F.Erf),
    UnaryFn.EXP: ForgeCall(F.Exp),
    UnaryFn.GELU: ForgeCall(F.Gelu, {"approximate": "none"}),
    UnaryFn.GELU_TANH: ForgeCall(F.Gelu, {"approximate": "tanh"}),
    UnaryFn.LOG: ForgeCall(F.Log),
    UnaryFn.NEG: ForgeCall(None, instead="Multiply by a constant -1"),
    UnaryFn.NOT: ForgeCall(F.LogicalNot),
    UnaryFn.RECIPROCAL: ForgeCall(F.Reciprocal),
    UnaryFn.RELU: ForgeCall(F.Relu),
    UnaryFn.SIGMOID: ForgeCall(F.Sigmoid),
    UnaryFn.SIN: ForgeCall(F.Sine),
    UnaryFn.SQRT: ForgeCall(F.Sqrt),
    UnaryFn.TANH: ForgeCall(F.Tanh),
}

BINARY: dict[BinaryFn, ForgeCall] = {
    BinaryFn.ADD: ForgeCall(F.Add),
    BinaryFn.SUB: ForgeCall(F.Subtract),
    BinaryFn.MUL: ForgeCall(F.Multiply),
    BinaryFn.DIV: ForgeCall(F.Divide),
    BinaryFn.MAX: ForgeCall(F.Max),
    BinaryFn.MIN: ForgeCall(F.Min),
    BinaryFn.POW: ForgeCall(F.Power),
    BinaryFn.MOD: ForgeCall(F.Remainder),
    BinaryFn.EQ: ForgeCall(F.Equal),
    BinaryFn.NE: ForgeCall(F.NotEqual),
    BinaryFn.GT: ForgeCall(F.Greater),
    BinaryFn.GE: ForgeCall(F.GreaterEqual),
    BinaryFn.LT: ForgeCall(F.Less),
    BinaryFn.LE: ForgeCall(F.LessEqual),
    # Forge holds booleans as Int32 0/1: and is their product, or their maximum
    BinaryFn.AND: ForgeCall(F.Multiply),
    BinaryFn.OR: ForgeCall(F.Max),
}

REDUCE: dict[ReduceFn, ForgeCall] = {
    ReduceFn.SUM: ForgeCall(F.ReduceSum),
    ReduceFn.MEAN: ForgeCall(F.ReduceAvg),
    ReduceFn.MAX: ForgeCall(F.ReduceMax),
}

POOL: dict[PoolKind, ForgeCall] = {
    PoolKind.MAX: ForgeCall(F.MaxPool2d),
    PoolKind.AVG: ForgeCall(F.AvgPool2d),
}

#: by the enum a kind belongs to, as `tir_functions.TABLES`
CALLS: dict[type, dict] = {UnaryFn: UNARY, BinaryFn: BINARY, ReduceFn: REDUCE, PoolKind: POOL}
