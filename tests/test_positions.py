"""Ops that compare positions: TopK as K rounds of argmax and masking
(ties: the lower index first; smallest; K = 1; a negative axis) and OneHot
of run-time indices, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import assert_matches, make_model, value_info
from onnx import TensorProto, helper, numpy_helper


@pytest.mark.parametrize(("k", "axis", "largest"), [(3, 1, 1), (2, -1, 0), (1, 0, 1), (4, 1, 0)])
def test_top_k(k, axis, largest):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    shape = [3, 5, 4]
    out = list(shape)
    out[axis] = k
    model = make_model(
        [node],
        [value_info("x", shape)],
        [value_info("v", out), value_info("i", out, TensorProto.INT64)],
        [numpy_helper.from_array(np.array([k], np.int64), "k")],
    )
    rng = np.random.default_rng(k)
    x = rng.integers(-3, 4, shape).astype(np.float32)  # many ties
    assert_matches(model, {"x": x})


def test_top_k_needs_a_constant_k():
    from forge_opt import check_model

    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=0, name="topk")
    model = make_model([node], [value_info("x", [4]), value_info("k", [1], TensorProto.INT64)],
                       [value_info("v", [2]), value_info("i", [2], TensorProto.INT64)])
    report = check_model(model, {"x": np.arange(4, dtype=np.float32), "k": np.array([2], np.int64)})
    assert report.status == 2 and "topk" in report.error and "'K' input must be a compile-time constant" in report.error


@pytest.mark.parametrize("axis", [1, -1, 0])
def test_one_hot_of_run_time_indices(axis):
    """OneHot compares indices that are only known at run time (negative
    ones counting back from depth) with each position of the new axis."""
    node = helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], axis=axis)
    out = [2, 3]
    out.insert(axis % 3, 5)
    model = make_model(
        [node],
        [value_info("idx", [2, 3])],
        [value_info("y", out)],
        [numpy_helper.from_array(np.array(5, np.int64), "depth"),
         numpy_helper.from_array(np.array([-1.0, 2.0], np.float32), "values")],
    )
    assert_matches(model, {"idx": np.array([[0, 4, -1], [2, -5, 3]], np.float32)})
