"""Ops defined by a function body in their ONNX schema and without a
lowering of their own compile as that body (frontends/onnx_functions.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from forge_opt import check_model, import_onnx
from forge_opt.check import MATCH
from forge_opt.frontends.onnx_functions import expandable


def _model(nodes, inputs, outputs, initializers=(), opset=23) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _compiles_as_its_body(model: onnx.ModelProto, op: str) -> None:
    assert f"onnx.{op}" not in str(import_onnx(model))
    report = check_model(model)
    assert report.status == MATCH, report.error or report.format()


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_attention_with_grouped_heads(causal, kv_heads):
    q = _vi("q", [1, 4, 5, 8])
    kv = [_vi(n, [1, kv_heads, 5, 8]) for n in ("k", "v")]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", is_causal=causal)
    _compiles_as_its_body(_model([node], [q, *kv], [_vi("y", None)]), "Attention")


def test_rotary_embedding_with_position_ids():
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], name="rope")
    rng = np.random.default_rng(0)
    caches = [numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float32), n) for n in ("cos", "sin")]
    pos = numpy_helper.from_array(np.array([[0, 3, 7]], np.int64), "pos")
    model = _model([node], [_vi("x", [1, 2, 3, 8])], [_vi("y", None)], [*caches, pos])
    _compiles_as_its_body(model, "RotaryEmbedding")


@pytest.mark.parametrize("periodic", [None, 0])
def test_attribute_references_take_the_nodes_value_or_the_schemas_default(periodic):
    attrs = {} if periodic is None else {"periodic": periodic}
    nodes = [helper.make_node("HannWindow", ["size"], ["w"], name="window", **attrs),
             helper.make_node("Mul", ["x", "w"], ["y"])]
    size = numpy_helper.from_array(np.array(6, np.int64), "size")
    _compiles_as_its_body(_model(nodes, [_vi("x", [6])], [_vi("y", [6])], [size], opset=17), "HannWindow")


def test_only_ops_without_a_lowering_are_expanded():
    assert expandable("Attention", 23) and expandable("CenterCropPad", 18)
    assert not expandable("LayerNormalization", 17)  # has a function body and a lowering of its own
    assert not expandable("Bernoulli", 22)  # random: keeps its own diagnostic
    assert not expandable("Relu", 14)  # no function body
