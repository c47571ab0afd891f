"""The audit's findings on verdicts and messages (`shared/reference/audit.md`),
each a test that failed on 5ebca78: the oracle, the measured budget, the
checker measured, and a user's mistakes named in one line. The numbers
are the audit's."""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from audit_models import MODELS, ROOT, external_model, mlp, onnx_model, rand, vi
from onnx import TensorProto, helper

from forge_opt.check import NOT_COMPILED, check_model
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import InputError, expected_outputs
from forge_opt.tools.forge_opt import run as forge_opt
from forge_opt.transforms.compile_options import CompileOptions

# --- the oracle (audit 4, 24, 25) ---------------------------------------------------------------


@pytest.mark.parametrize("x, says", [
    (np.zeros((1, 5, 8), np.float32), "has shape [1, 5, 8], where the model takes [1, 4, 8]"),
    (np.zeros((), np.float32), "has rank 0"),
    (np.zeros((1, 4, 8), np.float64), "is float64, where the model takes FLOAT"),
])
def test_inputs_the_model_refuses_are_an_input_error_not_a_match(x, says):
    """Audit 4: onnxruntime refused them and the check switched to
    onnx.reference, which took them, and said match."""
    report = check_model(mlp(), {"x": x})
    assert report.status == NOT_COMPILED and says in report.error and "'x'" in report.error


def test_an_input_the_model_does_not_have_is_named():
    report = check_model(mlp(), {"x": rand(1, 4, 8), "y": rand(1)})
    assert report.status == NOT_COMPILED and "has no input 'y'" in report.error


def test_a_frozen_value_of_the_wrong_type_is_an_input_error():
    """Audit 4: `--freeze c` with a float for a bool If condition was an
    invalid model to onnxruntime, and a match by onnx.reference."""
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [vi("t", [2])])
    other = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [vi("e", [2])])
    model = onnx_model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [vi("c", [], TensorProto.BOOL), vi("x", [2])], [vi("y", [2])])
    report = check_model(model, {"c": np.array(1.0, np.float32), "x": rand(2)}, freeze=("c",))
    assert report.status == NOT_COMPILED and "input 'c'" in report.error and "BOOL" in report.error


def test_the_oracle_writes_nothing_beside_the_model(tmp_path):
    """Audit 25: the oracle saved a temporary copy of an external-data model
    into the model's folder (and in a read-only one, silently switched
    oracles); external data now reaches onnxruntime mapped."""
    path = external_model(tmp_path / "v2", "model.onnx_data")
    before = sorted(os.listdir(path.parent))
    report = check_model(str(path))
    assert report.ok and report.oracle == "onnxruntime", report.format()
    assert sorted(os.listdir(path.parent)) == before


def test_the_oracle_falls_back_only_where_onnxruntime_lacks_the_model():
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    model.ir_version = 99  # an IR version onnxruntime does not know: ONNX's reference runs it, and says why
    reference = expected_outputs(model, None, {"x": rand(2)})
    assert reference.oracle == "onnx.reference" and "IR version" in reference.why
    with pytest.raises(InputError, match="no value given for input 'x'"):
        expected_outputs(mlp(), None, {})


# --- the verdict's budget (issue 35, item 2) ---------------------------------------------------


