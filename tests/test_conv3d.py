"""3-D convolutions (video models), which Forge has no function for, as 2-D
ones over the depth axis (`transforms/onnx_lowerings/volumes.py`), against
onnxruntime: strides, dilations, pads and auto_pad in depth, groups; and
torchvision's video ResNets on the device alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import assert_matches, make_model, value_info
from onnx import helper, numpy_helper

from forge_opt.check import MATCH, check_model

MODELS = Path(__file__).parent / "data" / "models"


def _conv3d(x_shape, w_shape, **attrs) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(w_shape).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(np.float32), "b")]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv3d", **attrs)
    return make_model([node], [value_info("x", x_shape)], [value_info("y", None)], weights, opset=17)


@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ([1, 3, 8, 16, 16], [4, 3, 3, 3, 3], {}),
    ([2, 4, 9, 10, 12], [6, 4, 3, 3, 3], dict(strides=[2, 2, 1], pads=[1, 1, 1, 1, 0, 1], dilations=[2, 1, 1])),
    ([1, 4, 5, 8, 8], [4, 2, 3, 1, 3], dict(group=2, pads=[1, 0, 1, 1, 0, 1])),
    ([1, 3, 4, 8, 8], [4, 3, 1, 3, 3], dict(pads=[0, 1, 1, 0, 1, 1])),  # mc3's (1, 3, 3): no depth taps to stack
    ([1, 3, 5, 8, 8], [4, 3, 2, 2, 2], dict(auto_pad="SAME_UPPER")),
], ids=["3x3x3", "strided-dilated", "grouped", "no-temporal", "same-upper"])
def test_a_3d_convolution_matches_onnxruntime(x_shape, w_shape, attrs):
    assert_matches(_conv3d(x_shape, w_shape, **attrs))


def test_a_kernel_deeper_than_the_clip_names_the_node():
    report = check_model(_conv3d([1, 3, 2, 8, 8], [4, 3, 3, 3, 3]))
    assert report.status == 2 and "node 'conv3d' (onnx.Conv)" in report.error and "kernel's depth 3" in report.error


@pytest.mark.parametrize("name", ["video_r3d_narrow", "video_mc3_narrow"])
def test_video_resnets_run_their_convolutions_on_the_device(name):
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    report = check_model(model)
    assert report.status == MATCH, report.format()
    convolutions = sum(n.op_type == "Conv" for n in model.graph.node)
    assert report.forge_python.count("forge.op.Conv2d(") == convolutions
