"""forge-check's verdicts (check/compare.py): each rule taken from Forge's
`verify` has a case where it must say mismatch and one where it must not."""

import numpy as np
import pytest

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL, compare_output
from forge_opt.check.report import MATCH, MISMATCH, format_results, verdict


def _compare(want, got, **kwargs):
    return compare_output("y", np.asarray(want), np.asarray(got), **{"rtol": RTOL, "atol": ATOL, "min_pcc": MIN_PCC,
                                                                     **kwargs})


def test_a_single_element_is_judged_by_all_close_not_pcc():
    """A PCC of one element is undefined (Forge's "PCC for single values
    doesn't work"): 4e-8 against float32 noise is a match, 1e-3 off is not."""
    noise = _compare(np.array([[4e-8]], np.float32), np.array([[1.1e-7]], np.float32))
    assert noise.ok and noise.pcc != noise.pcc  # no PCC asked of one element
    assert not _compare(np.array([[4e-8]], np.float32), np.array([[1e-3]], np.float32)).ok


def test_a_near_constant_map_is_judged_by_all_close():
    """A [1, 1, 320, 320] map of one value plus rounding noise: its PCC
    measures the noise; all-close within the tolerance decides."""
    rng = np.random.default_rng(0)
    want = (0.25 + rng.standard_normal((1, 1, 320, 320)) * 1e-7).astype(np.float32)
    got = (want + rng.standard_normal(want.shape) * 1.2e-7).astype(np.float32)
    result = _compare(want, got)
    assert result.ok
    assert not _compare(want, want + np.float32(1e-3)).ok  # off by more than the tolerance


def test_a_constant_tensor_matches_its_equal():
    assert _compare(np.full((4, 4), 3.0, np.float32), np.full((4, 4), 3.0, np.float32)).ok
    assert not _compare(np.full((4, 4), 3.0, np.float32), np.full((4, 4), 3.01, np.float32)).ok


def test_the_tolerance_is_relative_to_the_outputs_scale():
    """Logits of scale 1e-2 off by 1e-4 (1% of their scale) are a mismatch,
    though an absolute 1e-4 and a PCC above 0.999 would pass them."""
    rng = np.random.default_rng(1)
    want = (rng.standard_normal(1000) * 1e-2).astype(np.float32)
    got = want + np.float32(1e-4) * np.sign(rng.standard_normal(1000)).astype(np.float32)
    result = _compare(want, got)
    assert not result.ok and result.tolerance < 1e-5
    assert result.pcc > 0.999  # what used to pass it alone
    # the same relative error on logits of scale 100 is as wrong
    assert not _compare(want * 1e4, got * 1e4).ok
    # and errors within 1e-5 of the scale pass at any scale
    small = want + np.float32(2e-8) * np.sign(want)
    assert _compare(want, small).ok and _compare(want * 1e4, small * 1e4).ok


def test_pcc_is_required_where_the_reference_has_structure():
    """A wide tolerance does not hide noise as large as the signal: the
    reference's spread exceeds the tolerance, so the PCC must reach its minimum."""
    want = np.linspace(0, 10, 100).astype(np.float32)
    got = want + np.random.default_rng(2).uniform(-4, 4, 100).astype(np.float32)
    result = _compare(want, got, rtol=0.5)
    assert result.max_abs_error < result.tolerance  # all-close at this tolerance
    assert not result.ok and result.pcc < 0.9


def test_integers_and_bools_are_exact():
    assert _compare(np.array([1, 2, 3], np.int64), np.array([1, 2, 3], np.int64)).ok
    assert not _compare(np.array([1, 2, 3], np.int64), np.array([1, 2, 4], np.int64)).ok
    assert not _compare(np.array([True, False]), np.array([True, True])).ok


