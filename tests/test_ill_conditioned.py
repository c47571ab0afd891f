"""Ill-conditioned outputs (`check/conditioning.py`): an output that differs
only where onnxruntime does not reproduce itself under rounding-level
changes gets no verdict (exit 3, never 0); a real error beside it is still a
mismatch. The program is a stub strategy whose outputs are onnxruntime's on
inputs moved by a rounding step: what a correct program that rounds
otherwise returns."""

from __future__ import annotations

import numpy as np
import onnx
from model_helpers import RoundsOtherwise, make_model, value_info
from onnx import TensorProto, helper

from forge_opt.check.options import CheckOptions
from forge_opt.check.report import ILL_CONDITIONED, MATCH, MISMATCH
from forge_opt.check.run import run_check
from forge_opt.execution.oracle import onnxruntime_outputs


def _topk_beside_a_product() -> onnx.ModelProto:
    nodes = [helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="topk"),
             helper.make_node("Mul", ["x", "two"], ["doubled"], name="double")]
    return make_model(
        nodes, [value_info("x", [1, 64])],
        [value_info("values", [1, 3]), value_info("indices", [1, 3], TensorProto.INT64),
         value_info("doubled", [1, 64])],
        [onnx.numpy_helper.from_array(np.array([3], np.int64), "k"),
         onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )


def _ties(spread: int) -> dict[str, np.ndarray]:
    """64 values within `spread` units in the last place of 1.0, shuffled."""
    steps = np.random.default_rng(3).permutation(64) % (spread + 1)
    return {"x": (np.float32(1.0) + steps.astype(np.float32) * np.spacing(np.float32(1.0)))[None, :]}


def test_a_top_k_among_ties_is_ill_conditioned_not_a_match_or_a_mismatch():
    report = run_check(_topk_beside_a_product(), CheckOptions(_ties(2)), RoundsOtherwise())
    assert report.status == ILL_CONDITIONED, report.format()
    assert set(report.ill_conditioned) == {"indices"}
    text = report.format()
    assert "ill-conditioned at these inputs: 'indices': 3 of 3 positions differ, each where onnxruntime on the " \
           "float inputs moved" in text
    assert "no verdict on them (exit 3)" in text


def test_a_real_error_beside_a_tie_is_still_a_mismatch():
    report = run_check(_topk_beside_a_product(), CheckOptions(_ties(2)), RoundsOtherwise({"doubled": 0.5}))
    assert report.status == MISMATCH, report.format()
    assert "indices" in report.ill_conditioned and "doubled" not in report.ill_conditioned


def test_well_separated_values_leave_nothing_to_doubt():
    x = {"x": np.linspace(0, 63, 64, dtype=np.float32)[None, :]}
    assert run_check(_topk_beside_a_product(), CheckOptions(x), RoundsOtherwise()).status == MATCH
    report = run_check(_topk_beside_a_product(), CheckOptions(x), RoundsOtherwise({"indices": 1}))
    assert report.status == MISMATCH and not report.ill_conditioned, report.format()


def test_a_splits_device_sub_models_are_verified_on_their_own_inputs(tmp_path):
    """What --fallback verifies of an ill-conditioned model: each device
    sub-model against onnxruntime on the inputs the run gave it."""
    from forge_opt.check.split import Fallback
    from forge_opt.split.api import convert, run_split, split_model

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("NonZero", ["r"], ["nz"], name="nonzero")]
    model = make_model(nodes, [value_info("x", [4, 4])], [value_info("nz", None, TensorProto.INT64)])
    split_model(model, tmp_path / "split")
    convert(tmp_path / "split")
    x = {"x": np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)}
    record: list = []
    run_split(tmp_path / "split", x, record=record)
    cpu = run_split(tmp_path / "split", x, mode="cpu")
    oracle = dict(zip(["nz"], onnxruntime_outputs(model, None, x)))
    problems, verified = Fallback(CheckOptions()).verify(record, cpu, oracle)
    assert problems == [] and verified.startswith("each of the 1 device sub-model matches onnxruntime on the inputs")
    wrong = {"nz": oracle["nz"][:, 1:]}  # a split that lost a tensor on the way: no rounding explains it
    problems, _ = Fallback(CheckOptions()).verify(record, cpu, wrong)
    assert problems == ["the split run on onnxruntime alone differs from the model at output 'nz': a partitioning "
                        "error"]


def test_an_argmax_is_excused_only_among_near_ties():
    """An ArgMax that chose another index than onnxruntime is
    ill-conditioned at a row where the value it chose is within 4 units in
    the last place of the largest, and at no other row."""
    from forge_opt.check.ties import near_tied_rows

    model = make_model([helper.make_node("ArgMax", ["x"], ["i"], axis=-1, keepdims=0)], [value_info("x", [3, 3])],
                       [value_info("i", [3], TensorProto.INT64)], opset=17)
    one = np.float32(1.0)
    x = np.array([[one, one + np.spacing(one), 0.5], [0.1, 0.9, 0.2], [2.0, 2.0, 2.0]], np.float32)
    want = np.array([1, 1, 0])
    rows = near_tied_rows(model, None, {"x": x}, "i", want, np.array([0, 2, 2]))
    assert rows is not None and rows.tolist() == [True, False, True]
