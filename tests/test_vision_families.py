"""The vision families of Tenstorrent's multi-chip list (issue 39): GLPN's
depth model and SAM's two models as Optimum exports them, Fuyu by
torch.onnx.export, tiny random configs (`data/models/make_vision_families.py`),
on one device and on two."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model, value_info
from onnx import helper, numpy_helper

from forge_opt.check import MATCH, check_model
from forge_opt.check.decode import check_decode
from forge_opt.check.split import check_parallel
from forge_opt.frontends.onnx import resolve_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.tools.gen_multichip import ENTRIES, fuyu_feeds

MODELS = Path(__file__).parent / "data" / "models"
FAMILIES = {"fam_glpn": 22, "fam_sam_vision": 7, "fam_sam_decoder": 18}  # file: its collectives on 2 devices
#: the sizes docs/multichip.md checks each at
DIMS = {e.file: e.dims for e in ENTRIES if e.file in FAMILIES}


@pytest.mark.parametrize("name", FAMILIES)
def test_one_device_matches_without_the_cpu(name):
    """SAM's mask decoder repeats its image embedding by a size (Range,
    NonZero, GatherND as torch exports repeat_interleave), which folds once
    the sizes are known: no --fallback."""
    report = check_model(str(MODELS / f"{name}.onnx"), dims=DIMS[name])
    assert report.status == MATCH, report.format()


@pytest.mark.parametrize("name", FAMILIES)
def test_two_devices_match_each_holding_about_half(name):
    report = check_parallel(MODELS / f"{name}.onnx", 2, dims=DIMS[name])
    assert report.status == MATCH, report.format()
    assert report.plan is not None and len(report.plan.collectives) == FAMILIES[name], report.summary
    stored = report.plan.devices[0].stored_bytes
    assert stored <= (1 / 2 + 0.1) * os.path.getsize(MODELS / f"{name}.onnx")


def test_a_table_the_compiler_gathered_is_not_a_mixture_of_experts():
    """SAM's decomposed relative positions multiply the queries by a [4, 4, 8]
    table gathered from a model weight, batched like stacked experts' weights:
    computed on every device, not split as experts and gathered after (11
    collectives, 4 of them for the tables)."""
    report = check_parallel(MODELS / "fam_sam_vision.onnx", 2, dims=DIMS["fam_sam_vision"])
    assert "expert" not in report.summary
    assert "parts its columns as [3, 4, 8], whose first axis (3) does not divide by 2 devices" in report.summary


@pytest.mark.parametrize("placeholders", [[1, 2, 4, 6], [3], []])
def test_fuyu_puts_its_patches_at_its_placeholders(placeholders):
    """Fuyu's masked_scatter (the patches' embeddings at the placeholder
    tokens) at a fixed size: every placeholder taken, fewer, none."""
    path = MODELS / "fam_fuyu.onnx"
    step = InputShapes.of(None, {"sequence_length": 8, "past_sequence_length": 3})
    assert "NonZero" not in {n.op_type for n in resolve_model(onnx.load(path), step).model.graph.node}
    report = check_model(str(path), fuyu_feeds(placeholders))
    assert report.status == MATCH, report.format()


def test_fuyu_on_two_devices():
    report = check_parallel(MODELS / "fam_fuyu.onnx", 2, fuyu_feeds([1, 2, 4, 6]))
    assert report.status == MATCH, report.format()
    # 2 a layer + 2, and the patches' projection gathered before its rows join the tokens'
    assert report.plan is not None and len(report.plan.collectives) == 7, report.summary


@pytest.mark.parametrize("devices", [1, 2])
def test_fuyu_decodes_eight_tokens_after_its_image(devices):
    """The prompt puts the patches at its placeholders; the steps after have
    none (their mask all False), from a static cache."""
    report = check_decode(MODELS / "fam_fuyu.onnx", 8, fuyu_feeds([1, 2, 4, 6]), devices=devices)
    assert report.status == MATCH, report.format()
    assert "8/8 tokens equal" in report.format()


def test_a_masked_scatter_of_a_mask_not_bool():
    """NonZero takes any non-zero as True: a float mask is one too."""
    n = helper.make_node
    nodes = [
        n("NonZero", ["mask"], ["at"]), n("Transpose", ["at"], ["indices"], perm=[1, 0]),
        n("Reshape", ["features", "last"], ["flat"]), n("Shape", ["indices"], ["count_shape"]),
        n("Gather", ["count_shape", "first"], ["count"], axis=0), n("Unsqueeze", ["count", "start"], ["ends"]),
        n("Slice", ["flat", "start", "ends", "start"], ["updates"]),
        n("ScatterND", ["x", "indices", "updates"], ["y"], name="scatter"),
    ]
    consts = [numpy_helper.from_array(np.array(v, np.int64), name)
              for name, v in (("last", [-1]), ("start", [0]), ("first", 0))]
    model = make_model(nodes, [value_info("x", [2, 3]), value_info("mask", [2, 3]), value_info("features", [5])],
                       [value_info("y", [2, 3])], consts, opset=17)
    mask = np.array([[0.0, 2.5, 0.0], [-1.0, 0.0, np.nan]], np.float32)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "mask": mask,
             "features": np.array([10, 20, 30, 40, 50], np.float32)}
    assert "NonZero" not in {node.op_type for node in resolve_model(model).model.graph.node}
    report = check_model(model, feeds)
    assert report.status == MATCH, report.format()
