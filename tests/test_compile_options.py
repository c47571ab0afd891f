"""One compile-options record: the onnx-to-forge pass is one, forge-check
holds one, and every value is checked in it alone."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from forge_opt.check.report import NOT_COMPILED
from forge_opt.check.split import check_parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.pipelines import OnnxToForgePass

MODELS = Path(__file__).resolve().parent / "data" / "models"


def test_the_pass_options_are_the_records_fields():
    record = [f.name for f in fields(CompileOptions)]
    assert [f.name for f in fields(OnnxToForgePass)] == [*record, "verify_each"]
    chosen = CompileOptions(devices=2, plan="pins.json", data_format="bfloat16", weight_format="bfp8_b")
    assert OnnxToForgePass.of(chosen).as_options() == chosen


@pytest.mark.parametrize("given, says", [
    ({"devices": 0}, "devices=0: give 1 or more"),
    ({"max_devices": 0}, "max-devices=0: give 1 or more"),
    ({"min_size": -1}, "min-size=-1: give 0 or more"),
    ({"static_cache": -2}, "static-cache=-2: give 0 or more"),
    ({"device_memory": "lots"}, "'lots' is not a size in bytes"),
    ({"device_memory": "1MB", "devices": 2}, "device-memory chooses the device count"),
    ({"data_format": "bfp8_b"}, "data-format=bfp8_b: give one of float32, bfloat16"),
    ({"plan": {"layers": {}}}, "plan= takes the path of a plan's JSON file"),
])
def test_a_value_no_run_can_use_is_refused_by_the_record(given, says):
    with pytest.raises(ForgeOptError, match=says):
        CompileOptions(**given)


def test_device_memory_is_read_as_the_pass_spec_gives_it():
    assert CompileOptions(device_memory="2MiB").memory == 2 << 20
    chosen = CompileOptions(device_memory="2MiB", plan="pins.json").at(1)
    assert (chosen.devices, chosen.memory, chosen.plan) == (1, 0, "")


def test_the_python_api_reports_the_records_refusal():
    report = check_parallel(str(MODELS / "tiny_cnn_opset17.onnx"), 0)
    assert report.status == NOT_COMPILED and "devices=0: give 1 or more" in report.error


def test_every_flagged_compile_option_is_a_forge_check_flag(capsys):
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit):
        main(["--help"])
    helped = capsys.readouterr().out
    flagged = [f.metadata["flag"] for f in fields(CompileOptions) if "flag" in f.metadata]
    assert flagged and all(flag in helped for flag in flagged)
