"""Issue 51, item 4, the audit's D1, D2, P1 and U1 to U4: nothing forge-opt
writes replaces a file it reads, `--force` deletes only what an older split
wrote, a plan's paths never lead outside its folder, and a user's mistake
is one line that names it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from audit_models import MODELS, external_model, mlp

from forge_opt.check import NOT_COMPILED
from forge_opt.tools.forge_opt import run as forge_opt


def _forge_split(args: list[str], capsys) -> tuple[int, str]:
    from forge_opt.tools.forge_split import main

    with pytest.raises(SystemExit) as done:
        main(args)
    return int(done.value.code or 0), capsys.readouterr().err


def _forge_check(args: list[str], capsys) -> tuple[int, str]:
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main(args)
    return int(done.value.code or 0), capsys.readouterr().err


# --- D1: an output that is an input ------------------------------------------------------------


@pytest.mark.parametrize("target", ["forge-python", "mlir"])
def test_forge_opt_never_writes_over_the_model_it_reads(tmp_path, target, capsys):
    model = tmp_path / "self.onnx"
    onnx.save(mlp(), str(model))
    os.link(model, tmp_path / "hard.onnx")
    before = model.read_bytes()
    for out in (model, tmp_path / "hard.onnx"):
        assert forge_opt([str(model), "-p", "onnx-to-forge", "-t", target, "-o", str(out)]) != 0
        assert "which forge-opt reads; name another file" in capsys.readouterr().err
    assert model.read_bytes() == before


def test_forge_opt_never_writes_over_the_models_external_data(tmp_path, capsys):
    path = external_model(tmp_path / "m", "weights.data")
    before = (tmp_path / "m" / "weights.data").read_bytes()
    assert forge_opt([str(path), "-p", "onnx-to-forge", "-t", "forge-python", "-o",
                      str(tmp_path / "m" / "weights.data")]) != 0
    assert "weights.data, which forge-opt reads" in capsys.readouterr().err
    assert (tmp_path / "m" / "weights.data").read_bytes() == before


def test_forge_check_never_emits_over_the_model(tmp_path, capsys):
    model = tmp_path / "self.onnx"
    onnx.save(mlp(), str(model))
    before = model.read_bytes()
    code, err = _forge_check([str(model), "--emit", str(model)], capsys)
    assert code == NOT_COMPILED and "which the check reads" in err
    assert model.read_bytes() == before


# --- D2: --force deletes what the older split wrote, and nothing else --------------------------


def test_force_keeps_the_users_files_that_look_like_a_splits(tmp_path, capsys):
    folder = tmp_path / "mine"
    assert _forge_split([str(MODELS / "tiny_cnn_opset17.onnx"), "-o", str(folder)], capsys)[0] == 0
    theirs = ["graph_0.onnx.bak", "data2_results.csv", "graph_1_notes.txt", "graph_ir_7/mine.txt", "dev0/x.txt"]
    for name in theirs:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("keep")
    assert _forge_split([str(MODELS / "tiny_cnn_opset17.onnx"), "-o", str(folder), "--force"], capsys)[0] == 0
    for name in theirs:
        assert (folder / name).read_text() == "keep", name
    assert (folder / "graph_infos.json").is_file()


def test_force_removes_the_older_splits_files(tmp_path, capsys):
    folder = tmp_path / "split"
    assert _forge_split([str(MODELS / "tiny_cnn_opset17.onnx"), "-o", str(folder), "--convert"], capsys)[0] == 0
    older = {p.relative_to(folder) for p in folder.rglob("*")}
    assert _forge_split([str(MODELS / "tiny_cnn_opset17.onnx"), "-o", str(folder), "--force",
                         "--cpu-ops", "Relu"], capsys)[0] == 0
    plan = json.loads((folder / "graph_infos.json").read_text())
    assert len(plan["graphs"]) > 1
    assert not (folder / "graph_ir_0" / "graph_0.py").exists()  # the older conversion went with its split
    assert older - {p.relative_to(folder) for p in folder.rglob("*")}


# --- P1: a plan's paths stay inside its folder --------------------------------------------------


@pytest.fixture
def converted(tmp_path, capsys) -> Path:
    folder = tmp_path / "split"
    assert _forge_split([str(MODELS / "tiny_cnn_opset17.onnx"), "-o", str(folder), "--convert"], capsys)[0] == 0
    return folder


def _edited(folder: Path, edit) -> None:
    plan = json.loads((folder / "graph_infos.json").read_text())
    edit(plan["graphs"][0])
    (folder / "graph_infos.json").write_text(json.dumps(plan))


@pytest.mark.parametrize("field, value", [
    ("context_dir", "../escaped"), ("context_dir", "/tmp/escaped_ctx"),
    ("model_path", "../../../../../../etc/passwd"), ("model_path", "/etc/hostname"),
    ("module_path", "/etc/hostname"), ("module_path", "graph_ir_0/../../x.py"),
])
def test_a_path_outside_the_split_folder_is_refused(converted, tmp_path, field, value, capsys):
    def edit(graph):
        if field == "context_dir":
            graph["context_dir"] = value
        else:
            graph["model_info"][field] = value
    _edited(converted, edit)
    for command in (["convert", str(converted)], ["run", str(converted)]):
        code, err = _forge_split(command, capsys)
        assert code == NOT_COMPILED and "outside the folder" in err and field in err, err
    assert not (tmp_path / "escaped").exists()


def test_a_folder_linked_out_of_the_split_is_refused(converted, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    import shutil

    shutil.rmtree(converted / "graph_ir_0")
    (converted / "graph_ir_0").symlink_to(outside)
    code, err = _forge_split(["convert", str(converted)], capsys)
    assert code == NOT_COMPILED and "through a symbolic link" in err
    assert not any(outside.iterdir())


def test_a_model_path_that_is_a_folder_says_so(converted, capsys):
    """U4: "the file ... does not exist"."""
    _edited(converted, lambda graph: graph["model_info"].update(model_path="."))
    code, err = _forge_split(["run", str(converted)], capsys)
    assert code == NOT_COMPILED and "is a folder, not a file" in err


# --- U1 to U3: messages -----------------------------------------------------------------------


def test_a_format_forge_check_lacks_lists_the_formats_it_has(capsys):
    code, err = _forge_check([str(MODELS / "tiny_cnn_opset17.onnx"), "--data-format", "float16"], capsys)
    assert code == 2 and "(choose from 'float32', 'bfloat16')" in err and "DataFormat" not in err


def test_an_object_array_in_the_inputs_is_named(tmp_path, capsys):
    np.savez(tmp_path / "x.npz", x=np.array([1, "a"], dtype=object))
    code, err = _forge_check([str(MODELS / "tiny_cnn_opset17.onnx"), "--inputs", str(tmp_path / "x.npz")], capsys)
    assert code == NOT_COMPILED and "input 'x' is an array of Python objects" in err


def test_max_length_without_decode_names_decode(capsys):
    code, err = _forge_check([str(MODELS / "llm_llama.onnx"), "--max-length", "20"], capsys)
    assert code == NOT_COMPILED and "goes with --decode N" in err


def test_a_loop_body_folder_outside_the_split_is_refused(tmp_path, capsys):
    """P1: a run-time Loop's body split (`loop.body.folder`) is a plan path too."""
    from audit_models import tanh_loop

    model = tmp_path / "loop.onnx"
    onnx.save(tanh_loop(), str(model))
    folder = tmp_path / "split"
    assert _forge_split([str(model), "-o", str(folder)], capsys)[0] == 0
    plan = json.loads((folder / "graph_infos.json").read_text())
    entry = next(g for g in plan["graphs"] if "loop" in g)
    entry["loop"]["body"]["folder"] = "../outside_body"
    (folder / "graph_infos.json").write_text(json.dumps(plan))
    code, err = _forge_split(["run", str(folder), "--inputs", str(tmp_path / "x.npz")], capsys)
    assert code == NOT_COMPILED and "body folder" in err and "outside the folder" in err, err


def test_an_infinite_input_says_no_numpy_warning(tmp_path, capsys):
    """U5: numpy's RuntimeWarnings (an inf through a matmul) reached the user."""
    import warnings

    np.savez(tmp_path / "x.npz", x=np.full((1, 4, 8), np.inf, np.float32))
    onnx.save(mlp(), str(tmp_path / "mlp.onnx"))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        _forge_check([str(tmp_path / "mlp.onnx"), "--inputs", str(tmp_path / "x.npz")], capsys)
    assert not [w for w in said if issubclass(w.category, RuntimeWarning)]
