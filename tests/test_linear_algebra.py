"""Einsum as diagonals, sums and one Matmul per pair of operands
(transforms/onnx_lowerings/einsum.py), in float32: the node tests' Einsum
cases are float64, which Forge cannot hold. Det by cofactor expansion."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from forge_opt import check_model
from forge_opt.check import MATCH

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 5, 8), (1, 2, 6, 8)]),
    ("i,i", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->i", [(3, 4)]),
    ("ij->ji", [(3, 4)]),
    ("ii->i", [(4, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("ii", [(4, 4)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("ijk->", [(2, 3, 4)]),
]


@pytest.mark.parametrize(("equation", "shapes"), CASES, ids=[c[0] for c in CASES])
def test_einsum_computes_what_onnxruntime_does(equation, shapes):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    rng = np.random.default_rng(0)
    report = check_model(model, {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)})
    assert report.status == MATCH, report.error or report.format()


def test_an_equation_that_does_not_fit_is_named():
    node = helper.make_node("Einsum", ["a"], ["y"], equation="ijk->i", name="sum")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    report = check_model(model)
    assert "node 'sum' (onnx.Einsum): 'ijk' does not label the 2 axes of its input" in report.error


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 3), (2, 4, 4)])
def test_det_by_cofactor_expansion(shape):
    node = helper.make_node("Det", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    report = check_model(model)
    assert report.status == MATCH, report.error or report.format()


def test_det_of_a_large_matrix_is_refused_by_name():
    node = helper.make_node("Det", ["x"], ["y"], name="det")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    assert "node 'det' (onnx.Det): determinants of 5x5 matrices are not supported" in check_model(model).error
