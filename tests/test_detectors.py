"""torchvision's detectors as users export them (`data/models/make_detectors.py`)
and ultralytics' YOLOv8 with its NMS in the graph (`make_yolo.py`),
checked through the split path (`--fallback`): the backbone and heads on the
device, NMS, TopK, RoiAlign and the mask and keypoint Loops on the host.
Each matches, or, where random weights make its scores alike and the boxes
kept depend on rounding, is reported ill-conditioned with every device
sub-model verified on its own inputs, never a match."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_opt.check.report import ILL_CONDITIONED, MATCH
from forge_opt.check.split import check_fallback

MODELS = Path(__file__).parent / "data" / "models"


@pytest.mark.slow
@pytest.mark.parametrize("name, verdict", [
    ("faster_rcnn", MATCH), ("mask_rcnn", MATCH), ("keypoint_rcnn", MATCH), ("fcos", MATCH),
    ("retinanet", ILL_CONDITIONED),  # TopK over 6,912 scores alike to 1e-7 keeps other candidates
    ("yolov8_nms", ILL_CONDITIONED),  # the device's ArgMax over class scores onnxruntime ties exactly
])
def test_a_detector_runs_with_its_post_processing_on_the_host(name, verdict):
    report = check_fallback(str(MODELS / f"det_{name}.onnx"))
    text = report.format()
    assert report.status == verdict, text
    assert report.summary.startswith("split into") and "(tt, cpu" in report.summary, report.summary
    if verdict == ILL_CONDITIONED:
        assert "device sub-models matches onnxruntime" in text and "the split on onnxruntime alone matches the " \
               "model" in text
        assert set(report.ill_conditioned) == {o.name for o in report.outputs if not o.ok}


@pytest.mark.slow
def test_forge_check_exits_3_on_an_ill_conditioned_detector(capsys):
    """As a user runs it: the exit status and the report's last word."""
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main([str(MODELS / "det_retinanet.onnx"), "--fallback"])
    out = capsys.readouterr().out
    assert done.value.code == ILL_CONDITIONED, out
    assert "no verdict on them (exit 3)" in out and "\nmatch\n" not in out
