"""LSTM, GRU and RNN unrolled (transforms/onnx_lowerings/recurrent.py), in the
models that use them: a speech-style front end (STFT as a Conv1d over a
reflect-padded signal, then an LSTM, then a classifier) and a CRNN-style
OCR recogniser (CNN, then a bidirectional GRU or LSTM)."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from model_helpers import assert_matches, make_model
from model_helpers import value_info as _vi
from onnx import helper, numpy_helper

from forge_opt import check_model
from forge_opt.check import MATCH

_model = partial(make_model, opset=17)


def _weights(rng, **shapes):
    return [numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n) for n, s in shapes.items()]


def test_speech_front_end_then_lstm():
    """(1, 1, 400) samples → reflect pad → Conv1d of 32 filters of 128,
    stride 64 (the STFT's frames) → (frames, 1, 32) → LSTM(24) → classifier."""
    rng = np.random.default_rng(0)
    n = helper.make_node
    nodes = [
        n("Pad", ["signal", "pads"], ["padded"], mode="reflect"),
        n("Conv", ["padded", "filters"], ["spec"], strides=[64]),
        n("Transpose", ["spec"], ["frames"], perm=[2, 0, 1]),
        n("LSTM", ["frames", "W", "R", "B"], ["Y", "Y_h"], hidden_size=24, name="lstm"),
        n("Squeeze", ["Y_h", "zero"], ["last"]),
        n("MatMul", ["last", "head"], ["logits"]),
    ]
    inits = _weights(rng, filters=(32, 1, 128), W=(1, 96, 32), R=(1, 96, 24), B=(1, 192), head=(24, 5))
    inits += [numpy_helper.from_array(np.array([0, 0, 64, 0, 0, 64], np.int64), "pads"),
              numpy_helper.from_array(np.array([0], np.int64), "zero")]
    assert_matches(_model(nodes, [_vi("signal", [1, 1, 400])], [_vi("logits", [1, 5])], inits))


@pytest.mark.parametrize("recurrent", ["GRU", "LSTM"])
def test_crnn_recogniser_with_a_bidirectional_recurrence(recurrent):
    """(1, 1, 16, 32) image → Conv/Relu/MaxPool → columns as a sequence of
    16 steps of 64 features → bidirectional recurrence(16) → per-step classes."""
    rng = np.random.default_rng(1)
    gates = 3 if recurrent == "GRU" else 4
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "kernel"], ["features"], pads=[1, 1, 1, 1]),
        n("Relu", ["features"], ["active"]),
        n("MaxPool", ["active"], ["pooled"], kernel_shape=[2, 2], strides=[2, 2]),  # (1, 8, 8, 16)
        n("Reshape", ["pooled", "by_column"], ["columns"]),  # (1, 64, 16)
        n("Transpose", ["columns"], ["sequence"], perm=[2, 0, 1]),  # (16, 1, 64)
        n(recurrent, ["sequence", "W", "R", "B"], ["Y"], hidden_size=16, direction="bidirectional", name="rnn"),
        n("Transpose", ["Y"], ["steps"], perm=[0, 2, 1, 3]),  # (16, 1, 2, 16)
        n("Reshape", ["steps", "flat"], ["per_step"]),  # (16, 32)
        n("MatMul", ["per_step", "classes"], ["logits"]),
    ]
    inits = _weights(rng, kernel=(8, 1, 3, 3), W=(2, gates * 16, 64), R=(2, gates * 16, 16), B=(2, 2 * gates * 16),
                     classes=(32, 11))
    inits += [numpy_helper.from_array(np.array([1, 64, 16], np.int64), "by_column"),
              numpy_helper.from_array(np.array([16, 32], np.int64), "flat")]
    assert_matches(_model(nodes, [_vi("image", [1, 1, 16, 32])], [_vi("logits", [16, 11])], inits))


@pytest.mark.parametrize("clip", [None, 0.5])
def test_lstm_with_peepholes_initial_state_and_clip(clip):
    rng = np.random.default_rng(2)
    attrs = {"hidden_size": 4, **({"clip": clip} if clip else {})}
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0", "P"], ["Y", "Y_h", "Y_c"], **attrs)
    inits = _weights(rng, W=(1, 16, 3), R=(1, 16, 4), B=(1, 32), h0=(1, 2, 4), c0=(1, 2, 4), P=(1, 12))
    outputs = [_vi("Y", [5, 1, 2, 4]), _vi("Y_h", [1, 2, 4]), _vi("Y_c", [1, 2, 4])]
    assert_matches(_model([node], [_vi("x", [5, 2, 3])], outputs, inits))


def test_unsupported_recurrence_settings_are_named():
    node = helper.make_node("RNN", ["x", "W", "R"], ["Y"], hidden_size=4, activations=["Softsign"], name="rnn")
    rng = np.random.default_rng(3)
    model = _model([node], [_vi("x", [5, 2, 3])], [_vi("Y", None)], _weights(rng, W=(1, 4, 3), R=(1, 4, 4)))
    report = check_model(model)
    assert "node 'rnn' (onnx.RNN): the activation 'Softsign' is not supported" in (report.error or "")


def test_a_model_onnxruntime_cannot_run_is_checked_against_onnx_reference():
    """onnxruntime has no batch-first (layout=1) LSTM; forge-check then says
    it compared with ONNX's reference implementation."""
    rng = np.random.default_rng(4)
    node = helper.make_node("LSTM", ["x", "W", "R"], ["Y"], hidden_size=4, layout=1)
    model = _model([node], [_vi("x", [2, 5, 3])], [_vi("Y", [2, 5, 1, 4])], _weights(rng, W=(1, 16, 3), R=(1, 16, 4)))
    report = check_model(model)
    assert report.status == MATCH, report.error or report.format()
    assert report.oracle == "onnx.reference" and "Batchwise recurrent operations" in report.oracle_note
    assert "oracle: onnx.reference (onnxruntime cannot run the model" in report.format()
