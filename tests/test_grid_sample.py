"""GridSample against onnxruntime: every mode and padding mode, both
alignments, batches of two and grids reaching well outside [-1, 1].
Bicubic with border padding is compared with ONNX's reference instead:
onnxruntime (as PyTorch) clamps each tap, the reference (and the backend
test data) moves only coordinates beyond the border range; we follow the
reference."""

from __future__ import annotations

import numpy as np
import pytest
from model_helpers import assert_matches, make_model, value_info
from onnx import helper
from onnx.reference import ReferenceEvaluator

from forge_opt.execution.engine import compile_model, run_compiled


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    model = make_model([node], [value_info("x", [2, 3, 5, 4]), value_info("grid", [2, 6, 7, 2])],
                       [value_info("y", [2, 3, 6, 7])], opset=20)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    grid = rng.uniform(-2.5, 2.5, (2, 6, 7, 2)).astype(np.float32)
    if (mode, padding) != ("cubic", "border"):
        assert_matches(model, {"x": x, "grid": grid})
        return
    compiled = compile_model(model)
    (got,) = run_compiled(compiled, [x, grid])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})
    np.testing.assert_allclose(got, np.asarray(want), atol=1e-5)


def test_grid_sample_3d_linear():
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="border")
    model = make_model([node], [value_info("x", [1, 2, 3, 4, 5]), value_info("grid", [1, 2, 3, 2, 3])],
                       [value_info("y", [1, 2, 2, 3, 2])], opset=20)
    rng = np.random.default_rng(1)
    assert_matches(model, {"x": rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32),
                           "grid": rng.uniform(-1.2, 1.2, (1, 2, 3, 2, 3)).astype(np.float32)})
