"""A rounding step at a near-tie (`check/ties.RoundingFlipped`): a value a
device computes one unit in the last place off becomes a whole
quantization step where `x / scale` lies at a half, which onnxruntime's
own run could have rounded either way. Such a step is no verdict (exit 3),
a step anywhere else is a mismatch. Found on the dynamically quantized
CRNN ddddocr ships (`common_old.onnx`): with --fallback one device
sub-model was a step apart from onnxruntime at 7 of 73,728 values, each
where its SiLU, one unit in the last place from onnxruntime's, met
x / scale = 2.5, and the check said mismatch."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from model_helpers import make_model, value_info
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check.options import CheckOptions
from forge_opt.check.report import ILL_CONDITIONED, MATCH, MISMATCH
from forge_opt.check.run import Ran, run_check
from forge_opt.check.ties import ROUNDING_FLIPPED, RoundingFlipped
from forge_opt.execution.oracle import onnxruntime_outputs

SCALE = np.float32(1 / 64)  # a power of two: x / scale is exact, and so are its ties
TIES = [3, 17, 40]  # the positions of x at a half of the scale


def _x() -> np.ndarray:
    """x / SCALE: integers within uint8's range around 128, halves at TIES."""
    steps = np.random.default_rng(0).integers(-100, 100, 64).astype(np.float32)
    steps[TIES] += np.float32(0.5)
    steps[[5, 50]] += np.float32(0.3)  # near no boundary
    return (steps * SCALE)[None, :]


def _quantizer(node: onnx.NodeProto, out_type: int = TensorProto.UINT8) -> onnx.ModelProto:
    return make_model([helper.make_node("Mul", ["x", "one"], ["v"]), node], [value_info("x", [1, 64])],
                      [value_info("y", [1, 64], out_type)],
                      [numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                       numpy_helper.from_array(np.array(SCALE), "s"),
                       numpy_helper.from_array(np.array(128, np.uint8), "zp"),
                       numpy_helper.from_array(np.full(64, SCALE, np.float32), "s64"),
                       numpy_helper.from_array(np.full(64, 128, np.uint8), "zp64")])


QUANTIZE = helper.make_node("QuantizeLinear", ["v", "s", "zp"], ["y"])


class _Returns:
    """A check strategy for a program that returns onnxruntime's outputs
    with `steps` added at some positions of `y`."""

    mode = "a test's program"
    takes = frozenset()
    failed = "the test's program failed"
    forge_python = ""

    def __init__(self, steps: dict[int, int]):
        self.steps = steps

    def prepare(self, loaded):
        return loaded

    def module(self):
        return None

    def run(self, prepared, feeds, reference, folder):
        (y,) = onnxruntime_outputs(prepared.model, None, feeds)
        y = y.astype(np.int64)
        for position, step in self.steps.items():
            y[0, position] += step
        return Ran({"y": y.astype(np.uint8)})


def _other_side(x: np.ndarray) -> dict[int, int]:
    """The step at each tie that takes onnxruntime's rounding (half to even) to the other of its two results."""
    (y,) = onnxruntime_outputs(_quantizer(QUANTIZE), None, {"x": x})
    v = x[0] / SCALE
    return {p: 1 if v[p] > int(y[0, p]) - 128 else -1 for p in TIES}


def test_a_step_at_a_tie_is_ill_conditioned():
    x = _x()
    report = run_check(_quantizer(QUANTIZE), CheckOptions({"x": x}), _Returns(_other_side(x)))
    assert report.status == ILL_CONDITIONED, report.format()
    assert ROUNDING_FLIPPED in report.format()


@pytest.mark.parametrize("wrong", ["off a tie", "off a tie, below", "beside a tie", "two steps", "the wrong side"])
def test_a_step_anywhere_else_is_a_mismatch(wrong):
    x = _x()
    other = _other_side(x)
    steps = {"off a tie": {5: 1}, "off a tie, below": {50: -1}, "beside a tie": {3: other[3], 5: 1},
             "two steps": {17: 2 * other[17]}, "the wrong side": {40: -other[40]}}[wrong]
    report = run_check(_quantizer(QUANTIZE), CheckOptions({"x": x}), _Returns(steps))
    assert report.status == MISMATCH, report.format()


def test_the_right_program_matches():
    report = run_check(_quantizer(QUANTIZE), CheckOptions({"x": _x()}), _Returns({}))
    assert report.status == MATCH


def _flipped(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    want = onnxruntime_outputs(model, None, {"x": x})[0]
    other = RoundingFlipped(model, None, {"x": x}).outputs()
    assert other is not None
    return np.flatnonzero(want.astype(np.int64) != np.asarray(other[0]).astype(np.int64))


@pytest.mark.parametrize("node", [
    QUANTIZE,
    helper.make_node("QuantizeLinear", ["v", "s64", "zp64"], ["y"], axis=1),  # a scale per index of the axis
    helper.make_node("QuantizeLinear", ["v", "s"], ["y"]),  # no zero point: uint8 at 0
], ids=["per tensor", "per axis", "no zero point"])
def test_a_quantizer_is_rounded_otherwise_exactly_at_its_ties(node):
    x = _x()
    if len(node.input) == 2:
        x = np.abs(x)  # (uint8 from 0: negative values saturate)
    assert _flipped(_quantizer(node), x).tolist() == TIES


@pytest.mark.parametrize("op, at", [("Round", 0.5), ("Floor", 0.0), ("Ceil", 0.0)])
def test_round_floor_and_ceil_are_taken_to_the_other_side_at_their_boundaries(op, at):
    steps = np.arange(-32, 32).astype(np.float32) + np.float32(0.25)
    steps[TIES] = np.floor(steps[TIES]) + np.float32(at)
    model = make_model([helper.make_node(op, ["x"], ["y"])], [value_info("x", [1, 64])], [value_info("y", [1, 64])])
    assert _flipped(model, steps[None, :]).tolist() == TIES


def test_a_dynamic_quantizer_is_rounded_otherwise_at_its_ties():
    x = _x()
    x[0, 0], x[0, 1] = -128 * SCALE, 127 * SCALE  # its range: scale SCALE, zero point 128
    model = make_model([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])],
                       [value_info("x", [1, 64])],
                       [value_info("y", [1, 64], TensorProto.UINT8), value_info("ys", [], TensorProto.FLOAT),
                        value_info("yz", [], TensorProto.UINT8)])
    want = onnxruntime_outputs(model, None, {"x": x})
    assert want[1] == SCALE and want[2] == 128
    assert _flipped(model, x).tolist() == TIES
