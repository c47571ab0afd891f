"""Image decoders: a UNet-style decoder with ConvTranspose and Resize,
ConvTranspose's padding forms (symmetric, uneven, auto_pad, output_shape),
and Resize keeping the aspect ratio."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import assert_matches, make_model
from model_helpers import value_info as _vi
from onnx import helper, numpy_helper


def _weight(rng, name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)


def test_unet_style_decoder():
    """Bottleneck (1, 16, 4, 4) → ConvTranspose ×2 → concat with a skip →
    Conv/Relu → bilinear Resize ×2 → 1×1 Conv to 3 classes."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [
        n("ConvTranspose", ["bottleneck", "up_w", "up_b"], ["up"], strides=[2, 2], kernel_shape=[2, 2]),
        n("Concat", ["up", "skip"], ["joined"], axis=1),
        n("Conv", ["joined", "conv_w", "conv_b"], ["conv"], pads=[1, 1, 1, 1]),
        n("Relu", ["conv"], ["act"]),
        n("Resize", ["act", "", "scales"], ["big"], mode="linear"),
        n("Conv", ["big", "head_w"], ["classes"]),
    ]
    inits = [
        _weight(rng, "up_w", 16, 8, 2, 2), _weight(rng, "up_b", 8), _weight(rng, "conv_w", 8, 16, 3, 3),
        _weight(rng, "conv_b", 8), _weight(rng, "head_w", 3, 8, 1, 1),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    inputs = [_vi("bottleneck", [1, 16, 4, 4]), _vi("skip", [1, 8, 8, 8])]
    assert_matches(make_model(nodes, inputs, [_vi("classes", [1, 3, 16, 16])], inits))


@pytest.mark.parametrize(
    "attrs",
    [
        {"strides": [2, 2], "pads": [1, 1, 1, 1]},
        {"strides": [2, 1], "pads": [1, 0, 0, 2], "dilations": [1, 2]},
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
        {"strides": [3, 2], "output_shape": [10, 8]},
        {"strides": [2, 2], "output_padding": [1, 1], "group": 2},
    ],
    ids=["symmetric", "uneven-dilated", "same-upper", "same-lower", "output-shape", "grouped-output-padding"],
)
def test_conv_transpose_padding_forms(attrs):
    rng = np.random.default_rng(1)
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
    model = make_model([node], [_vi("x", [1, 4, 3, 3])], [_vi("y", None)], [_weight(rng, "w", 4, 3, 3, 3)])
    assert_matches(model)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_keeping_the_aspect_ratio(policy, mode):
    """sizes [6, 12] of a 4x6 input: one scale for both axes, the smaller
    (6/4 vs 12/6: 1.5, not_larger) or the larger (2, not_smaller)."""
    out = [1, 1, 6, 9] if policy == "not_larger" else [1, 1, 8, 12]
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode=mode, axes=[2, 3],
                            keep_aspect_ratio_policy=policy)
    model = make_model([node], [_vi("x", [1, 1, 4, 6])], [_vi("y", out)],
                       [numpy_helper.from_array(np.array([6, 12], np.int64), "sizes")], opset=18)
    assert_matches(model, {"x": np.random.default_rng(3).standard_normal((1, 1, 4, 6)).astype(np.float32)})