def test_a_near_constant_sigmoid_map_matches_and_a_wrong_one_does_not():
    """A deep CNN ending in the sigmoid of large negative logits: onnxruntime's
    approximate sigmoid is off by percents of the map's values, which a fixed
    PCC read as a mismatch. Measured against a float64 run, the program is
    closer to the exact values than onnxruntime; a Relu swapped for a Sigmoid
    mid-network is not."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from trust_models import deep_cnn_sigmoid  # pyright: ignore[reportMissingImports]

    model = deep_cnn_sigmoid()
    report = check_model(model)
    assert report.ok, report.format()
    assert report.outputs[0].budget == "float64"
    wrong = onnx.ModelProto()
    wrong.CopyFrom(model)
    next(n for n in wrong.graph.node if n.name == "relu5").op_type = "Sigmoid"
    from forge_opt.check.driver import compare_outputs, model_outputs
    from forge_opt.check.options import CheckOptions
    from forge_opt.check.wide import WideRun
    from forge_opt.execution.engine import compile_model, random_inputs, run_compiled

    compiled = compile_model(wrong)
    arrays = random_inputs(compiled.module, 0)
    feeds = dict(zip(compiled.input_names, arrays))
    want = expected_outputs(model, None, feeds).outputs  # the right model's values, the wrong program's
    results = compare_outputs(model_outputs(model, want), {"map": run_compiled(compiled, arrays)[0]},
                              CheckOptions().rule(), wide=WideRun(model, None, feeds))
    assert not results[0].ok


def test_the_checker_measurement_finds_no_false_verdict_on_a_sample():
    """Issue 35, item 3, and issue 51, item 3: a sample of
    benchmarks/checker_trust.py (its full run is in benchmarks/README.md),
    judged by forge-check's driver, the models with near-ties among them."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from checker_trust import measure  # pyright: ignore[reportMissingImports]
    from trust_models import qdq_cnn, tie_models  # pyright: ignore[reportMissingImports]

    for name, source in [("tiny_cnn", MODELS / "tiny_cnn_opset17.onnx"), ("qdq_cnn", qdq_cnn()), *tie_models()]:
        tally = measure(name, source)
        assert tally.mutants >= 3, name
        assert not tally.false_matches and not tally.called_ill, (tally.false_matches, tally.called_ill)
        assert tally.variants >= 3 and not tally.false_mismatches, tally.false_mismatches


# --- flags and messages (audit 5, 6, 21, 29, 30) ------------------------------------------------


@pytest.mark.parametrize("flags, says", [
    (["--rtol", "-1"], "--rtol -1.0"), (["--pcc", "2"], "--pcc 2.0"), (["--atol", "nan"], "--atol nan"),
    (["--device-memory", "1MB", "--max-devices", "0"], "max-devices=0: give 1 or more"),
])
def test_bad_flag_values_are_one_line_errors(flags, says, capsys):
    from forge_opt.tools.forge_check import main as forge_check

    with pytest.raises(SystemExit) as done:
        forge_check([str(MODELS / "tiny_cnn_opset17.onnx"), *flags])
    assert done.value.code == NOT_COMPILED and says in capsys.readouterr().err


def test_a_model_with_no_outputs_is_named():
    """Audit 21: a TypeError."""
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [])
    report = check_model(model)
    assert report.status == NOT_COMPILED and "has no outputs" in report.error


