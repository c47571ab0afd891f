"""DFT as Matmuls by matrices from ONNX's reference DFT on one-hot probes
(transforms/onnx_lowerings/dft.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from forge_opt import check_model
from forge_opt.check import MATCH


@pytest.mark.parametrize(
    ("parts", "attrs", "length"),
    [(1, {}, None), (1, {"onesided": 1}, None), (2, {}, None), (2, {"inverse": 1}, None),
     (2, {"inverse": 1, "onesided": 1}, 8), (1, {}, 12), (1, {"onesided": 1}, 6)],
    ids=["real", "rfft", "complex", "inverse", "irfft", "zero-padded", "truncated"],
)
@pytest.mark.parametrize("axis", [1, 2])
def test_dft_computes_what_onnxruntime_does(parts, attrs, length, axis):
    inputs = ["x", "length" if length else "", "axis"]
    node = helper.make_node("DFT", inputs, ["y"], **attrs)
    inits = [numpy_helper.from_array(np.array(axis, np.int64), "axis")]
    if length:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "length"))
    shape = [2, 5, 8, parts] if not attrs.get("onesided") or not attrs.get("inverse") else [2, 5, 5, parts]
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    report = check_model(model)
    assert report.status == MATCH, report.error or report.format()
