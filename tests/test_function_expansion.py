"""Ops defined by a function body in their ONNX schema and without a
lowering of their own compile as that body (frontends/onnx/functions.py)."""

from __future__ import annotations

from functools import partial

import numpy as np
import onnx
import pytest
from model_helpers import make_model
from model_helpers import value_info as _vi
from onnx import helper, numpy_helper

from forge_opt import check_model, import_onnx
from forge_opt.check import MATCH
from forge_opt.frontends.onnx.functions import expandable
from forge_opt.tools import gen_lowered_ops

_model = partial(make_model, opset=23)


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


@pytest.mark.parametrize("opset", [11, 13, 18, 21])
def test_a_body_written_for_an_older_opset_is_converted(opset):
    """DynamicQuantizeLinear's body is opset 11's (ReduceMin with axes as an
    attribute, ...): at newer opsets ONNX's version converter rewrites it."""
    from onnx import TensorProto

    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "scale", "zero"], name="dql")
    outputs = [_vi("y", [2, 8], TensorProto.UINT8), _vi("scale", [], TensorProto.FLOAT),
               _vi("zero", [], TensorProto.UINT8)]
    _compiles_as_its_body(_model([node], [_vi("x", [2, 8])], outputs, opset=opset), "DynamicQuantizeLinear")


def test_only_ops_without_a_lowering_are_expanded():
    assert expandable("Attention", 23) and expandable("CenterCropPad", 18)
    assert not expandable("LayerNormalization", 17)  # has a function body and a lowering of its own
    assert not expandable("Bernoulli", 22)  # random: keeps its own diagnostic
    assert not expandable("Relu", 14)  # no function body


def llama_block() -> onnx.ModelProto:
    """A LLaMA-style decoder block at opset 23: RMSNormalization,
    RotaryEmbedding on 3-D projections, grouped-query causal Attention (4
    query heads, 2 key/value heads), a SwiGLU MLP. (benchmarks/op_counts.py
    counts its Forge calls too.)"""
    rng = np.random.default_rng(0)

    def weight(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    n = helper.make_node
    nodes = [
        n("RMSNormalization", ["x", "g1"], ["n1"], axis=-1, epsilon=1e-5),
        n("MatMul", ["n1", "wq"], ["q"]), n("MatMul", ["n1", "wk"], ["k"]), n("MatMul", ["n1", "wv"], ["v"]),
        n("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["q_rot"], num_heads=4),
        n("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["k_rot"], num_heads=2),
        n("Attention", ["q_rot", "k_rot", "v"], ["attn"], q_num_heads=4, kv_num_heads=2, is_causal=1, name="attn"),
        n("MatMul", ["attn", "wo"], ["o"]), n("Add", ["x", "o"], ["r1"]),
        n("RMSNormalization", ["r1", "g2"], ["n2"], axis=-1, epsilon=1e-5),
        n("MatMul", ["n2", "wg"], ["gate"]), n("MatMul", ["n2", "wu"], ["up"]),
        n("Sigmoid", ["gate"], ["sig"]), n("Mul", ["gate", "sig"], ["silu"]), n("Mul", ["silu", "up"], ["h"]),
        n("MatMul", ["h", "wd"], ["down"]), n("Add", ["r1", "down"], ["y"]),
    ]
    angles = np.arange(16)[:, None] / 10000 ** (np.arange(4)[None, :] / 4)
    inits = [
        numpy_helper.from_array(np.ones(32, np.float32), "g1"), numpy_helper.from_array(np.ones(32, np.float32), "g2"),
        weight("wq", 32, 32), weight("wk", 32, 16), weight("wv", 32, 16), weight("wo", 32, 32),
        weight("wg", 32, 64), weight("wu", 32, 64), weight("wd", 64, 32),
        numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
        numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin"),
        numpy_helper.from_array(np.arange(6, dtype=np.int64)[None, :], "pos"),
    ]
    return _model(nodes, [_vi("x", [1, 6, 32])], [_vi("y", [1, 6, 32])], inits)


def test_a_llama_style_decoder_block_at_opset_23():
    _compiles_as_its_body(llama_block(), "Attention")


def test_the_table_of_lowered_ops_is_current():
    assert gen_lowered_ops.main(["--check"]) == 0, "run python -m forge_opt.tools.gen_lowered_ops"
