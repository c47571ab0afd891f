"""One comparison of an output with its reference, for `forge-check`, the
split and tensor-parallel checks, the conformance run and `--bisect` alike.

The verdict follows Forge's own `verify` (tt-forge-fe forge/forge/verify/
compare.py), made stricter where it can only help:

- integers and bools must be equal;
- floats must be all-close (for forge-check, a reference with no finite
  value compares nothing, and is no match): every element within `atol + rtol * scale`,
  where `scale` is the reference's largest finite magnitude, so the
  tolerance is relative to the output's scale (Forge's `relative_atol`)
  and `atol` is only a floor for outputs near zero; the conformance run
  asks ONNX's backend tests' own elementwise rule instead
  (`scaled=False`: `atol + rtol * |reference|`);
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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from forge_opt.dialects.forge_rules import data_format
from forge_opt.dtypes import is_float

#: forge-check's defaults: a tolerance of 1e-4 of the output's scale with a
#: floor of 1e-6 (about eight float32 units in the last place at 1.0), and
#: a PCC stricter than Forge's 0.99
RTOL, ATOL, MIN_PCC = 1e-4, 1e-6, 0.999


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


def _finite_scale(want: np.ndarray) -> tuple[float, float]:
    """The largest finite magnitude of `want` and the spread (max - min) of its finite values."""
    finite = want[np.isfinite(want)]
    if finite.size == 0:
        return 0.0, 0.0
    return float(np.max(np.abs(finite))), float(np.max(finite) - np.min(finite))


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
) -> OutputResult:
    """`got` against the reference `want` by the rules of the module's
    docstring: same shape, same DataFormat (with `formats`), floats
    all-close (NaN and infinities where the reference has them), everything
    else equal, and a PCC of at least `min_pcc` where one applies."""
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
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, compared as equal below when both are
        diff = np.abs(wide_want - wide_got)
        err = float(np.max(diff)) if want.size else 0.0
    if not (want.dtype.kind == "c" or is_float(want.dtype)):
        return OutputResult(name, got.shape, err, math.nan, bool(np.array_equal(want, got)))
    if scaled and want.size and not np.isfinite(wide_want).any():
        return OutputResult(name, got.shape, err, math.nan, False, "the reference has no finite value to compare")
    scale, spread = _finite_scale(np.abs(wide_want) if want.dtype.kind == "c" else wide_want)
    tolerance = atol + rtol * scale
    with np.errstate(invalid="ignore"):
        bound = tolerance if scaled else atol + rtol * np.abs(wide_want)
        if is_float(want.dtype) and want.dtype.itemsize < 4:
            # a float narrower than float32 may also differ by two units in its own last place: at the
            # output's scale when the tolerance is (rounding anywhere upstream is at that scale), so the
            # tolerance shown is the bound applied
            eps = float(ml_dtypes.finfo(want.dtype).eps)
            if scaled:
                bound = bound + 2 * eps * max(1.0, scale)
                tolerance += 2 * eps * max(1.0, scale)
            else:
                bound = bound + 2 * eps * (1 + np.abs(wide_want))
                tolerance += 2 * eps * (1 + scale)
        close = (diff <= bound) | (np.isnan(wide_want) & np.isnan(wide_got)) | (wide_want == wide_got)
    ok = bool(np.all(close))
    p = math.nan
    if min_pcc is not None and want.size > 1 and spread > tolerance:
        p = pcc(want, got)
        ok = ok and p >= min_pcc
    elif not ok and want.size > 1:
        p = pcc(want, got)  # shown beside a mismatch, to tell noise from garbage
    accepting = math.nan
    if not ok and scaled and scale > 0 and not np.all(close) and (min_pcc is None or not p < min_pcc):
        # the tolerance grows by rtol * scale alone: the rtol that covers the largest difference not close
        accepting = _rounded_up(rtol + float(np.max(np.where(close, 0.0, diff)) - tolerance) / scale)
    return OutputResult(name, got.shape, err, p, ok, tolerance=tolerance, accepting_rtol=accepting)


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
