"""Does the emitted Forge program compute what the model computes? One
engine (`engine`: compile, emit, run on the Forge stand-in), one comparison
(`compare`), and what is built on them: `check_model` behind `forge-check`,
`first_divergence` behind `--bisect`, and the conformance run."""

from forge_opt.check.compare import OutputResult, compare_output, dtype_mismatch, pcc
from forge_opt.check.model import MATCH, MISMATCH, NOT_COMPILED, CheckReport, check_model

__all__ = [
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
