"""One comparison of an output with its reference, for `forge-check`, the
split and tensor-parallel checks, the conformance run and `--bisect` alike.

The verdict follows Forge's own `verify` (tt-forge-fe forge/forge/verify/
compare.py), made stricter where it can only help:

- integers and bools must be equal;
- floats must be all-close over the positions where the two differ:
  values equal on both sides (a mask's `-1e9` fill, infinities and NaN in
  the same places) are equal, not a tolerance, and neither widen the scale
  nor enter the PCC. Every differing element is within `atol + rtol *
  scale`, where `scale` is the largest finite magnitude of the reference
  among the differing positions (Forge's `relative_atol`, without letting a
  fill value a program reproduces exactly set the scale of everything
  else); `atol` is only a floor for outputs near zero. A reference with no
  finite value compares nothing, and is no match. The conformance run asks
  ONNX's backend tests' own elementwise rule instead (`scaled=False`:
  `atol + rtol * |reference|`);
- an output a DequantizeLinear computes (`quantum`, its scale) may differ
  by one quantization step: an int8 rounding that flips upstream moves it
  by a whole step;
- a float narrower than float32 may differ by two more units in its own
  last place: at the output's scale where the tolerance is (rounding
  anywhere upstream, as of partial sums across devices, is at that scale),
  element by element in the conformance run;
- a single element is judged by all-close alone: Forge's "PCC for single
  values doesn't work";
- with more than one element, the PCC must reach `min_pcc`, unless the
  reference's spread is within the tolerance (a constant or near-constant
  tensor): there the correlation measures rounding noise, and Forge too
  falls back to all-close where the PCC is undefined.

A float output that fails these rules gets a second, measured chance,
position by position (`within_budget`, asked by the check driver): at each
position that fails them, its distance to a wider run of the model
(float64 for float32, float32 for a float16 export) against onnxruntime's
own distance there. A near-tie at one position (an ArgMax that float32 and
float64 decide otherwise) widens the budget at that position alone, never
over the whole output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import ml_dtypes
import numpy as np

from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects.forge_functions.element_types import data_format
from forge_opt.dtypes import is_float

#: forge-check's defaults: a tolerance of 1e-5 of the output's scale with a
#: floor of 1e-6 (about eight float32 units in the last place at 1.0), and
#: a PCC stricter than Forge's 0.99
RTOL, ATOL, MIN_PCC = 1e-5, 1e-6, 0.999

#: a program in a reduced format (bfloat16, block-float weights) is judged by Forge's own rule: its PCC
#: (AutomaticValueChecker's 0.99 by default); a single value, which has none, within 1% of the reference
REDUCED_PCC, REDUCED_RTOL = 0.99, 1e-2


def check_tolerances(rtol: float, atol: float, min_pcc: float) -> None:
    """A one-line error for a tolerance no comparison can use: a negative
    or non-finite `rtol` or `atol`, a PCC outside [-1, 1] or not a number."""
    for flag, value in (("--rtol", rtol), ("--atol", atol)):
        if not (math.isfinite(value) and value >= 0):
            raise ForgeOptError(f"{flag} {value}: give a finite number of at least 0")
    if not -1 <= min_pcc <= 1:
        raise ForgeOptError(f"--pcc {min_pcc}: a correlation is between -1 and 1")


@dataclass
class OutputResult:
    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    pcc: float  # NaN where the PCC was not asked or does not apply
    ok: bool
    reason: str = ""  # what is wrong, when not ok: shape, dtype or (empty) values
    tolerance: float = 0.0  # the largest difference a float output may show
    # for a float output off by more than the tolerance (and not by its PCC): the --rtol at which
    # the same comparison would accept it (small: rounding; large: a wrong value); NaN otherwise
    accepting_rtol: float = math.nan
    # what set the tolerance: "scale" (atol + rtol * the output's scale), "q-step" (one step of the
    # DequantizeLinear computing it), "float64" or "float32" (a multiple of the oracle's own error against the
    # model run that wide, `within_budget`)
    budget: str = "scale"
    relative_l2: float = math.nan  # |got - want| / |want| (L2 norms), for a reduced format's program
    # the positions (a mask of the output's shape) that fail the rules and nothing has excused yet; None
    # where the output is ok, or fails as a whole (its shape, its dtype, its PCC alone)
    off: np.ndarray | None = field(default=None, repr=False, compare=False)
    excused: int = 0  # positions that failed the fixed rules and are within the wide run's budget there
    ill: int = 0  # positions where the oracle's own variants differ from it as much (`conditioning`)


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two arrays; 1.0 when both are constant and equal."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    if a.size == 0 or np.array_equal(a, b):
        return 1.0
    with np.errstate(all="ignore"):  # inf or NaN outputs give a NaN PCC, not a warning
        if a.std() == 0 or b.std() == 0:
            return 1.0 if np.allclose(a, b) else 0.0
        return float(np.corrcoef(a, b)[0, 1])


def dtype_mismatch(want: np.ndarray, got: np.ndarray) -> str | None:
    """Forge's `verify` check of an output's element type: the reference's
    dtype and Forge's must have the same DataFormat (bool and int64 are both
    Int32, forge/forge/verify/verify.py check_dtypes)."""
    want_format, got_format = data_format(want.dtype), data_format(got.dtype)
    if want_format is None:
        return f"dtype {want.dtype}, for which Forge has no DataFormat"
    if want_format != got_format:
        return f"dtype {got.dtype} ({got_format}) where the reference gives {want.dtype} ({want_format})"
    return None


def compare_output(
    name: str,
    want,
    got,
    *,
    rtol: float,
    atol: float,
    min_pcc: float | None = None,
    formats: bool = True,
    scaled: bool = True,
    quantum: float = 0.0,
) -> OutputResult:
    """`got` against the reference `want` by the rules of the module's
    docstring: same shape, same DataFormat (with `formats`), floats
    all-close where they differ (NaN and infinities where the reference has
    them), everything else equal, and a PCC of at least `min_pcc` where one
    applies. `quantum`: the scale of the DequantizeLinear that computes the
    output, if one does."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return OutputResult(
            name, got.shape, float("inf"), math.nan, False, f"shape {list(got.shape)} instead of {list(want.shape)}"
        )
    mismatch = dtype_mismatch(want, got) if formats else None
    if mismatch:
        return OutputResult(name, got.shape, float("inf"), math.nan, False, mismatch)
    try:
        wide_want, wide_got = want.astype(np.float64), got.astype(np.float64)
    except (TypeError, ValueError):
        return OutputResult(name, got.shape, float("inf"), math.nan, False, f"values of dtype {got.dtype}")
    if not (want.dtype.kind == "c" or is_float(want.dtype)):
        with np.errstate(invalid="ignore", over="ignore"):
            err = float(np.max(np.abs(wide_want - wide_got))) if want.size else 0.0
        ok = bool(np.array_equal(want, got))
        return OutputResult(name, got.shape, err, math.nan, ok, off=None if ok else want != got)
    if scaled and want.size and np.isnan(wide_want).all():  # (infinities compare: their places and signs)
        return OutputResult(name, got.shape, math.nan, math.nan, False, "the reference is NaN everywhere: nothing "
                            "to compare")
    # equal on both sides (fills, infinities, NaN in the same places) is equal; the rest is compared
    differ = ~((wide_want == wide_got) | (np.isnan(wide_want) & np.isnan(wide_got)))
    if want.dtype.kind == "c":
        wide_want, wide_got = np.abs(wide_want), np.abs(wide_got)
    w, g = wide_want[differ], wide_got[differ]
    finite = np.isfinite(w)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite & np.isfinite(g), np.abs(w - g), np.inf)  # a non-finite value that differs: off
    err = float(np.max(diff)) if diff.size else 0.0
    scale = float(np.max(np.abs(w[finite]))) if finite.any() else 0.0
    spread = float(np.max(w[finite]) - np.min(w[finite])) if finite.any() else 0.0
    tolerance = max(atol + rtol * scale, quantum)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = tolerance if scaled else np.maximum(atol + rtol * np.abs(w), quantum)
        to_bound, to_tolerance = _narrow_float_margin(want.dtype, w, scale, scaled)
        bound, tolerance = bound + to_bound, tolerance + to_tolerance
        close = diff <= bound
    ok = bool(np.all(close))
    p = math.nan
    compared = finite & np.isfinite(g)
    if min_pcc is not None and want.size > 1 and spread > tolerance:
        p = pcc(w[compared], g[compared]) if compared.any() else math.nan
        ok = ok and p >= min_pcc
    elif not ok and want.size > 1 and compared.any():
        p = pcc(w[compared], g[compared])  # shown beside a mismatch, to tell noise from garbage
    accepting = math.nan
    if not ok and scaled and scale > 0 and not np.all(close) and (min_pcc is None or not p < min_pcc):
        # the tolerance grows by rtol * scale alone: the rtol that covers the largest difference not close
        accepting = _rounded_up(rtol + float(np.max(np.where(close, 0.0, diff)) - tolerance) / scale)
    off = None
    if not ok and np.any(~close):
        off = np.zeros(want.shape, bool)
        off[differ] = ~close
    return OutputResult(name, got.shape, err, p, ok, tolerance=tolerance, accepting_rtol=accepting,
                        budget="q-step" if quantum and tolerance == quantum else "scale", off=off)


