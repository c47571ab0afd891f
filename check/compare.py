"""One comparison of an output with its reference, for `forge-check`, the
conformance run and `--bisect` alike."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from forge_opt.dialects.forge_rules import data_format
from forge_opt.dtypes import is_float


@dataclass
class OutputResult:
    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    pcc: float
    ok: bool
    reason: str = ""  # what is wrong, when not ok: shape, dtype or (empty) values


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
    name: str, want, got, *, rtol: float, atol: float, min_pcc: float | None = None, formats: bool = True
) -> OutputResult:
    """`got` against the reference `want`: same shape, same DataFormat (with
    `formats`), floats within tolerance (NaN equal to NaN), everything else
    equal, and a PCC of at least `min_pcc`."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return OutputResult(
            name, got.shape, float("inf"), 0.0, False, f"shape {list(got.shape)} instead of {list(want.shape)}"
        )
    mismatch = dtype_mismatch(want, got) if formats else None
    if mismatch:
        return OutputResult(name, got.shape, float("inf"), 0.0, False, mismatch)
    try:
        wide_want, wide_got = want.astype(np.float64), got.astype(np.float64)
    except (TypeError, ValueError):
        return OutputResult(name, got.shape, float("inf"), 0.0, False, f"values of dtype {got.dtype}")
    with np.errstate(invalid="ignore"):  # inf - inf: NaN, compared as equal below when both are
        err = float(np.max(np.abs(wide_want - wide_got))) if want.size else 0.0
    if want.dtype.kind == "c" or is_float(want.dtype):
        # a float narrower than float32 is compared at its own resolution: two units in the last place
        if is_float(want.dtype) and want.dtype.itemsize < 4:
            eps = float(ml_dtypes.finfo(want.dtype).eps)
            rtol, atol = max(rtol, 2 * eps), max(atol, 2 * eps)
        ok = bool(np.allclose(wide_got, wide_want, rtol=rtol, atol=atol, equal_nan=True))
    else:
        ok = bool(np.array_equal(want, got))
    p = pcc(want, got) if min_pcc is not None or not ok else float("nan")
    if min_pcc is not None:
        ok = ok and p >= min_pcc
    return OutputResult(name, got.shape, err, p, ok)
