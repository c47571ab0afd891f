"""Lowerings stay accurate where the textbook formula would overflow."""

import numpy as np
from onnx import TensorProto, helper

from forge_opt.check import MATCH, check_model


def test_reduce_log_sum_exp_of_large_values():
    # exp(100) overflows float32; the maximum is subtracted first
    graph = helper.make_graph(
        [helper.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0, name="lse")],
        "lse",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor("axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    x = np.random.default_rng(0).uniform(100, 200, (2, 3, 4)).astype(np.float32)
    report = check_model(model.SerializeToString(), {"x": x})
    assert report.status == MATCH, report.error
    assert all(np.isfinite(r.max_abs_error) for r in report.outputs)


def test_asinh_of_large_negative_values():
    # x + sqrt(x^2 + 1) is 0 in float32 for x below about -3000
    graph = helper.make_graph(
        [helper.make_node("Asinh", ["x"], ["y"], name="asinh")],
        "asinh",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    x = np.array([-1e6, -5000.0, -1.5, 0.0, 2.0, 1e6], np.float32)
    report = check_model(model.SerializeToString(), {"x": x})
    assert report.status == MATCH, report.error