def _narrow_float_margin(dtype: np.dtype, w: np.ndarray, scale: float, scaled: bool):
    """What a float narrower than float32 adds to the bound and to the
    tolerance shown: it may also differ by two units in its own last place,
    at the output's scale when the tolerance is (rounding anywhere upstream
    is at that scale), so the tolerance shown is the bound applied."""
    if not (is_float(dtype) and dtype.itemsize < 4):
        return 0.0, 0.0
    eps = float(ml_dtypes.finfo(dtype).eps)
    if scaled:
        return 2 * eps * max(1.0, scale), 2 * eps * max(1.0, scale)
    return 2 * eps * (1 + np.abs(w)), 2 * eps * (1 + scale)


#: why a reduced format's output is no match where it has infinities or NaN the reference has not
NON_FINITE_ELSEWHERE = "non-finite values in other places"


def compare_reduced(name: str, want, got, *, min_pcc: float = REDUCED_PCC, atol: float = ATOL) -> OutputResult:
    """An output of a program in a reduced format against the float32
    reference, as Forge's `verify` judges it and as LLM users read it:
    integers and bools equal; floats non-finite in the same places and,
    over the rest, a PCC of at least `min_pcc` (one value: within
    `REDUCED_RTOL` of it, plus `atol`), with the relative L2 error and the
    largest difference beside it. The element type is the format's, so it
    is not compared."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return OutputResult(
            name, got.shape, float("inf"), math.nan, False, f"shape {list(got.shape)} instead of {list(want.shape)}"
        )
    w, g = want.astype(np.float64), got.astype(np.float64)
    if not is_float(want.dtype):
        err = float(np.max(np.abs(w - g))) if want.size else 0.0
        return OutputResult(name, got.shape, err, math.nan, bool(np.array_equal(w, g)))
    finite = np.isfinite(w)
    if want.size and not finite.any():
        return OutputResult(name, got.shape, math.nan, math.nan, False, "the reference has no finite value to compare")
    if not np.array_equal(finite, np.isfinite(g)) or not np.array_equal(w[~finite], g[~finite], equal_nan=True):
        return OutputResult(name, got.shape, float("inf"), math.nan, False, NON_FINITE_ELSEWHERE)
    w, g = w[finite], g[finite]
    err = float(np.max(np.abs(w - g))) if w.size else 0.0
    norm = float(np.linalg.norm(w))
    rel = float(np.linalg.norm(w - g)) / norm if norm else (0.0 if err == 0 else math.inf)
    if w.size == 1:
        tolerance = atol + REDUCED_RTOL * abs(float(w[0]))
        return OutputResult(name, got.shape, err, math.nan, err <= tolerance, tolerance=tolerance, relative_l2=rel)
    p = pcc(w, g)
    return OutputResult(name, got.shape, err, p, p >= min_pcc, relative_l2=rel)


#: how many times onnxruntime's own distance to the wide run (float64 for float32) a program may be from it
BUDGET_FACTOR = 8.0


def own_error(want, exact) -> np.ndarray:
    """Onnxruntime's (`want`'s) own distance to the wide run (`exact`) at
    each position, and at least the rounding noise around it: the root mean
    square of that distance along the position's row (the last axis) and its
    median over the output. One position's own distance may be small by
    luck, or a value copied exactly, where a program rounding in another
    order differs; a tie that moves one row leaves every other row's noise
    as it is. Infinite where either is not finite."""
    want, exact = np.asarray(want, np.float64), np.asarray(exact, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        own = np.abs(want - exact)
        finite = np.isfinite(own)
        floor = float(np.median(own[finite])) if finite.any() else 0.0
        if own.ndim:
            kept = np.where(finite, own, 0.0)
            rows = np.sqrt(np.mean(kept * kept, axis=-1, keepdims=True))
            floor = np.maximum(rows, floor)
        return np.where(finite, np.maximum(own, floor), np.inf)


def within_budget(result: OutputResult, want, got, exact, *, min_pcc: float | None = None,
                  factor: float = BUDGET_FACTOR) -> OutputResult:
    """The second chance of a float output that failed the fixed rules, at
    each position that fails them: `got`'s distance to `exact` (the wide
    run's output: float64 for float32, float32 for a float16 export)
    against `factor` times onnxruntime's (`want`'s) own distance there
    (`own_error`), plus two units in the output's last place at its scale.
    A position within it differs from the exact value as a computation in
    the output's type may; the result counts them (`excused`) and keeps the
    others `off`. The PCC must hold over the positions not excused."""
    eps = float(ml_dtypes.finfo(np.asarray(want).dtype).eps)
    wide = "float64" if np.asarray(exact).dtype == np.float64 else "float32"
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    exact = np.asarray(exact, np.float64)
    if exact.shape != want.shape or result.reason or result.ok:
        return result
    # failed by its PCC alone: every position that differs must be within the budget
    differ = ~((want == got) | (np.isnan(want) & np.isnan(got)))
    off = result.off if result.off is not None else differ
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(want) & np.isfinite(exact) & np.isfinite(got)
        # the output's scale, as the fixed rules take it: over the positions that differ
        scale = float(np.max(np.abs(exact[differ & finite]))) if (differ & finite).any() else 0.0
        budget = factor * own_error(want, exact) + 2 * eps * scale
        excused = off & finite & (np.abs(got - exact) <= budget)
    remaining = off & ~excused
    count = int(excused.sum())
    if remaining.any():
        return replace(result, off=remaining, excused=count) if result.off is not None else result
    if min_pcc is not None and want.size > 1:
        kept = ~excused & differ & np.isfinite(want) & np.isfinite(got)
        if kept.any() and float(np.ptp(want[kept])) > result.tolerance and pcc(want[kept], got[kept]) < min_pcc:
            return replace(result, off=None, excused=count)  # wrong as a whole: for the variants to judge
    return replace(result, ok=True, tolerance=float(np.max(budget[excused])), budget=wide, off=None,
                   excused=count, accepting_rtol=math.nan)


def _rounded_up(x: float) -> float:
    """`x` up to two significant digits, so that the figure shown accepts;
    NaN when no rtol would (a NaN or an infinite difference)."""
    if not math.isfinite(x) or x <= 0:
        return math.nan
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / step) * step


def compared_verdict(results: list[OutputResult], expected: int) -> str | None:
    """Why a set of compared outputs is not a match (None when it is): a
    check that compared nothing, or fewer outputs than the reference has,
    never says match."""
    if expected == 0:
        return "nothing was compared: the model has no outputs"
    if len(results) < expected:
        return f"{len(results)} of {expected} outputs were compared"
    return None
