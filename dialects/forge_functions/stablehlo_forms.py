"""Every Forge function's StableHLO form, by function name: the families'
tables (`stablehlo_eltwise.py`, `stablehlo_tm.py`) as one."""

from __future__ import annotations

from forge_opt.dialects.forge_functions import stablehlo_eltwise, stablehlo_tm
from forge_opt.dialects.forge_functions.stablehlo_form import Form

FORMS: dict[str, Form] = {**stablehlo_eltwise.FORMS, **stablehlo_tm.FORMS}
assert len(FORMS) == len(stablehlo_eltwise.FORMS) + len(stablehlo_tm.FORMS), "a function with two forms"
