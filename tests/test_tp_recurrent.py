"""Recurrent layers and weights read many times, across devices (issue 52):
an LSTM, GRU or RNN node split by hidden units (each device its block of
every gate, the hidden state all-gathered once a step), and a weight read by
many Linears (an exporter's unrolled recurrence) stored once a device."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model, matched_plan, value_info
from onnx import TensorProto, helper, numpy_helper

from forge_opt.plan.graph_infos import Plan

MODELS = Path(__file__).parent / "data" / "models"
STEPS = 6


def _weight_bytes(model: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def _held(plan: Plan, model: onnx.ModelProto) -> float:
    """The largest share of the model's weights one device stores."""
    return max(d.parameter_bytes for d in plan.devices) / _weight_bytes(model)


def recurrent_node(op: str, direction: str, hidden: int = 32, size: int = 16, **attrs) -> onnx.ModelProto:
    gates = {"GRU": 3, "LSTM": 4, "RNN": 1}[op]
    dirs = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in (
        ("W", (dirs, gates * hidden, size)), ("R", (dirs, gates * hidden, hidden)), ("B", (dirs, 2 * gates * hidden)))]
    node = helper.make_node(op, ["x", "W", "R", "B"], ["y"], hidden_size=hidden, direction=direction, name=op,
                            **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [STEPS, 1, size])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [STEPS, dirs, 1, hidden])], weights)


@pytest.mark.parametrize("op", ["GRU", "LSTM", "RNN"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_a_recurrent_layer_is_split_by_hidden_units(op, direction):
    """Each device holds its block of every gate (of W, R and B) and runs the
    cell on its hidden units. A step costs one collective of the hidden
    state (an all-gather; an RNN's one gate, unpacked, takes R by rows and a
    reduce-scatter); a GRU's candidate reads r * h, which costs one more.
    (Before issue 52 a bias broke the IR; then each step gathered both
    projections.)"""
    model = recurrent_node(op, direction)
    plan = matched_plan(model, 2)
    assert _held(plan, model) <= 0.5 + 0.05  # (+ the first step's gates, folded from the zero initial state)
    dirs = 2 if direction == "bidirectional" else 1
    per_step = 2 if op == "GRU" else 1
    assert len(plan.collectives) <= dirs * STEPS * per_step + 1
    assert not any("two layouts" in layer.reason for layer in plan.layers)


def test_a_gru_with_the_reset_after_the_product_costs_one_gather_a_step():
    """linear_before_reset=1 (PyTorch's and Keras's GRU): one projection of h
    for all three gates, so one all-gather a step, as an LSTM."""
    model = recurrent_node("GRU", "forward", linear_before_reset=1)
    plan = matched_plan(model, 2)
    assert Counter(c.op for c in plan.collectives) == {"all_gather": STEPS}


def unrolled_recurrence(steps: int = 20, width: int = 64) -> onnx.ModelProto:
    """h(t+1) = tanh(x(t) W + h(t) R), unrolled as exporters write a loop:
    one initializer R read by `steps` MatMuls, each step's input replicated
    or split by the step before."""
    rng = np.random.default_rng(1)
    nodes, h = [helper.make_node("Identity", ["x0"], ["h0"])], "h0"
    for t in range(steps):
        nodes += [helper.make_node("MatMul", [f"x{t}", "W"], [f"a{t}"], name=f"input{t}"),
                  helper.make_node("MatMul", [h, "R"], [f"b{t}"], name=f"recurrence{t}"),
                  helper.make_node("Add", [f"a{t}", f"b{t}"], [f"c{t}"]),
                  helper.make_node("Tanh", [f"c{t}"], [f"h{t + 1}"])]
        h = f"h{t + 1}"
    nodes.append(helper.make_node("Identity", [h], ["y"]))
    weights = [numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), n)
               for n in ("W", "R")]
    return make_model(nodes, [value_info(f"x{t}", [2, width]) for t in range(steps)], [value_info("y", [2, width])],
                      weights)


