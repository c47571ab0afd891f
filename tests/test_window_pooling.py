"""Pooling Forge's Pool2d cannot do (dilated, 3-D), as one strided slice per
kernel position, against onnxruntime: every padding and ceil-mode corner."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import assert_matches, make_model, value_info
from onnx import helper

from forge_opt import compile_onnx


def _pool(op: str, x_shape, y_shape, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    return make_model([node], [value_info("x", x_shape)], [value_info("y", y_shape)], opset=19)


def _run(model, x_shape):
    x = np.random.default_rng(0).standard_normal(x_shape).astype(np.float32)
    assert_matches(model, {"x": x})


@pytest.mark.parametrize("include", [0, 1])
@pytest.mark.parametrize("ceil", [0, 1])
def test_dilated_average_pool_counts_what_it_should(include, ceil):
    attrs = dict(kernel_shape=[3, 3], dilations=[2, 2], strides=[2, 2], pads=[1, 2, 2, 1],
                 count_include_pad=include, ceil_mode=ceil)
    size = (10 + 3 - 5) // 2 + 1 if not ceil else -(-(10 + 3 - 5) // 2) + 1
    _run(_pool("AveragePool", [1, 2, 10, 10], [1, 2, size, size], **attrs), [1, 2, 10, 10])


def test_dilated_max_pool():
    _run(_pool("MaxPool", [1, 3, 9, 8], [1, 3, 7, 4], kernel_shape=[2, 3], dilations=[2, 1], strides=[1, 2],
               pads=[0, 1, 0, 1]), [1, 3, 9, 8])


def test_three_d_max_and_average_pool():
    _run(_pool("MaxPool", [1, 2, 6, 5, 4], [1, 2, 3, 3, 2], kernel_shape=[2, 2, 2], strides=[2, 2, 2],
               auto_pad="SAME_UPPER"), [1, 2, 6, 5, 4])
    _run(_pool("AveragePool", [1, 2, 6, 5, 4], [1, 2, 5, 4, 3], kernel_shape=[2, 2, 2]), [1, 2, 6, 5, 4])


def test_dilated_lp_pool():
    _run(_pool("LpPool", [1, 2, 7, 7], [1, 2, 4, 4], kernel_shape=[2, 2], dilations=[3, 3], p=3), [1, 2, 7, 7])


def test_a_window_pool_is_one_slice_per_kernel_position():
    module = compile_onnx(_pool("MaxPool", [1, 1, 6, 6], [1, 1, 2, 2], kernel_shape=[2, 2], dilations=[2, 2],
                                strides=[2, 2]), pipeline="onnx-to-tir")
    names = [op.name for op in module.walk()]
    assert names.count("tir.strided_slice") == 4 and names.count("tir.binary") == 3
    assert "tir.pool2d" not in names
