"""forge-split run executes what ships: each device sub-model's converted
Forge module from its `context_dir`, not a recompile of its ONNX; and a run
that would compare nothing is an error, never a match."""

from __future__ import annotations

import json

import onnx
import pytest
from model_helpers import relu_topk_sigmoid

from forge_opt.tools.forge_split import main


def _model():
    """Relu (device) -> TopK (CPU, pinned) -> Sigmoid (device)."""
    return relu_topk_sigmoid(None)


def _run(*argv) -> int:
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in argv])
    return int(done.value.code or 0)


@pytest.fixture
def converted(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    folder = tmp_path / "split"
    assert _run(path, "-o", folder, "--cpu-ops", "TopK", "--convert") == 0
    capsys.readouterr()
    return path, folder


def test_the_run_executes_the_converted_module(converted, capsys):
    """An edit to the converted module (Relu made Sigmoid) shows in the run:
    `--check` says mismatch; `--recompile` compiles the ONNX again and matches."""
    path, folder = converted
    module = folder / "graph_ir_0" / "graph_0.py"
    source = module.read_text()
    assert "forge.op.Relu(" in source
    module.write_text(source.replace("forge.op.Relu(", "forge.op.Sigmoid("))
    assert _run("run", folder, "--check", "--model", path) == 1
    assert capsys.readouterr().out.strip().endswith("mismatch")
    assert _run("run", folder, "--check", "--model", path, "--recompile") == 0
    assert capsys.readouterr().out.strip().endswith("match")


def test_a_missing_converted_module_is_an_error_naming_it(converted, capsys):
    path, folder = converted
    (folder / "graph_ir_2" / "graph_2.py").unlink()
    assert _run("run", folder, "--check", "--model", path) == 2
    err = capsys.readouterr().err
    assert "graph_2 (tt): no converted Forge module at" in err and "graph_ir_2/graph_2.py" in err
    assert "forge-split convert" in err and "Traceback" not in err


def test_a_converted_module_that_raises_on_import_is_an_error_naming_it(converted, capsys):
    path, folder = converted
    module = folder / "graph_ir_0" / "graph_0.py"
    module.write_text("raise RuntimeError('broken on purpose')\n" + module.read_text())
    assert _run("run", folder, "--check", "--model", path) == 2
    err = capsys.readouterr().err
    assert "graph_0: the converted module" in err and "RuntimeError: broken on purpose" in err


def test_a_split_that_was_never_converted_asks_for_convert(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    assert _run(path, "-o", tmp_path / "split", "--cpu-ops", "TopK") == 0
    assert _run("run", tmp_path / "split", "--check") == 2
    assert "run `forge-split convert` first" in capsys.readouterr().err
    assert _run("convert", tmp_path / "split") == 0
    assert _run("run", tmp_path / "split", "--check") == 0


def test_a_plan_with_no_outputs_compares_nothing_and_says_so(converted, capsys):
    path, folder = converted
    infos = json.loads((folder / "graph_infos.json").read_text())
    for t in infos["tensors"].values():
        if t["attr"] == "output":
            t["attr"] = "intermediate"
    (folder / "graph_infos.json").write_text(json.dumps(infos))
    assert _run("run", folder, "--check", "--model", path) == 2
    assert "no tensor has attr 'output'" in capsys.readouterr().err