@pytest.mark.parametrize("devices", [2, 4])
def test_a_weight_read_by_many_linears_is_stored_once_a_device(devices):
    """R's readers would alternate between column (the first, its input
    replicated) and row (the others, their input split by the step before);
    all take the case most take, so a device holds 1/P of R, not a column
    and a row block."""
    model = unrolled_recurrence()
    plan = matched_plan(model, devices)
    assert _held(plan, model) <= 1 / devices + 0.1
    assert {layer.case for layer in plan.layers if "recurrence" in layer.node} == {"row"}
    first = next(layer for layer in plan.layers if layer.node.endswith("recurrence0"))
    assert first.reason == "its weight is row-split for all its readers: its input sliced"
    assert len(plan.collectives) <= 20 + 1


def test_a_reader_that_cannot_follow_says_the_weight_is_stored_twice(tmp_path):
    """A plan pinning one reader by columns: that reader's weight block is
    stored beside the others' row block, and its reason says so."""
    pins = tmp_path / "plan.json"
    pins.write_text(json.dumps({"layers": {"recurrence3": {"axis": 1}}}))
    plan = matched_plan(unrolled_recurrence(steps=6), 2, plan=str(pins))
    pinned = next(layer for layer in plan.layers if layer.node.endswith("recurrence3"))
    assert pinned.case == "column"
    assert "its weight is also stored row-split for recurrence0 (two layouts a device)" in pinned.reason


def test_a_block_too_large_to_compare_is_still_stored_once():
    """Blocks over 1 MiB are not compared by content when written; every
    step's reader of R takes the same slice of it, which `merge-equal-ops`
    makes one (it was a 2 MiB parameter a step on each device: a 54 MB CRNN
    stored 119 MB a device)."""
    model = recurrent_node("LSTM", "forward", hidden=384)  # R's column block: [384, 768] float32, 1.1 MiB
    plan = matched_plan(model, 2)
    assert _held(plan, model) <= 0.5 + 0.05


@pytest.mark.parametrize("name", ["rnn_crnn_bilstm", "rnn_gru_tagger", "rnn_lstm_cell_unrolled"])
@pytest.mark.parametrize("devices", [2, 4])
def test_pytorch_recurrent_exports_hold_their_share(name, devices):
    """PyTorch's exports (`make_recurrent.py`): a CRNN's 2-layer BiLSTM, a
    tagger's BiGRU, an LSTMCell unrolled into Gemms over shared weights.
    Each matches, each device holds 1/P of the weights (+0.1), and a step
    costs one all-gather."""
    path = MODELS / f"{name}.onnx"
    model = onnx.load(path)
    plan = matched_plan(path, devices)
    assert _held(plan, model) <= 1 / devices + 0.1
    steps = {"rnn_crnn_bilstm": 2 * 2 * 32, "rnn_gru_tagger": 2 * 24, "rnn_lstm_cell_unrolled": 16}[name]
    assert len(plan.collectives) <= steps + 3


@pytest.mark.parametrize("devices", [2, 4])
def test_a_transformer_sharing_its_layers_weights_stores_them_once(devices):
    """ALBERT reads one layer's weights 4 times. Megatron's pairing would
    take its first layer's Q, K and V by rows (their input comes split from
    the embedding's mapping) and the others' by columns: two blocks of each.
    Every reader takes the case most take, so each weight is one block a
    device, and the first layer pays one all-gather for it: 2 collectives a
    layer, the embedding's all-reduce, that gather and the pooler's."""
    path = MODELS / "shared_albert.onnx"
    plan = matched_plan(path, devices)
    assert _held(plan, onnx.load(path)) <= 1 / devices + 0.1
    assert not any("two layouts" in layer.reason for layer in plan.layers)
    assert len(plan.collectives) <= 2 * 4 + 3


def test_gates_the_devices_do_not_divide_stay_whole_and_say_so():
    """At P=3 the tagger's GRU gates (64 units) do not divide: its
    projections stay whole on every device, with the reason in the report
    (this was an error naming the node)."""
    plan = matched_plan(MODELS / "rnn_gru_tagger.onnx", 3)
    gru = [layer for layer in plan.layers if layer.node == "/rnn/GRU"]
    assert gru and {layer.case for layer in gru} == {"replicated"}
    assert all(layer.reason == "its parts of [64, 64, 64] columns do not all divide by 3 devices" for layer in gru)
