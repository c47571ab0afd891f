"""Forge's Python op API as records: each `forge.op.<Function>` one
`ForgeFunction` (signature, checks, shape, element type, golden, block-float
operand), written by family as Forge keeps its ops. The `forge` dialect's op
classes (`dialects/forge_ops.py`, generated) and the Forge stand-in are both
built from them, so they cannot disagree."""

from __future__ import annotations

from forge_opt.dialects.forge_functions import conv, eltwise, nn, reduce, tm
from forge_opt.dialects.forge_functions.record import REQUIRED, Call, ForgeFunction, ForgeRuleError, Rule

__all__ = ["BY_NAME", "FUNCTIONS", "REQUIRED", "RULES", "Call", "ForgeFunction", "ForgeRuleError", "Rule"]

FUNCTIONS: tuple[ForgeFunction, ...] = (
    *eltwise.FUNCTIONS, *nn.FUNCTIONS, *conv.FUNCTIONS, *reduce.FUNCTIONS, *tm.FUNCTIONS,
)

BY_NAME: dict[str, ForgeFunction] = {f.name: f for f in FUNCTIONS}
assert len(BY_NAME) == len(FUNCTIONS), "two records of one name"

#: every rule, each once, in the order the records list them
RULES: tuple[Rule, ...] = tuple(dict.fromkeys(r for f in FUNCTIONS for r in f.checks))
