"""Programs in the formats Tenstorrent hardware runs: bfloat16 values
(`data-format=bfloat16`, Forge's Float16_b) and block-float matmul weights
(`weight-format=bfp8_b|bfp4_b`, tt-mlir's experimental-weight-dtype), each
emulated exactly by the stand-in and judged by Forge's PCC rule against
float32 onnxruntime."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from model_helpers import make_model, value_info
from onnx import helper, numpy_helper

from forge_opt import check_model
from forge_opt.check.compare import compare_reduced
from forge_opt.check.report import MATCH, MISMATCH, NOT_COMPILED
from forge_opt.data_formats import FormatName, device_values
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import forge
from forge_opt.dialects.forge_functions import BY_NAME as FORGE_FUNCTIONS
from forge_opt.execution.engine import compile_model, run_compiled
from forge_opt.interpreters.forge_standin import CompilerConfig, ForgeCallError, MLIRConfig, weight_format_of

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(3)
BLOCK_FP8 = "onnx-to-forge{weight-format=bfp8_b}"


def linear(transposed: bool = True, k: int = 40, n: int = 24):
    """y = sigmoid(x W^T + b) as a PyTorch Linear exports it (Gemm, transB=1),
    or with W stored [k, n] (MatMul + Add)."""
    w = RNG.standard_normal((n, k) if transposed else (k, n)).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    mm = (helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1) if transposed
          else helper.make_node("MatMul", ["x", "w"], ["h0"]))
    nodes = [mm] if transposed else [mm, helper.make_node("Add", ["h0", "b"], ["h"])]
    nodes.append(helper.make_node("Sigmoid", ["h"], ["y"]))
    model = make_model(nodes, [value_info("x", [3, k])], [value_info("y", [3, n])],
                       [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return model, w, b


def _sigmoid(h):
    return 1 / (1 + np.exp(-h))


def test_a_bfloat16_program_rounds_every_value_as_forge_does():
    """Inputs, weights and each op's result in bfloat16 (rounded to nearest
    even), each op computed in float32 from them, as Forge's golden does:
    here a Matmul with its bias, then a Sigmoid."""
    model, w, b = linear(transposed=False)
    x = RNG.standard_normal((3, 40)).astype(np.float32)
    compiled = compile_model(model, pipeline="onnx-to-forge{data-format=bfloat16}")
    (got,) = run_compiled(compiled, [x])
    wide = [a.astype(BF16).astype(np.float32) for a in (x, w, b)]
    h = (wide[0] @ wide[1] + wide[2]).astype(BF16)
    assert got.dtype == BF16
    assert np.array_equal(got, _sigmoid(h.astype(np.float32)).astype(BF16))
    assert "Float32" not in compiled.emitted.source and compiled.emitted.source.count("Float16_b") == 2


def test_a_bfloat16_check_reports_pcc_relative_error_and_largest_difference():
    model, _, _ = linear()
    report = check_model(model, data_format="bfloat16")
    assert report.status == MATCH, report.format()
    (out,) = report.outputs
    assert 0.99 <= out.pcc < 1 and 0 < out.relative_l2 < 0.05 and out.max_abs_error > 0
    assert "rel L2 err" in report.format()


def test_block_float_weights_are_packed_as_the_device_stores_them():
    """A Linear's weight is laid out [k, n] as it loads (transB folded): its
    blocks of 16 run along n, not along the k of the ONNX file."""
    model, w, b = linear(transposed=True)
    x = RNG.standard_normal((3, 40)).astype(np.float32)
    compiled = compile_model(model, pipeline=BLOCK_FP8)
    (got,) = run_compiled(compiled, [x])
    stored = device_values(np.ascontiguousarray(w.T), FormatName.BFP8_B)
    assert np.array_equal(got, _sigmoid(x @ stored + b).astype(np.float32))
    along_k = device_values(w, FormatName.BFP8_B).T
    assert not np.array_equal(got, _sigmoid(x @ along_k + b).astype(np.float32))
    marked = {op.parameter_name.data: op.weight_format for op in compiled.module.walk()
              if isinstance(op, forge.ParameterOp)}
    assert marked == {"w": forge.DataFormatAttr(FormatName.BFP8_B), "b": None}  # the bias is no matmul weight
    assert 'set_custom_config("experimental-weight-dtype=bfp_bf8")' in compiled.emitted.source


def test_a_matmul_of_activations_keeps_its_values():
    """Only a B operand computed from weights alone is converted."""
    model = make_model([helper.make_node("Transpose", ["x"], ["xt"]), helper.make_node("MatMul", ["x", "xt"], ["y"])],
                       [value_info("x", [4, 32])], [value_info("y", [4, 4])])
    x = RNG.standard_normal((4, 32)).astype(np.float32)
    compiled = compile_model(model, pipeline=BLOCK_FP8)
    (got,) = run_compiled(compiled, [x])
    assert np.array_equal(got, x @ x.T)


def test_a_wrong_program_in_a_reduced_format_is_a_mismatch(monkeypatch):
    model, _, _ = linear()
    monkeypatch.setattr(FORGE_FUNCTIONS["Sigmoid"], "kernel", lambda a: 1 / (1 + np.exp(a)))  # sigmoid(-x)
    report = check_model(model, data_format="bfloat16", weight_format="bfp8_b")
    assert report.status == MISMATCH and report.outputs[0].pcc < 0


def test_the_reduced_rule_on_both_sides():
    want = RNG.standard_normal(1000).astype(np.float32)
    assert compare_reduced("y", want, want.astype(BF16)).ok
    noisy = want + RNG.standard_normal(1000).astype(np.float32) * 0.2  # a PCC near 0.98
    assert not compare_reduced("y", want, noisy).ok
    assert compare_reduced("y", want, noisy, min_pcc=0.9).ok
    nan_elsewhere = want.copy()
    nan_elsewhere[3] = np.nan
    assert not compare_reduced("y", want, nan_elsewhere).ok
    assert not compare_reduced("i", np.arange(4), np.array([0, 1, 2, 4])).ok  # integers stay exact
    assert compare_reduced("s", np.array([100.0]), np.array([100.5])).ok  # one value: within 1%
    assert not compare_reduced("s", np.array([100.0]), np.array([102.0])).ok


def test_formats_no_pipeline_takes_are_named():
    with pytest.raises(ForgeOptError, match=r"data-format=bfp8_b: give one of float32, bfloat16"):
        compile_model(linear()[0], pipeline="onnx-to-forge{data-format=bfp8_b}")
    with pytest.raises(ForgeOptError, match=r"weight-format=bfloat16 with data-format=float32"):
        compile_model(linear()[0], pipeline="onnx-to-forge{weight-format=bfloat16}")
    report = check_model(linear()[0], weight_format="bfp2_b")
    assert report.status == NOT_COMPILED and "weight-format=bfp2_b" in report.error


def test_the_stand_in_takes_only_the_tt_mlir_options_it_emulates():
    assert weight_format_of(CompilerConfig(MLIRConfig().set_custom_config("experimental-weight-dtype=bfp_bf4"))) \
        == FormatName.BFP4_B
    assert weight_format_of(CompilerConfig()) is None
    for option in ("experimental-weight-dtype=bfp_bf2", "enable-optimizer=true"):
        with pytest.raises(ForgeCallError, match="stand-in emulates"):
            weight_format_of(CompilerConfig(MLIRConfig().set_custom_config(option)))


def test_forge_check_takes_the_formats_on_one_device_only(capsys):
    from forge_opt.tools.forge_check import main

    model = str(__import__("pathlib").Path(__file__).parent / "data" / "models" / "tiny_cnn_opset17.onnx")
    with pytest.raises(SystemExit) as done:
        main([model, "--data-format", "bfloat16"])
    assert done.value.code == MATCH
    assert "rel L2 err" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main([model, "--weight-format", "bfp8_b", "--fallback"])
    assert done.value.code == NOT_COMPILED
    assert "--weight-format does not combine with --fallback" in capsys.readouterr().err


def test_marking_walks_a_deep_program_without_recursion():
    """A B operand computed through 1,500 ops from the input (deeper than
    Python's recursion limit) is read in one forward pass, not chased back."""
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"n{i - 1}"], [f"n{i}"]) for i in range(1500)]
    nodes.append(helper.make_node("MatMul", ["x", "n1499"], ["y"]))
    model = make_model(nodes, [value_info("x", [4, 4])], [value_info("y", [4, 4])])
    x = RNG.standard_normal((4, 4)).astype(np.float32)
    compiled = compile_model(model, pipeline=BLOCK_FP8)
    (got,) = run_compiled(compiled, [x])
    assert np.array_equal(got, x @ x)  # 1,500 negations: x again, and no weight converted


