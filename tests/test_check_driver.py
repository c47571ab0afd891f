"""One check driver (`check/run.py`) for every mode: a flag a mode does not
take is an error naming both, never dropped; errors become statuses in one
place, whichever mode raised them."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from forge_opt.check.decode import Decode
from forge_opt.check.model import OneDevice
from forge_opt.check.options import CheckOptions
from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.check.run import run_check
from forge_opt.check.split import Fallback, Parallel
from forge_opt.check.stages import Stages
from forge_opt.diagnostics import ForgeOptError
from forge_opt.transforms.compile_options import CompileOptions

MODELS = Path(__file__).resolve().parent / "data" / "models"
SHAPE = (1, 3, 16, 16)  # tiny_cnn's input x
STRATEGIES = [OneDevice, Fallback, Parallel, Decode, Stages]
#: a value other than the default for each flagged option
GIVEN = {"freeze": ("x",), "bisect": True, "layers": True, "stem": "model", "devices": 2, "mpi": True,
         "plan": "pins.json", "min_size": 100, "require_sharded": True, "min_device_ops": 3, "steps": 2,
         "data_format": "bfloat16", "weight_format": "bfp8_b", "max_length": 16, "growing_cache": True,
         "timeout": 5.0, "executor": "xla", "tt_mlir": True, "fallback": True, "device_memory": 100_000,
         "max_devices": 4, "annotate": "annotated.onnx", "stages": 2, "mesh": "1x2", "micro_batches": 2,
         "mesh_layout": "galaxy"}


#: the flagged options: the check's own, and the compile options it holds
FLAGGED = {f.name: f for record in (CheckOptions, CompileOptions) for f in fields(record) if "flag" in f.metadata}
COMPILE = {f.name for f in fields(CompileOptions)}


def _given(options: CheckOptions, name: str, value) -> CheckOptions:
    if name in COMPILE:
        return replace(options, compile=replace(options.compile, **{name: value}))
    return replace(options, **{name: value})


def test_every_flagged_option_has_a_value_to_try():
    assert set(GIVEN) == set(FLAGGED)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.__name__)
@pytest.mark.parametrize("option", sorted(GIVEN))
def test_a_flag_a_mode_does_not_take_is_named_not_dropped(strategy, option):
    two = CheckOptions(compile=CompileOptions(devices=2))
    base = {Parallel: two, Decode: replace(two, steps=2), Stages: CheckOptions(stages=2)}.get(strategy, CheckOptions())
    try:
        options = _given(base, option, GIVEN[option])
    except ForgeOptError as e:  # the compile options refuse the pair themselves
        assert (option, str(e)) == ("device_memory", "devices=2 with device-memory: device-memory chooses the "
                                                     "device count: leave devices out")
        return
    chosen = strategy(options)
    if option in chosen.takes:
        return
    report = run_check(MODELS / "tiny_cnn_opset17.onnx", options, chosen)
    flag, needs = FLAGGED[option].metadata["flag"], FLAGGED[option].metadata["needs"]
    assert report.status == NOT_COMPILED
    holder = options.compile if option in COMPILE else options
    if needs is not None and not getattr(holder, needs[0]):  # audit U3: what it lacks, not another mode
        assert report.error == needs[1]
    else:
        assert report.error == f"{flag} does not combine with {chosen.mode}"


@pytest.mark.parametrize("flags, says", [
    (["--fallback", "--decode", "2"], "--fallback does not combine with --decode 2"),
    (["--device-memory", "1MB", "--devices", "2"], "device-memory chooses the device count: leave devices out"),
    (["--device-memory", "1MB", "--fallback"], "--fallback does not combine with --device-memory"),
    (["--device-memory", "0"], "--device-memory 0: give a size above 0"),
    (["--decode", "0"], "--decode 0: decode at least one step"),
    (["--devices", "1"], "--devices 1: tensor parallelism needs 2 devices or more"),
    (["--stages", "1"], "--stages 1: a pipeline has 2 stages or more"),
    (["--plan-from-onnx"], "--plan-from-onnx compiles a tensor-parallel program or a pipeline"),
    (["--devices", "2", "--plan-from-onnx", "--plan", "p.json"], "--plan-from-onnx takes the plan from the model"),
    (["--max-length", "8"], "--max-length sizes the KV cache of a decode: it goes with --decode N"),
    (["--devices", "2", "--timeout", "5"], "--timeout bounds how long MPI processes wait for each other"),
])
def test_flags_that_do_not_go_together_are_named(flags, says, capsys):
    """The rules are the options record's (`needs`) and each strategy's
    `takes`: a flag the chosen check cannot use is an error, never dropped."""
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main([str(MODELS / "tiny_cnn_opset17.onnx"), *flags])
    assert done.value.code == NOT_COMPILED
    assert says in capsys.readouterr().err


def test_fallback_with_devices_no_longer_drops_min_size(capsys):
    """`--fallback --devices 2 --min-size N` ran without --min-size."""
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main([str(MODELS / "tiny_cnn_opset17.onnx"), "--fallback", "--devices", "2", "--min-size", "100"])
    assert done.value.code == NOT_COMPILED
    assert "--min-size does not combine with --fallback" in capsys.readouterr().err


def test_max_devices_goes_with_device_memory(capsys):
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main([str(MODELS / "tiny_cnn_opset17.onnx"), "--max-devices", "4"])
    assert done.value.code == NOT_COMPILED
    assert "--max-devices goes with --device-memory" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", [OneDevice, Fallback, Parallel], ids=lambda s: s.__name__)
def test_inputs_the_model_cannot_take_are_the_users_in_every_mode(strategy):
    """The oracle's refusal is NOT_COMPILED wherever the mode runs it (the
    tensor-parallel check let it escape)."""
    options = CheckOptions(inputs={"x": np.zeros(SHAPE, np.float64)},
                           compile=CompileOptions(devices=2 if strategy is Parallel else 1))
    report = run_check(MODELS / "tiny_cnn_opset17.onnx", options, strategy(options))
    assert report.status == NOT_COMPILED and "'x'" in report.error and "float64" in report.error, report.error


@pytest.mark.parametrize("strategy", [OneDevice, Fallback, Parallel], ids=lambda s: s.__name__)
def test_every_mode_matches_on_the_same_driver(strategy):
    options = CheckOptions(compile=CompileOptions(devices=2 if strategy is Parallel else 1))
    report = run_check(MODELS / "tiny_cnn_opset17.onnx", options, strategy(options))
    assert report.status == MATCH, report.format()
    assert report.oracle == "onnxruntime" and report.outputs



@pytest.mark.parametrize("check", ["fallback", "parallel"])
def test_a_check_infers_the_models_shapes_once(monkeypatch, check):
    """The check's feeds, the split's placement and its partition (or the
    P-device program) read one import of the model, handed down
    (`Resolved`): its shapes are inferred once (and each sub-model's once,
    to compile it). No memo keyed by the model's digest makes it so."""
    import onnx
    import onnx.shape_inference

    from forge_opt.check.split import check_fallback, check_parallel

    model = onnx.load(MODELS / "tiny_cnn_opset17.onnx")
    inferred: list[str] = []
    infer = onnx.shape_inference.infer_shapes

    def counted(m, *args, **kwargs):
        inferred.append(m.graph.name)
        return infer(m, *args, **kwargs)

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counted)
    report = check_fallback(model) if check == "fallback" else check_parallel(model, 2)
    assert report.status == MATCH, report.format()
    assert inferred.count(model.graph.name) == 1, inferred
