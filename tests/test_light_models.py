"""The 9 light models of the onnx package compile to Forge Python that
computes what onnxruntime computes: as shipped (every weight one repeated
number, from ConstantOfShape) and with those weights made random."""

import glob
import os

import onnx
import onnx.backend.test
import pytest
from model_helpers import randomize_constant_weights

from forge_opt.check import MATCH, check_model

LIGHT = sorted(
    glob.glob(os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light", "*.onnx"))
)
IDS = [os.path.basename(p)[len("light_") : -len(".onnx")] for p in LIGHT]


@pytest.mark.slow
@pytest.mark.parametrize("path", LIGHT, ids=IDS)
def test_light_model_as_shipped(path):
    report = check_model(path)
    assert report.status == MATCH, report.format() + report.error


@pytest.mark.slow
@pytest.mark.parametrize("path", LIGHT, ids=IDS)
def test_light_model_with_random_weights(path):
    model = randomize_constant_weights(onnx.load(path))
    report = check_model(model)
    assert report.status == MATCH, report.format() + report.error
    assert "self.get_parameter(" in report.forge_python
