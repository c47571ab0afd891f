"""Does the emitted Forge program compute what the model computes? One
engine (`execution.engine`: compile, emit, run on the Forge stand-in), one comparison
(`compare`), one driver (`run.run_check`) with a strategy per mode, and
what is built on them: `check_model` behind `forge-check`,
`first_divergence` behind `--bisect`, and the conformance run."""

from forge_opt.check.compare import OutputResult, compare_output, dtype_mismatch, pcc
from forge_opt.check.model import check_model
from forge_opt.check.report import ILL_CONDITIONED, MATCH, MISMATCH, NOT_COMPILED, CheckReport

__all__ = [
    "ILL_CONDITIONED",
    "MATCH",
    "MISMATCH",
    "NOT_COMPILED",
    "CheckReport",
    "OutputResult",
    "check_model",
    "compare_output",
    "dtype_mismatch",
    "pcc",
]
