"""ONNX Split to Forge Index, end to end: every Split backend case and the
older opset forms compile to Forge Python that computes exactly what
onnxruntime computes, and every pass preserves the module's numbers."""

import re
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from forge_opt.api import make_context
from forge_opt.check import MATCH, check_model
from forge_opt.frontends.onnx import freeze_inputs, import_model
from forge_opt.interpreters.run import run_module
from forge_opt.transforms.lower_split import LowerSplitPass
from forge_opt.transforms.onnx_to_tir import OnnxToTirPass
from forge_opt.transforms.tir_to_forge import TirToForgePass


def _split_cases():
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return [c for c in cases if c.name.startswith("test_split") and "sequence" not in c.name]


SPLIT_CASES = _split_cases()


def _feeds(case):
    inputs, outputs = case.data_sets[0]
    names = [i.name for i in case.model.graph.input]
    return dict(zip(names, inputs)), outputs


def test_sixteen_split_cases():
    assert len(SPLIT_CASES) == 16


@pytest.mark.parametrize("case", SPLIT_CASES, ids=[c.name for c in SPLIT_CASES])
def test_backend_split_case(case):
    feeds, expected = _feeds(case)
    # `split` is data in the test; Forge needs it static, so it is compiled as a constant.
    freeze = tuple(n for n in feeds if n == "split")
    report = check_model(case.model, feeds, rtol=0, atol=0, freeze=freeze)
    assert report.status == MATCH, report.format() + report.error
    assert set(re.findall(r"forge\.op\.(\w+)\(", report.forge_python)) <= {"Index"}
    forwarded = report.forge_python.count("forge.op.Index") == 0
    if forwarded:  # only possible when every piece covers the whole axis
        assert all(o.shape == tuple(feeds["input"].shape) for o in report.outputs)
    # and the ONNX reference outputs the case ships agree too (empty pieces
    # are constants: the emitted module needs its constants file)
    from forge_opt.execution.engine import compile_model, run_compiled

    frozen = freeze_inputs(case.model, {n: feeds[n] for n in freeze}) if freeze else case.model
    compiled = compile_model(frozen)
    actual = run_compiled(compiled, [v for k, v in feeds.items() if k not in freeze])
    for want, got in zip(expected, actual):
        np.testing.assert_array_equal(got, want)


def _legacy_split_model(opset: int, axis: int, split: list[int], shape: list[int]):
    outs = [f"y{i}" for i in range(len(split))]
    out_shapes = []
    for s in split:
        o = list(shape)
        o[axis] = s
        out_shapes.append(o)
    node = helper.make_node("Split", ["x"], outs, name="split", axis=axis, split=split)
    graph = helper.make_graph(
        [node],
        f"split{opset}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in zip(outs, out_shapes)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize(
    "opset, axis, split, shape",
    [(2, 1, [1, 3], [6, 4]), (11, -1, [2, 1, 1], [3, 4]), (11, 0, [0, 6], [6, 2])],
    ids=["split-2", "split-11-negative-axis", "split-11-zero-size"],
)
def test_legacy_split_opsets(opset, axis, split, shape):
    model = _legacy_split_model(opset, axis, split, shape)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    report = check_model(model, {"x": x}, rtol=0, atol=0)
    assert report.status == MATCH, report.format() + report.error
    assert "forge.op.Index" in report.forge_python


def _stages():
    return [OnnxToTirPass(), LowerSplitPass(), TirToForgePass()]


@pytest.mark.parametrize("case", SPLIT_CASES, ids=[c.name for c in SPLIT_CASES])
def test_every_pass_preserves_numbers(case):
    feeds, expected = _feeds(case)
    model = freeze_inputs(case.model, {"split": feeds.pop("split")}) if "split" in feeds else case.model
    module = import_model(model)
    inputs = list(feeds.values())
    before = run_module(module, inputs)
    for want, got in zip(expected, before):
        np.testing.assert_array_equal(got, want)
    ctx = make_context()
    for p in _stages():
        p.apply(ctx, module)
        module.verify()
        after = run_module(module, inputs)
        for b, a in zip(before, after):
            np.testing.assert_array_equal(a, b, err_msg=f"after {p.name}")