def test_nan_and_infinities_must_be_where_the_reference_has_them():
    want = np.array([np.nan, np.inf, 1.0], np.float32)
    assert _compare(want, want.copy()).ok
    assert not _compare(want, np.array([0.0, np.inf, 1.0], np.float32)).ok
    assert not _compare(want, np.array([np.nan, -np.inf, 1.0], np.float32)).ok


def test_the_conformance_rule_is_elementwise():
    """ONNX's backend tests hold each element to atol + rtol * |reference|:
    a small element beside a large one gets no share of the large one's scale."""
    want = np.array([1000.0, 1e-3], np.float32)
    got = np.array([1000.0 * (1 + 1e-7), 2e-3], np.float32)
    assert _compare(want, got, min_pcc=None).ok  # both differ: the scale is the large one's
    assert not _compare(want, got, min_pcc=None, rtol=1e-3, atol=1e-7, scaled=False).ok


def test_values_equal_on_both_sides_set_no_scale():
    """Audit 3: a mask fill of -1e9 reproduced exactly does not widen the
    tolerance of the values around it: h0 squared instead of h0 is a mismatch."""
    rng = np.random.default_rng(7)
    h0 = rng.standard_normal((1, 4, 16)).astype(np.float32)
    mask = np.ones((1, 4, 16), bool)
    mask[..., 12:] = False
    want = np.where(mask, h0, np.float32(-1e9))
    result = _compare(want, np.where(mask, h0 * h0, np.float32(-1e9)))
    assert not result.ok and result.tolerance < 1e-3
    assert _compare(want, np.where(mask, h0 * np.float32(1 + 1e-7), np.float32(-1e9))).ok


def test_infinities_in_the_same_places_are_equal():
    """Audit 10: -inf where a mask applies, on both sides, and finite values
    within the tolerance: a match, with a finite error shown."""
    assert _compare(np.array([1, 2, -np.inf, 3], np.float32), np.array([1, 2.0000002, -np.inf, 3], np.float32),
                    rtol=1e-4, atol=1e-6, min_pcc=0.999).ok
    rng = np.random.default_rng(8)
    want = np.where(np.tril(np.ones((16, 64), bool)), rng.standard_normal((16, 64)), -np.inf).astype(np.float32)
    got = want + np.where(np.isfinite(want), np.float32(1e-6), 0).astype(np.float32)
    result = _compare(want, got)
    assert result.ok and result.max_abs_error < 1e-5
    off = got.copy()
    off[0, 5] = 0.0  # a finite value where the reference has -inf
    assert not _compare(want, off).ok


def test_nothing_compared_is_never_a_match():
    assert verdict([], 0)[0] == MISMATCH and "nothing was compared" in verdict([], 0)[1]
    one = _compare(np.ones(2, np.float32), np.ones(2, np.float32))
    assert verdict([one], 2) == (MISMATCH, "1 of 2 outputs were compared")
    assert verdict([one], 1, actual=2)[0] == MISMATCH
    assert verdict([one], 1) == (MATCH, "")


def test_the_table_shows_the_tolerance_and_no_pcc_where_none_applies():
    lines = format_results([_compare(np.array([2.0], np.float32), np.array([2.0], np.float32)),
                            _compare(np.array([1, 2]), np.array([1, 2]))])
    assert lines[0].split() == ["output", "shape", "max", "abs", "err", "tolerance", "budget", "pcc", "verdict"]
    assert lines[1].split()[-4:] == ["1.0e-06", "scale", "-", "ok"]  # nothing differs: the floor
    assert lines[2].split()[-4:] == ["exact", "-", "-", "ok"]


@pytest.mark.parametrize("rtol", [1e-4, 1e-2])
def test_errors_below_the_floor_pass_near_zero(rtol):
    want = np.array([0.0, 1e-9, -1e-9], np.float32)
    assert _compare(want, want + np.float32(5e-7), rtol=rtol).ok


