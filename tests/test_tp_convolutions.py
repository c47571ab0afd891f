"""CNNs shared by channels across devices (issue 39): timm's ResNet-18,
MobileNetV3 and EfficientNet-B0, a YOLOv8 and a diffusion UNet's layers,
exported as their users export them (`data/models/make_cnns.py`), each
device holding its block of every convolution's weight."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model, value_info
from onnx import helper, numpy_helper

from forge_opt import import_onnx
from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.dialects import tir
from forge_opt.transforms.pipelines import run_pipeline

MODELS = Path(__file__).parent / "data" / "models"
CNNS = ["cnn_resnet18", "cnn_mobilenetv3", "cnn_efficientnet_b0", "det_yolov8", "cnn_unet_tiny", "cnn_convnext_atto"]


def _conv_weight_elements(name: str, devices: int) -> int:
    """The convolution weight elements one device's program reads (all of
    them on one device)."""
    module = import_onnx(onnx.load(MODELS / f"{name}.onnx"))
    run_pipeline(module, "onnx-to-tir" if devices == 1 else f"onnx-to-tir,tensor-parallel{{devices={devices}}},"
                 "tp-partition")
    return sum(math.prod(op.weight.type.get_shape()) for op in module.walk()  # pyright: ignore
               if isinstance(op, tir.Conv2dOp | tir.ConvTranspose2dOp))


@pytest.mark.parametrize("name", CNNS)
def test_a_cnn_matches_at_two_devices_each_holding_half_its_convolutions(name):
    report = check_parallel(MODELS / f"{name}.onnx", 2)
    assert report.status == MATCH, report.format()
    assert "out-channel" in report.summary and "in-channel" in report.summary
    assert _conv_weight_elements(name, 2) <= (1 / 2 + 0.1) * _conv_weight_elements(name, 1)


@pytest.mark.parametrize("name", ["cnn_resnet18", "det_yolov8"])
def test_four_devices_hold_a_quarter(name):
    report = check_parallel(MODELS / f"{name}.onnx", 4)
    assert report.status == MATCH, report.format()
    assert _conv_weight_elements(name, 4) <= (1 / 4 + 0.1) * _conv_weight_elements(name, 1)


@pytest.mark.parametrize("devices", [2, 4])
def test_convnext_holds_its_share_of_every_parameter(devices):
    """Issue 52: timm's ConvNeXt carries its channel split through depthwise
    7x7 convolutions, LayerNorm over channels last and the pointwise MLP as
    MatMuls; each device holds at most 1/P + 0.1 of all its parameters."""
    model = onnx.load(MODELS / "cnn_convnext_atto.onnx")
    report = check_parallel(MODELS / "cnn_convnext_atto.onnx", devices)
    assert report.status == MATCH, report.format()
    assert report.plan is not None
    whole = sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    assert max(d.parameter_bytes for d in report.plan.devices) <= (1 / devices + 0.1) * whole


def _peak_activations(devices: int) -> list[int]:
    plan = check_parallel(MODELS / "cnn_resnet18.onnx", devices).plan
    assert plan is not None
    return [d.activation_bytes for d in plan.devices]


def test_the_device_table_counts_activations_which_shrink_with_the_devices():
    """A CNN's activations are what does not fit: each device's peak of
    live activation bytes is in the table, and more devices hold less."""
    two, four = _peak_activations(2), _peak_activations(4)
    assert len(two) == 2 and len(four) == 4
    assert 0 < four[0] < two[0]


@pytest.mark.parametrize("devices", [2, 4])
def test_channels_taken_apart_and_joined_cost_no_all_gather(devices):
    """YOLOv8's C2f splits a convolution's output by channels and joins the
    parts again before the next: packed (`channel_parts`), each device holds
    its block of every part, and the detector needs all-reduces alone (its
    heads' partial sums joined before one)."""
    report = check_parallel(MODELS / "det_yolov8.onnx", devices)
    assert report.status == MATCH, report.format()
    assert report.plan is not None
    kinds = [c.op for c in report.plan.collectives]
    assert set(kinds) == {"all_reduce"} and len(kinds) <= 31, kinds
    assert any(layer.packed == 2 for layer in report.plan.layers)  # a C2f's first convolution, by its two parts


def test_joined_channels_read_by_more_than_convolutions_are_gathered():
    """A Concat of split channels that is also a model output stays whole
    (its channels in the model's order), and the Split before it is not
    packed: the whole is gathered once before the Split (and the last
    convolution's output once), still exact."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((8, 4, 1, 1)), rng.standard_normal((4, 8, 1, 1))
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["h"]),
        helper.make_node("Sigmoid", ["h"], ["s"]),
        helper.make_node("Mul", ["h", "s"], ["a"]),
        helper.make_node("Split", ["a"], ["p", "q"], axis=1, num_outputs=2),
        helper.make_node("Concat", ["q", "p"], ["c"], axis=1),
        helper.make_node("Conv", ["c", "w2"], ["y"]),
    ]
    weights = [numpy_helper.from_array(w.astype(np.float32), n) for n, w in (("w1", w1), ("w2", w2))]
    shapes = {"y": [1, 4, 8, 8], "c": [1, 8, 8, 8]}
    for outputs, gathers in ((["y"], 0), (["y", "c"], 2)):
        model = make_model(nodes, [value_info("x", [1, 4, 8, 8])], [value_info(n, shapes[n]) for n in outputs], weights)
        report = check_parallel(model, 2)
        assert report.status == MATCH, report.format()
        assert report.plan is not None
        assert [c.op for c in report.plan.collectives].count("all_gather") == gathers


def test_depthwise_convolutions_take_their_groups():
    report = check_parallel(MODELS / "cnn_mobilenetv3.onnx", 2)
    assert re.search(r"layers: .*\d+ grouped", report.summary), report.summary


def test_a_pinned_convolution_stays_whole_and_an_impossible_pin_is_an_error(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layers": {"/inp/Conv": {"axis": None}}}))
    report = check_parallel(MODELS / "cnn_unet_tiny.onnx", 2, plan=str(plan))
    assert report.status == MATCH, report.format()
    plan.write_text(json.dumps({"layers": {"/out/Conv": {"axis": 1}, "/inp/Conv": {"axis": 0}}}))
    report = check_parallel(MODELS / "cnn_unet_tiny.onnx", 2, plan=str(plan))
    assert report.status == 2
    assert "a convolution split by its input channels needs them (3) to divide by the 2 devices" in report.error


def test_batch_norms_fold_into_each_devices_blocks():
    """torchvision's MobileNetV2 exported for training keeps its 52
    BatchNormalizations, each after a convolution. A device's convolution
    weights are its blocks, known only when the writer computes them: the
    fold is written as ops on them (`block_folds`), so no device runs a
    batch norm of a convolution's output, and the program matches. (A batch
    norm after an all-reduce of an input-channel convolution's partial sums
    stays: its shift would be added on every device.)"""
    from forge_opt.dialects.forge_ops import BatchnormOp, Conv2dOp

    module = import_onnx(onnx.load(MODELS / "mobilenet_v2_opset17.onnx"))
    run_pipeline(module, "onnx-to-forge{devices=2}")
    norms = [op for op in module.walk() if isinstance(op, BatchnormOp)]
    assert len(norms) < 52 and not any(isinstance(op.operands[0].owner, Conv2dOp) for op in norms)
    report = check_parallel(MODELS / "mobilenet_v2_opset17.onnx", 2)
    assert report.status == MATCH, report.format()


def test_a_bilinear_resize_stays_whole_where_its_input_is():
    """A bilinear Resize is two matmuls on interpolation matrices the
    compiler made; on a replicated image they stay replicated (split, they
    would split the image by pixels, which the channel-split sum it meets
    gathers again), and are no weights the report warns of."""
    report = check_parallel(MODELS / "cnn_unet_tiny.onnx", 2)
    assert report.status == MATCH, report.format()
    assert report.plan is not None
    resize = [layer for layer in report.plan.layers if layer.node == "/bilinear/Resize"]
    assert [layer.case for layer in resize] == ["replicated"] * 2
    assert "a constant the compiler made for an image" in resize[0].reason and not resize[0].unshared
    assert len(report.plan.collectives) <= 5 and "warning" not in report.summary
