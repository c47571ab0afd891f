"""fuse-patterns: each exporter decomposition becomes the one op Forge has,
the module still computes what onnxruntime does, and a near miss (another
constant, another axis, a value used elsewhere) is left alone."""

from __future__ import annotations

import math

import numpy as np
import pytest
from model_helpers import assert_matches, make_model, value_info
from onnx import helper, numpy_helper

from forge_opt import compile_onnx

n = helper.make_node
RNG = np.random.default_rng(0)


def _c(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _tir_ops(model) -> list[str]:
    module = compile_onnx(model, pipeline="onnx-to-tir,fuse-patterns")
    return [op.name + (f" {op.fn.data}" if hasattr(op, "fn") else "") for op in module.walk()]


def _check(model, x_shape, must: list[str], gone: list[str]):
    ops = _tir_ops(model)
    for name in must:
        assert name in ops, (name, ops)
    for name in gone:
        assert name not in ops, (name, ops)
    assert_matches(model, {"x": RNG.standard_normal(x_shape).astype(np.float32)})


def gelu_tanh(k=0.044715):
    nodes = [
        n("Mul", ["x", "half"], ["a"]), n("Pow", ["x", "three"], ["p"]), n("Mul", ["p", "k"], ["pk"]),
        n("Add", ["x", "pk"], ["s"]), n("Mul", ["s", "c"], ["sc"]), n("Tanh", ["sc"], ["t"]),
        n("Add", ["t", "one"], ["t1"]), n("Mul", ["a", "t1"], ["y"]),
    ]
    inits = [_c("half", 0.5), _c("three", 3.0), _c("k", k), _c("c", math.sqrt(2 / math.pi)), _c("one", 1.0)]
    return make_model(nodes, [value_info("x", [4, 8])], [value_info("y", [4, 8])], inits)


def test_gelu_tanh_form():
    _check(gelu_tanh(), [4, 8], ["tir.unary gelu_tanh"], ["tir.unary tanh"])


def test_a_gelu_with_another_constant_is_not_gelu():
    assert "tir.unary gelu_tanh" not in _tir_ops(gelu_tanh(k=0.05))


@pytest.mark.parametrize("order", ["x_first", "half_inside"])
def test_gelu_erf_form(order):
    if order == "x_first":  # (x·(1 + erf(x/√2)))·0.5
        tail = [n("Mul", ["x", "e1"], ["g"]), n("Mul", ["g", "half"], ["y"])]
    else:  # x·((1 + erf(x/√2))·0.5)
        tail = [n("Mul", ["e1", "half"], ["g"]), n("Mul", ["x", "g"], ["y"])]
    nodes = [n("Div", ["x", "sqrt2"], ["s"]), n("Erf", ["s"], ["e"]), n("Add", ["e", "one"], ["e1"]), *tail]
    model = make_model(nodes, [value_info("x", [4, 8])], [value_info("y", [4, 8])],
                       [_c("sqrt2", math.sqrt(2)), _c("one", 1.0), _c("half", 0.5)])
    _check(model, [4, 8], ["tir.unary gelu"], ["tir.unary erf"])


def layernorm(axes=(-1,)):
    nodes = [
        n("ReduceMean", ["x", "axes"], ["m"]), n("Sub", ["x", "m"], ["d"]), n("Pow", ["d", "two"], ["d2"]),
        n("ReduceMean", ["d2", "axes"], ["v"]), n("Add", ["v", "eps"], ["ve"]), n("Sqrt", ["ve"], ["sd"]),
        n("Div", ["d", "sd"], ["nm"]), n("Mul", ["nm", "g"], ["ng"]), n("Add", ["ng", "b"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(axes, np.int64), "axes"), _c("two", 2.0), _c("eps", 1e-5),
             _c("g", RNG.uniform(0.5, 1.5, 8)), _c("b", RNG.standard_normal(8))]
    return make_model(nodes, [value_info("x", [2, 4, 8])], [value_info("y", [2, 4, 8])], inits)


def test_layernorm_written_out():
    _check(layernorm(), [2, 4, 8], ["tir.layernorm"], ["tir.reduce"])


def test_a_normalisation_over_another_axis_stays_written_out():
    model = layernorm(axes=(1,))
    model.graph.initializer[3].CopyFrom(_c("g", np.ones((4, 1))))
    model.graph.initializer[4].CopyFrom(_c("b", np.zeros((4, 1))))
    assert "tir.layernorm" not in _tir_ops(model)


def _conv(tail_nodes, inits):
    nodes = [n("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]), *tail_nodes]
    inits = [_c("w", RNG.standard_normal((4, 3, 3, 3)) * 0.3), _c("cb", RNG.standard_normal(4)), *inits]
    return make_model(nodes, [value_info("x", [1, 3, 6, 6])], [value_info("y", [1, 4, 6, 6])], inits)


def test_batchnorm_folds_into_the_conv():
    model = _conv([n("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], epsilon=1e-3)],
                  [_c("s", RNG.uniform(0.5, 2, 4)), _c("b", RNG.standard_normal(4)),
                   _c("m", RNG.standard_normal(4)), _c("v", RNG.uniform(0.5, 2, 4))])
    _check(model, [1, 3, 6, 6], ["tir.conv2d"], ["tir.batchnorm"])


def test_a_per_channel_scale_and_shift_fold_into_the_conv():
    model = _conv([n("Mul", ["c", "s"], ["cs"]), n("Add", ["cs", "b"], ["y"])],
                  [_c("s", RNG.uniform(0.5, 2, (4, 1, 1))), _c("b", RNG.standard_normal((1, 4, 1, 1)))])
    _check(model, [1, 3, 6, 6], ["tir.conv2d"], ["tir.binary mul", "tir.binary add"])


def test_a_conv_used_twice_keeps_its_batchnorm():
    model = _conv([n("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]), n("Add", ["bn", "c"], ["y"])],
                  [_c("s", np.ones(4)), _c("b", np.zeros(4)), _c("m", np.zeros(4)), _c("v", np.ones(4))])
    _check(model, [1, 3, 6, 6], ["tir.batchnorm"], [])


def test_a_scale_and_shift_of_anything_is_one_batchnorm():
    nodes = [n("Relu", ["x"], ["r"]), n("Mul", ["r", "s"], ["rs"]), n("Add", ["rs", "b"], ["y"])]
    model = make_model(nodes, [value_info("x", [1, 4, 3, 3])], [value_info("y", [1, 4, 3, 3])],
                       [_c("s", RNG.uniform(0.5, 2, (4, 1, 1))), _c("b", RNG.standard_normal((4, 1, 1)))])
    _check(model, [1, 4, 3, 3], ["tir.batchnorm"], ["tir.binary mul", "tir.binary add"])


def test_a_linear_is_one_matmul_with_its_bias_on_the_unflattened_input():
    nodes = [n("Reshape", ["x", "flat"], ["f"]), n("MatMul", ["f", "w"], ["m"]), n("Add", ["m", "b"], ["mb"]),
             n("Reshape", ["mb", "back"], ["y"])]
    model = make_model(nodes, [value_info("x", [2, 3, 8])], [value_info("y", [2, 3, 5])],
                       [numpy_helper.from_array(np.array([6, 8], np.int64), "flat"),
                        _c("w", RNG.standard_normal((8, 5))), _c("b", RNG.standard_normal(5)),
                        numpy_helper.from_array(np.array([2, 3, 5], np.int64), "back")])
    ops = _tir_ops(model)
    assert ops.count("tir.matmul") == 1 and "tir.reshape" not in ops and "tir.binary add" not in ops
    assert_matches(model, {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)})


def test_shape_ops_that_cancel():
    nodes = [n("Reshape", ["x", "s1"], ["a"]), n("Reshape", ["a", "s2"], ["b"]),
             n("Transpose", ["b"], ["c"], perm=[1, 0]), n("Transpose", ["c"], ["d"], perm=[1, 0]),
             n("Cast", ["d"], ["y"], to=1)]
    model = make_model(nodes, [value_info("x", [4, 6])], [value_info("y", [6, 4])],
                       [numpy_helper.from_array(np.array([24], np.int64), "s1"),
                        numpy_helper.from_array(np.array([6, 4], np.int64), "s2")])
    ops = _tir_ops(model)
    assert ops.count("tir.reshape") == 1 and "tir.transpose" not in ops and "tir.cast" not in ops
    assert_matches(model, {"x": RNG.standard_normal((4, 6)).astype(np.float32)})


def test_equal_branches_are_one_and_compute_the_same():
    """Two branches reading the input through equal Constant nodes are one
    Matmul and one Relu after merge-equal-ops, and the result matches
    onnxruntime; a weight (an initializer) is never merged by value."""
    w = RNG.standard_normal((8, 8)).astype(np.float32)
    const = [helper.make_node("Constant", [], [f"w{i}"], value=numpy_helper.from_array(w)) for i in (0, 1)]
    nodes = [*const, n("MatMul", ["x", "w0"], ["a"]), n("MatMul", ["x", "w1"], ["b"]), n("Relu", ["a"], ["ra"]),
             n("Relu", ["b"], ["rb"]), n("Add", ["ra", "rb"], ["y"]), n("MatMul", ["x", "u0"], ["c"]),
             n("MatMul", ["x", "u1"], ["d"]), n("Add", ["c", "d"], ["z"])]
    model = make_model(nodes, [value_info("x", [4, 8])], [value_info("y", [4, 8]), value_info("z", [4, 8])],
                       [numpy_helper.from_array(w, "u0"), numpy_helper.from_array(w, "u1")])
    module = compile_onnx(model, pipeline="onnx-to-tir,fuse-patterns,merge-equal-ops")
    ops = [op.name for op in module.walk()]
    assert ops.count("tir.matmul") == 3 and ops.count("tir.unary") == 1
    assert_matches(model, {"x": RNG.standard_normal((4, 8)).astype(np.float32)})
