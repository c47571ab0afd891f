"""Every flag and file problem a user of forge-split, forge-check and
forge-opt can make gets one clear line and a non-zero exit, never a
traceback; and the forms of graph_infos.json AutoSplit itself describes
are read."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from model_helpers import relu_topk_sigmoid
from onnx import TensorProto, helper

from forge_opt.tools import forge_opt as forge_opt_tool
from forge_opt.tools.forge_check import main as forge_check
from forge_opt.tools.forge_split import main as forge_split


def _model():
    return relu_topk_sigmoid()


def _exit(main, *argv) -> int:
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in argv])
    return int(done.value.code or 0)


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(_model(), p)
    return p


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--cpu-ops", "Topk"], "--cpu-ops: no node has the op type 'Topk' (did you mean 'TopK'?)"),
        (["--cpu-nodes", "frist"], "--cpu-nodes: the model has no node named 'frist' (did you mean 'first'?)"),
    ],
)
def test_a_pin_that_names_nothing_is_an_error(path, tmp_path, capsys, argv, message):
    assert _exit(forge_split, path, "-o", tmp_path / "s", *argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_a_folder_given_as_the_model(tmp_path, capsys):
    assert _exit(forge_check, tmp_path) == 2
    assert _exit(forge_split, tmp_path, "-o", tmp_path / "s") == 2
    assert forge_opt_tool.run([str(tmp_path), "-p", "onnx-to-forge"]) == 1
    err = capsys.readouterr().err
    assert err.count("is a folder, not a model file") == 3 and "Traceback" not in err


@pytest.mark.parametrize("devices", ["0", "1", "-2"])
def test_too_few_devices_is_an_error_not_a_single_device_check(path, capsys, devices):
    assert _exit(forge_check, path, "--devices", devices) == 2
    assert "tensor parallelism needs 2 devices or more" in capsys.readouterr().err


def test_forge_check_fallback_freezes_inputs(tmp_path, capsys):
    """`--freeze` with `--fallback`: the input compiles as a constant and the
    rest runs through the split."""
    nodes = [helper.make_node("Mul", ["x", "scale"], ["m"]), helper.make_node("Relu", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
                                           helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10), path)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32),
             scale=np.array([2.0], np.float32))
    assert _exit(forge_check, path, "--fallback", "--inputs", inputs, "--freeze", "scale") == 0
    assert capsys.readouterr().out.strip().endswith("match")
    assert _exit(forge_check, path, "--fallback", "--freeze", "scale") == 2
    assert "pass inputs by name" in capsys.readouterr().err


def test_forge_opt_does_not_write_over_an_autosplit_folder(path, tmp_path, capsys):
    folder = tmp_path / "split"
    assert _exit(forge_split, path, "-o", folder, "--cpu-ops", "TopK") == 0
    before = (folder / "graph_infos.json").read_text()
    assert forge_opt_tool.run([str(path), "-p", "onnx-to-forge{devices=2}", "-t", "forge-python",
                               "-o", f"{folder}/"]) == 1
    assert "holds an AutoSplit split; choose an empty folder" in capsys.readouterr().err
    assert (folder / "graph_infos.json").read_text() == before


def test_an_unquoted_plan_path_is_one_error_with_the_fix(path, capsys):
    code = forge_opt_tool.run([str(path), "-p", "onnx-to-forge{devices=2 plan=/tmp/plan.json}",
                               "-t", "forge-python", "-o", "/tmp/nowhere/"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "quote it, as in -p 'onnx-to-forge{devices=2 plan=\"plan.json\"}'" in err


def _converted(path, folder):
    assert _exit(forge_split, path, "-o", folder, "--cpu-ops", "TopK", "--convert") == 0
    return json.loads((folder / "graph_infos.json").read_text())


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda i: i["tensors"]["x"].update(dtype="float99"), "tensor 'x' has dtype 'float99', which is no numpy type"),
        (lambda i: i["tensors"]["x"].update(dtype=None), "tensor 'x' has dtype None, not a numpy type's name"),
        (lambda i: i["tensors"]["x"].update(attr="in"), "tensor 'x' has attr 'in', not input, output or intermediate"),
        (lambda i: i["tensors"]["x"].update(shape="2x8"), "tensor 'x' has shape '2x8', not a list of sizes"),
        (lambda i: i["graphs"][0].update(device="gpu"), "device 'gpu' is neither 'tt' nor 'cpu'"),
        (lambda i: i.update(tensors=[{"shape": [2, 8]}]), "'tensors' as a list needs a 'name' in every entry"),
    ],
)
def test_a_bad_graph_infos_is_one_line(path, tmp_path, capsys, edit, message):
    folder = tmp_path / "split"
    infos = _converted(path, folder)
    capsys.readouterr()
    edit(infos)
    (folder / "graph_infos.json").write_text(json.dumps(infos))
    assert _exit(forge_split, "run", folder) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_autosplits_described_form_is_read(path, tmp_path, capsys):
    """As AutoSplit's docstrings show it: `tensors` a list of {name, shape,
    attr} with no dtype, the accelerator called `tpu`. dtypes come from the
    sub-models."""
    folder = tmp_path / "split"
    infos = _converted(path, folder)
    infos["tensors"] = [{"name": n, "shape": t["shape"], "attr": t["attr"]} for n, t in infos["tensors"].items()]
    for g in infos["graphs"]:
        if g["device"] == "tt":
            g["device"] = "tpu"
    (folder / "graph_infos.json").write_text(json.dumps(infos))
    capsys.readouterr()
    assert _exit(forge_split, "run", folder, "--check", "--model", path) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("match")
