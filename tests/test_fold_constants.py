"""Constant folding in `onnx-to-tir` computes what onnxruntime computes."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, check_model


def _gather_elements_model(width: int, indices: np.ndarray) -> bytes:
    data = np.arange(width, dtype=np.float32).reshape(1, width) * 0.5
    nodes = [
        helper.make_node("Constant", [], ["data"], value=numpy_helper.from_array(data)),
        helper.make_node("Constant", [], ["idx"], value=numpy_helper.from_array(indices)),
        helper.make_node("GatherElements", ["data", "idx"], ["g"], axis=1, name="gather"),
        helper.make_node("Add", ["x", "g"], ["y"], name="add"),
    ]
    shape = list(indices.shape)
    graph = helper.make_graph(
        nodes,
        "gather_elements",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    return model.SerializeToString()


@pytest.mark.parametrize("width", [8, 512])
def test_gather_elements_folds_like_onnxruntime(width):
    # BERT's position ids: a (1, 512) table gathered by a (1, 128) index.
    # onnx.reference gets this wrong beyond 32 entries along the axis.
    indices = (np.arange(128, dtype=np.int64) * 7 % width).reshape(1, 128)
    indices[0, 1] = -1
    report = check_model(_gather_elements_model(width, indices))
    assert report.status == MATCH, report.error
