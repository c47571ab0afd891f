"""Models exported from PyTorch (tests/data/models/make_models.py: a CNN,
GPT-2, BERT, ViT, ResNet and MobileNetV2 from transformers, random weights,
opsets 14 and 17) compile to Forge Python that computes what onnxruntime
computes."""

from pathlib import Path

import pytest

from forge_opt.check import MATCH, check_model

MODELS = sorted((Path(__file__).parent / "data" / "models").glob("*.onnx"))


def test_six_architectures_at_two_opsets():
    names = {p.stem.rsplit("_opset", 1)[0] for p in MODELS}
    opsets = {p.stem.rsplit("_opset", 1)[1] for p in MODELS}
    assert len(names) >= 6 and opsets >= {"14", "17"}


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_pytorch_model(path):
    report = check_model(str(path))
    assert report.status == MATCH, report.format() + report.error
    assert "self.get_parameter(" in report.forge_python
