"""The oracle's 8-bit integer products are ONNX's exact sums on any CPU
(`execution/exact_integers.py`): onnxruntime's MatMulInteger on an AVX2
machine without VNNI adds pairs of uint8 x int8 products into a saturating
int16, and its QDQ fusions reach the same kernels."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import make_model, value_info
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, check_model
from forge_opt.execution.exact_integers import with_exact_integer_products
from forge_opt.execution.oracle import onnxruntime_outputs

U8, I32 = TensorProto.UINT8, TensorProto.INT32


def _matmul_integer(b: np.ndarray, a_zero: np.ndarray | None = None, b_zero: np.ndarray | None = None):
    """y = MatMulInteger(a, b, a_zero, b_zero): a uint8 [M, K] input, the
    rest initializers; M is a_zero's when it is one per row."""
    zeros = [(a_zero, "a_zero"), (b_zero, "b_zero")]
    inputs = ["a", "b", *("" if v is None else n for v, n in zeros)]
    given = [numpy_helper.from_array(b, "b"), *(numpy_helper.from_array(v, n) for v, n in zeros if v is not None)]
    m = a_zero.size if a_zero is not None and a_zero.size > 1 else 4
    return make_model([helper.make_node("MatMulInteger", inputs, ["y"])], [value_info("a", [m, b.shape[0]], U8)],
                      [value_info("y", [m, b.shape[1]], I32)], given)


def _exact(a: np.ndarray, b: np.ndarray, a_zero: np.ndarray | int = 0, b_zero: np.ndarray | int = 0) -> np.ndarray:
    return ((a.astype(np.int64) - a_zero) @ (b.astype(np.int64) - b_zero)).astype(np.int32)


def test_products_that_saturate_an_int16_pair_are_summed_exactly():
    """255 x 127, twice, is 64,770: an int16 pair sum clips it to 32,767,
    so a row of 64 such products came out half its size on AVX2."""
    a = np.full((4, 64), 255, np.uint8)
    b = np.full((64, 8), 127, np.int8)
    y = onnxruntime_outputs(_matmul_integer(b), None, {"a": a})[0]
    np.testing.assert_array_equal(y, _exact(a, b))
    assert y[0, 0] == 255 * 127 * 64


def test_zero_points_per_tensor_and_per_row_and_column_are_subtracted_first():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (4, 64), dtype=np.uint8)
    b = rng.integers(-128, 128, (64, 8), dtype=np.int8)
    a_rows = np.array([3, 250, 0, 128], np.uint8)
    b_cols = rng.integers(-128, 128, 8, dtype=np.int8)
    for a_zero, b_zero in [(np.array(7, np.uint8), np.array(-3, np.int8)), (a_rows, b_cols)]:
        model = _matmul_integer(b, a_zero, b_zero)
        y = onnxruntime_outputs(model, None, {"a": a})[0]
        np.testing.assert_array_equal(y, _exact(a, b, a_zero.reshape(-1, 1) if a_zero.size > 1 else a_zero, b_zero))


def _qlinear(b, a_scale, a_zero, b_scale, b_zero, y_scale, y_zero):
    names = ["a_scale", "a_zero", "b", "b_scale", "b_zero", "y_scale", "y_zero"]
    values = [a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero]
    return make_model([helper.make_node("QLinearMatMul", ["a", *names], ["y"])], [value_info("a", [4, 64], U8)],
                      [value_info("y", [4, b.shape[1]], helper.np_dtype_to_tensor_dtype(y_zero.dtype))],
                      [numpy_helper.from_array(v, n) for v, n in zip(values, names)], opset=21)


@pytest.mark.parametrize("rows", [False, True])
def test_a_qlinear_matmul_is_requantized_as_onnx_defines_it(rows):
    """(a - a_zero) @ (b - b_zero) exactly, times a_scale * b_scale /
    y_scale in float32, rounded half to even, shifted and saturated; per
    tensor, and per row of a with per-column b."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, (4, 64), dtype=np.uint8)
    b = rng.integers(-128, 128, (64, 8), dtype=np.int8)
    if rows:
        a_scale, a_zero = np.array([0.02, 0.01, 0.03, 0.05], np.float32), np.array([120, 3, 200, 128], np.uint8)
        b_scale, b_zero = rng.uniform(0.001, 0.01, 8).astype(np.float32), np.zeros(8, np.int8)
        y_scale, y_zero = np.array([0.5, 0.25, 1.0, 2.0], np.float32), np.array([10, 0, 250, 128], np.uint8)
    else:
        a_scale, a_zero, b_scale = np.array(0.02, np.float32), np.array(128, np.uint8), np.array(0.004, np.float32)
        b_zero, y_scale, y_zero = np.array(0, np.int8), np.array(0.3, np.float32), np.array(-5, np.int8)
    model = _qlinear(b, a_scale, a_zero, b_scale, b_zero, y_scale, y_zero)
    y = onnxruntime_outputs(model, None, {"a": a})[0]
    col = (lambda v: v.reshape(-1, 1)) if rows else (lambda v: v)
    scaled = _exact(a, b, col(a_zero), b_zero).astype(np.float32) * (col(a_scale) * b_scale / col(y_scale))
    info = np.iinfo(y_zero.dtype)
    want = np.clip(np.rint(scaled) + col(y_zero).astype(np.float32), info.min, info.max).astype(y_zero.dtype)
    assert y.dtype == y_zero.dtype
    np.testing.assert_array_equal(y, want)


def test_a_model_without_integer_products_is_run_as_given():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", [2])], [value_info("y", [2])])
    assert with_exact_integer_products(model) is model


def test_a_saturating_matmul_integer_compiled_matches():
    """The compiled program sums exactly: on AVX2 the oracle had called it
    a mismatch by half its values."""
    a = np.full((4, 64), 255, np.uint8)
    b = np.full((64, 8), 127, np.int8)
    report = check_model(_matmul_integer(b), {"a": a})
    assert report.status == MATCH, report.format()