def test_a_reference_that_is_nan_everywhere_is_no_match():
    """NaN against NaN everywhere compares nothing: not a match (ONNX's
    elementwise rule, for the conformance run, keeps NaN equal to NaN)."""
    nan = np.full((1, 4), np.nan, np.float32)
    result = _compare(nan, nan.copy())
    assert not result.ok and result.reason == "the reference is NaN everywhere: nothing to compare"
    assert _compare(nan, nan.copy(), scaled=False).ok


def test_infinities_alone_are_compared():
    """A ReduceMax over an empty set is -inf everywhere (ONNX's
    test_reduce_max_empty_set): the same infinities are a match, where
    forge-check said "no finite value to compare", a mismatch; another sign,
    or NaN, in their place is not."""
    low = np.full((2, 1, 4), -np.inf, np.float32)
    assert _compare(low, low.copy()).ok
    assert not _compare(low, -low).ok
    assert not _compare(low, np.where(np.arange(4) == 2, np.nan, low)).ok
    assert not _compare(low, np.where(np.arange(4) == 2, 0.0, low).astype(np.float32)).ok


def test_a_float16_output_within_the_tolerance_shown_is_a_match():
    """Rounding upstream of a float16 output (partial sums joined across
    devices) is at the output's scale: an error the table shows under the
    tolerance is not a mismatch, and one over it is."""
    from forge_opt.check.compare import compare_output

    want = np.linspace(-4, 4, 64).astype(np.float16)
    near_zero = int(np.argmin(np.abs(want)))
    # partial sums rounded on every element (values equal on both sides set no scale)
    got = (want.astype(np.float32) * np.float32(1 + 1e-3)).astype(np.float16)
    got[near_zero] += np.float16(3e-3)  # a few units at 4.0, many at the element's own size
    result = compare_output("y", want, got, rtol=1e-4, atol=1e-6, min_pcc=0.999)
    assert result.max_abs_error < result.tolerance and result.ok
    got[near_zero] = want[near_zero] + np.float16(0.05)
    assert not compare_output("y", want, got, rtol=1e-4, atol=1e-6, min_pcc=0.999).ok


@pytest.mark.parametrize("dtype, noise", [(np.float32, 3e-3), (np.float16, 2e-2)])
def test_a_mismatch_by_rounding_says_which_rtol_would_accept_it(dtype, noise):
    rng = np.random.default_rng(3)
    want = rng.standard_normal(64).astype(dtype)
    got = (want.astype(np.float64) + rng.uniform(-noise, noise, 64)).astype(dtype)
    result = _compare(want, got)
    assert not result.ok and result.accepting_rtol == result.accepting_rtol
    assert _compare(want, got, rtol=result.accepting_rtol).ok  # the figure shown accepts
    assert not _compare(want, got, rtol=result.accepting_rtol / 1.2).ok  # and is not far above what must be
    assert f"--rtol {result.accepting_rtol:.1e} would accept it" in "\n".join(format_results([result]))


def test_no_rtol_is_offered_for_a_wrong_value():
    want = np.linspace(-1, 1, 64).astype(np.float32)
    reversed_ = _compare(want, want[::-1].copy())  # off by the whole scale, and uncorrelated
    nan = _compare(want, np.where(want > 0.5, np.nan, want).astype(np.float32))
    assert not reversed_.ok and reversed_.accepting_rtol != reversed_.accepting_rtol
    assert not nan.ok and nan.accepting_rtol != nan.accepting_rtol
    assert "would accept" not in "\n".join(format_results([reversed_, nan]))


def test_outputs_all_off_by_rounding_get_one_rtol():
    want = np.linspace(-1, 1, 64).astype(np.float32)
    a, b = _compare(want, want + np.float32(2e-3)), _compare(want, want - np.float32(5e-3))
    lines = format_results([a, b])
    assert lines[-1] == f"--rtol {b.accepting_rtol:.1e} would accept every output"
    assert _compare(want, want + np.float32(2e-3), rtol=b.accepting_rtol).ok