def test_decode_honours_require_sharded():
    """Audit 5: --decode dropped --require-sharded and --min-size."""
    from forge_opt.check.decode import check_decode

    report = check_decode(str(MODELS / "llm_llama.onnx"), 1, devices=4, require_sharded=True,
                          dims={"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3})
    assert report.status == NOT_COMPILED and "replicated" in report.error


def test_device_memory_counts_a_tied_lm_head_with_its_embedding():
    """Audit 6: GPT-2's LM head reads a transposed copy of the embedding
    table, a computed constant the sizing did not count: it chose 2 devices,
    whose program holds 237,224 bytes each, for 220,000."""
    from forge_opt.check.split import size_devices

    assert size_devices(str(MODELS / "gpt2_opset17.onnx"), CompileOptions(device_memory=220_000)).devices > 2


def _misspelt_plan(tmp_path):
    (tmp_path / "plan.json").write_text('{"layers": {"fc1": {"axis": 1, "gather": true}}}')
    from forge_opt.split.api import tensor_parallel

    tensor_parallel(mlp(), tmp_path / "tp", 2, plan=str(tmp_path / "plan.json"))


def _plan_as_dict(tmp_path):
    from forge_opt.split.api import tensor_parallel

    tensor_parallel(mlp(), tmp_path / "tp", 2, plan={"layers": {}})  # pyright: ignore[reportArgumentType]


def _split_run_as_plan(tmp_path):
    from forge_opt.split.api import run_parallel, split_model

    split_model(mlp(), tmp_path / "s")
    run_parallel(tmp_path / "s", {"x": rand(1, 4, 8)})


def _convert_a_plan(tmp_path):
    from forge_opt.split.api import convert, tensor_parallel

    tensor_parallel(mlp(), tmp_path / "tp", 2)
    convert(tmp_path / "tp")


def _npy_inputs(tmp_path):
    from forge_opt.check.options import read_inputs

    np.save(tmp_path / "x.npy", rand(1, 4, 8))
    read_inputs(str(tmp_path / "x.npy"))


def _short_mask(tmp_path):
    from forge_opt.check.decode import check_decode

    model = onnx.load(str(MODELS / "llm_llama.onnx"))
    feeds = {i.name: np.zeros([{"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3,
                                "past_sequence_length + sequence_length": 6}.get(d.dim_param, d.dim_value)
                               for d in i.type.tensor_type.shape.dim],
                              np.int64 if i.name in ("input_ids", "attention_mask", "position_ids") else np.float32)
             for i in model.graph.input}
    report = check_decode(str(MODELS / "llm_llama.onnx"), 1, feeds)
    raise ForgeOptError(report.error)


def _int32_ids(tmp_path):
    report = check_model(str(MODELS / "gpt2_opset17.onnx"), {"input_ids": np.zeros((1, 16), np.int32)})
    raise ForgeOptError(report.error)


@pytest.mark.parametrize("call, says", [
    (_misspelt_plan, "unknown key 'gather'"),
    (_plan_as_dict, "plan= takes the path"),
    (_split_run_as_plan, "is a split, not a tensor-parallel plan"),
    (_convert_a_plan, "is a tensor-parallel plan"),
    (_npy_inputs, "one array, not an .npz file"),
    (_short_mask, "is 6 along 'past_sequence_length + sequence_length', which the other inputs make 7"),
    (_int32_ids, "input 'input_ids' of the model is int32, where the model takes INT64"),
])
def test_a_users_mistake_is_one_line_that_names_it(tmp_path, call, says):
    """Audit 24 and 29: tracebacks (TypeError, KeyError, IndexError) or a
    silent switch of oracles."""
    with pytest.raises(ForgeOptError) as error:
        call(tmp_path)
    assert says in str(error.value)


@pytest.mark.parametrize("spec, says", [
    ("onnx-to-forge{devices=0}", "devices=0: give 1 or more"),
    ('onnx-to-forge{devices=2 device-memory="1MB"}', "device-memory chooses the device count"),
])
def test_forge_opt_refuses_device_counts_no_run_can_use(tmp_path, spec, says, capsys):
    onnx.save(mlp(), str(tmp_path / "mlp.onnx"))
    assert forge_opt([str(tmp_path / "mlp.onnx"), "-p", spec, "-t", "forge-python", "-o", f"{tmp_path}/tp/"]) != 0
    assert says in capsys.readouterr().err


def test_device_memory_chooses_a_count_whose_written_program_fits():
    """Audit W5: at P=4 GPT-2's estimate was 113,656 bytes a device and the
    program written stores 113,888: 113,700 chose 4. The count chosen is
    now the one whose plan, as the writer writes it, fits."""
    from forge_opt.check.split import size_devices

    with pytest.raises(ForgeOptError, match="no: as the writer stores it"):
        size_devices(str(MODELS / "gpt2_opset17.onnx"), CompileOptions(device_memory=113_700, max_devices=4))
    sizing = size_devices(str(MODELS / "gpt2_opset17.onnx"), CompileOptions(device_memory=113_888, max_devices=4))
    assert sizing.devices == 4