def test_saturation_holds_finite_values_past_bfloat16s_range_at_its_extremes():
    from forge_opt.data_formats import BFLOAT16_MAX, saturated

    values, count = saturated(np.array([-3.4028235e38, 3.4028235e38, 1.0, np.inf, np.nan], np.float32))
    assert count == 2 and values[:3].tolist() == [-BFLOAT16_MAX, BFLOAT16_MAX, 1.0]
    assert np.isposinf(values[3]) and np.isnan(values[4])  # not finite: not a fill, as it is
    assert np.isfinite(device_values(values[:2], "bfloat16").astype(np.float32)).all()


@pytest.mark.parametrize("held", ["a Constant node", "an initializer"])
def test_a_fill_beyond_bfloat16s_range_is_saturated_not_rounded_to_an_infinity(held):
    """Issue 52, item 5: `torch.finfo(float32).min`, a mask's fill, rounds
    to -inf in bfloat16 and meets a 0 in `(1 - mask) * fill`: NaN. Optimum's
    T5 holds it in a Constant node; torch's dynamo exporter lifts constants
    to initializers, which the emitted module loads and saturates itself."""
    fill = numpy_helper.from_array(np.array(np.finfo(np.float32).min), "fill")
    nodes = [helper.make_node("Sub", ["one", "mask"], ["open"]), helper.make_node("Mul", ["open", "fill"], ["bias"]),
             helper.make_node("Add", ["scores", "bias"], ["masked"]), helper.make_node("Softmax", ["masked"], ["y"])]
    constant = held == "a Constant node"
    model = make_model([helper.make_node("Constant", [], ["fill"], value=fill)] * constant + nodes,
                       [value_info("scores", [2, 8]), value_info("mask", [2, 8])], [value_info("y", [2, 8])],
                       [numpy_helper.from_array(np.array(1.0, np.float32), "one")] + [fill] * (not constant))
    mask = np.ones((2, 8), np.float32)
    mask[:, 6:] = 0
    report = check_model(model, {"scores": RNG.standard_normal((2, 8)).astype(np.float32), "mask": mask},
                         data_format="bfloat16")
    assert report.status == MATCH, report.format()
    assert "held at bfloat16's finite extreme" in report.format()
    assert constant or "w.clip(-3.3895313892515355e+38" in report.forge_python


def test_layers_names_the_node_where_a_value_leaves_bfloat16s_range():
    """Issue 52, item 5: a value that overflows bfloat16 but not float32 (an
    Add to just past bfloat16's largest value) is named by `--layers` at the
    node where it first becomes infinite, not only at the output."""
    model = make_model([helper.make_node("Mul", ["x", "one"], ["h"]), helper.make_node("Add", ["h", "c"], ["s"]),
                        helper.make_node("Mul", ["s", "half"], ["y"])],
                       [value_info("x", [2, 4])], [value_info("y", [2, 4])],
                       [numpy_helper.from_array(np.array(v, np.float32), n)
                        for n, v in (("one", 1.0), ("c", 1e36), ("half", 0.5))])
    x = np.full((2, 4), ml_dtypes.finfo(BF16).max, np.float32)  # finite in both formats; plus 1e36, in float32 alone
    report = check_model(model, {"x": x}, data_format="bfloat16", layers=True)
    assert report.status == MISMATCH
    assert "first non-finite: node 'Add:s' (Add)" in report.format()
