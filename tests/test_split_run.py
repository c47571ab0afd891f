"""AutoSplit end to end: a detector-shaped model (conv backbone, box decode,
TopK, Gather) splits into a device backbone and CPU post-processing, the
folder matches graph_infos.json's schema, and running the split gives
onnxruntime's outputs for the whole model."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from model_helpers import relu_topk_sigmoid
from onnx import TensorProto, helper, numpy_helper

from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.split.api import convert, run_split, split_model

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "graph_infos.schema.json").read_text())


def detector():
    """Backbone and box decode (device); NonMaxSuppression (its output's
    size depends on the data: CPU), TopK and a Gather of the best boxes
    (post-processing the device runs too)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["image", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["features"], name="relu"),
        helper.make_node("Reshape", ["features", "box_shape"], ["raw"], name="to_boxes"),
        helper.make_node("Sigmoid", ["raw"], ["boxes"], name="decode"),
        helper.make_node("ReduceMean", ["boxes", "last"], ["score"], name="score", keepdims=0),
        helper.make_node("Reshape", ["score", "score_shape"], ["scores"], name="per_class"),
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_boxes", "iou"], ["selected"], name="nms"),
        helper.make_node("TopK", ["score", "k"], ["top", "best"], name="topk", axis=1),
        helper.make_node("Gather", ["boxes", "best"], ["best_boxes"], name="pick", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "detector",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, None),
         helper.make_tensor_value_info("best_boxes", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([1, 64, 4], np.int64), "box_shape"),
         numpy_helper.from_array(np.array([2], np.int64), "last"),
         numpy_helper.from_array(np.array([1, 1, 64], np.int64), "score_shape"),
         numpy_helper.from_array(np.array([5], np.int64), "max_boxes"),
         numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
         numpy_helper.from_array(np.array([3], np.int64), "k")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _inputs():
    return {"image": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def test_a_detector_splits_into_a_device_backbone_and_cpu_post_processing(tmp_path):
    model = detector()
    partition, plan = split_model(model, tmp_path / "split", min_device_ops=2)
    written = json.loads((tmp_path / "split" / "graph_infos.json").read_text())
    jsonschema.validate(written, SCHEMA)
    assert written == plan.to_json()
    assert [g.device for g in plan.graphs] == ["tt", "cpu"]
    assert [n.name for n in partition.graphs[0].nodes] == [
        "conv", "relu", "to_boxes", "decode", "score", "per_class", "topk", "pick",
    ]
    assert [n.name for n in partition.graphs[1].nodes] == ["nms"]
    assert plan.tensors["boxes"].attr == "intermediate"
    assert written["tensors"]["image"] == {"shape": [1, 3, 8, 8], "dtype": "float32", "attr": "input"}


@pytest.mark.parametrize("mode", ["device", "cpu"])
def test_running_the_split_gives_the_models_outputs(tmp_path, mode):
    model = detector()
    split_model(model, tmp_path / "split", min_device_ops=2)
    convert(tmp_path / "split")
    got = run_split(tmp_path / "split", _inputs(), mode=mode)
    want = dict(zip(["selected", "best_boxes"], onnxruntime_outputs(model, None, _inputs())))
    assert set(got) == set(want)
    np.testing.assert_array_equal(got["selected"], want["selected"])
    np.testing.assert_allclose(got["best_boxes"], want["best_boxes"], rtol=1e-5, atol=1e-5)


def test_convert_writes_each_device_module(tmp_path):
    split_model(detector(), tmp_path / "split", min_device_ops=2)
    written = convert(tmp_path / "split")
    assert [p.relative_to(tmp_path / "split").as_posix() for p in written] == ["graph_ir_0/graph_0.py"]
    assert "forge.op.Conv2d" in written[0].read_text()
    assert (tmp_path / "split" / "graph_ir_0" / "graph_0.mlir").is_file()


def test_a_middle_cpu_op_gives_three_sub_models(tmp_path):
    model = relu_topk_sigmoid(None)
    _, plan = split_model(model, tmp_path / "split", cpu_ops=("TopK",))
    convert(tmp_path / "split")
    assert [g.device for g in plan.graphs] == ["tt", "cpu", "tt"]
    x = {"x": np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32)}
    np.testing.assert_allclose(run_split(tmp_path / "split", x)["y"], onnxruntime_outputs(model, None, x)[0], rtol=1e-5)


def test_a_non_empty_folder_is_not_overwritten(tmp_path):
    folder = tmp_path / "split"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep")
    with pytest.raises(ForgeOptError, match="exists and is not empty"):
        split_model(detector(), folder)
    assert (folder / "mine.txt").read_text() == "keep"


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda i: i.pop("tensors"), "the field 'tensors' is missing"),
        (lambda i: i["graphs"][1]["inputs"].append("nowhere"), "tensor 'nowhere' is not in 'tensors'"),
        (lambda i: i["graphs"].reverse(), "before any earlier graph makes it"),
        (lambda i: i["graphs"][0]["model_info"].update(model_path="gone.onnx"), "gone.onnx does not exist"),
    ],
)
def test_a_hand_edited_graph_infos_is_named(tmp_path, edit, message):
    folder = tmp_path / "split"
    split_model(detector(), folder, min_device_ops=2)
    infos = json.loads((folder / "graph_infos.json").read_text())
    edit(infos)
    (folder / "graph_infos.json").write_text(json.dumps(infos))
    with pytest.raises(ForgeOptError, match=message):
        run_split(folder, _inputs())


def test_forge_split_commands(tmp_path, capsys):
    import onnx

    from forge_opt.tools.forge_split import main

    path = tmp_path / "detector.onnx"
    onnx.save(detector(), path)
    folder = tmp_path / "split"

    def run(*argv) -> int:
        with pytest.raises(SystemExit) as done:
            main([str(a) for a in argv])
        return int(done.value.code or 0)

    assert run(path, "-o", folder, "--min-device-ops", 2, "--convert", "--dot", tmp_path / "split.dot") == 0
    report = capsys.readouterr().out
    assert "graph_0  tt          8" in report and "graph_1  cpu         1" in report
    assert "bytes cross between CPU and device per run" in report
    assert (folder / "graph_ir_0" / "graph_0.py").is_file()
    dot = (tmp_path / "split.dot").read_text()
    assert 'label="graph_0 (tt)"' in dot and 'label="graph_1 (cpu)"' in dot
    assert 'g0_3 -> g1_0 [label="boxes"];' in dot  # the decoded boxes cross to the CPU's NonMaxSuppression
    assert run("run", folder, "--check", "--model", path) == 0
    assert capsys.readouterr().out.strip().endswith("match")
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, image=_inputs()["image"])
    assert run("run", folder, "--inputs", inputs, "--mode", "cpu") == 0
    assert "best_boxes: shape [1, 1, 3, 4] dtype float32" in capsys.readouterr().out
    assert run("run", folder, "--inputs", tmp_path / "missing.npz") == 2
    assert "missing.npz: cannot read the inputs" in capsys.readouterr().err
    np.savez(inputs, other=np.zeros(3))
    assert run("run", folder, "--inputs", inputs) == 2
    assert "no value given for the model input 'image'" in capsys.readouterr().err
    assert run(path, "-o", folder) == 2
    assert "exists and is not empty" in capsys.readouterr().err
    assert run(path, "-o", folder, "--force", "--cpu-ops", "Sigmoid", "--cpu-nodes", "conv", "--layout", "NHWC") == 0
    infos = json.loads((folder / "graph_infos.json").read_text())
    assert [g["device"] for g in infos["graphs"]] == ["cpu", "tt", "cpu", "tt", "cpu"]  # A + 1, A = 4
    assert infos["layout"] == "NHWC"
    capsys.readouterr()
    assert run(path, "-o", tmp_path / "other", "--layout", "NWHC") == 2  # argparse names the choices
    assert "invalid choice: 'NWHC'" in capsys.readouterr().err
    assert run("run", tmp_path / "nowhere") == 2
    assert "no such file" in capsys.readouterr().err


def test_forge_check_fallback(tmp_path, capsys):
    import onnx

    from forge_opt.tools.forge_check import main

    path = tmp_path / "detector.onnx"
    onnx.save(detector(), path)
    for argv, code in (([], 2), (["--fallback"], 0), (["--fallback", "--bisect"], 2)):
        with pytest.raises(SystemExit) as done:
            main([str(path), *argv])
        assert done.value.code == code, argv
    out = capsys.readouterr()
    assert "split into 2 sub-models (tt, cpu)" in out.err and "match" in out.out
    assert "--bisect does not combine with --fallback" in out.err


def test_the_partitioned_ir_runs_as_the_model():
    """partition-for-forge's module (sub-models as functions the main one
    calls) computes on the interpreters what the model computes."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import StringAttr

    from forge_opt.frontends.onnx import import_model
    from forge_opt.interpreters.run import run_module
    from forge_opt.transforms.partition_for_forge import PartitionForForgePass

    module = import_model(detector())
    want = run_module(module, [_inputs()["image"]])
    PartitionForForgePass(min_device_ops=2).apply(Context(), module)
    module.verify()
    devices = [op.attributes["forge.device"] for op in module.ops if "forge.device" in op.attributes]
    assert devices == [StringAttr("tt"), StringAttr("cpu")]
    got = run_module(module, [_inputs()["image"]])
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def _weighty_model():
    """A large weight used on both sides of a CPU op: Add(x, w) -> TopK (pinned
    to the CPU) -> Mul(values, w')."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 512)).astype(np.float32)  # 128 KiB
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"], name="add"),
        helper.make_node("TopK", ["a", "k"], ["v", "i"], name="topk", axis=1),
        helper.make_node("MatMul", ["v", "m"], ["y"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([256], np.int64), "k"),
         numpy_helper.from_array(rng.standard_normal((256, 128)).astype(np.float32), "m")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_large_inline_weights_are_written_once_and_pointed_at(tmp_path):
    model = _weighty_model()
    _, plan = split_model(model, tmp_path / "split", cpu_ops=("TopK",))
    convert(tmp_path / "split")
    assert [g.device for g in plan.graphs] == ["tt", "cpu", "tt"]
    assert (tmp_path / "split" / "weights.bin").stat().st_size == (64 * 512 + 256 * 128) * 4
    assert all((tmp_path / "split" / f"graph_{n}.onnx").stat().st_size < 4096 for n in range(3))
    x = {"x": np.random.default_rng(4).standard_normal((64, 512)).astype(np.float32)}
    got = run_split(tmp_path / "split", x)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(model, None, x)[0], rtol=1e-4, atol=1e-4)


def test_external_weights_stay_in_their_file(tmp_path):
    import onnx

    source = tmp_path / "model"
    source.mkdir()
    onnx.save(_weighty_model(), source / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=1024)
    split_model(source / "m.onnx", tmp_path / "split")
    convert(tmp_path / "split")
    assert not (tmp_path / "split" / "weights.bin").exists()
    first = onnx.load(tmp_path / "split" / "graph_0.onnx", load_external_data=False)
    location = {e.key: e.value for e in first.graph.initializer[0].external_data}["location"]
    assert location == "data0_m.data"
    assert (tmp_path / "split" / location).stat().st_ino == (source / "m.data").stat().st_ino  # a link, no copy
    x = {"x": np.random.default_rng(4).standard_normal((64, 512)).astype(np.float32)}
    got = run_split(tmp_path / "split", x)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(_weighty_model(), None, x)[0], rtol=1e-4, atol=1e-4)


def test_an_output_that_folds_is_still_an_output(tmp_path):
    nodes = [
        helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=1),
        helper.make_node("Shape", ["v"], ["shape"], name="shape"),
        helper.make_node("Relu", ["v"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("shape", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.array([3], np.int64), "k")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    split_model(model, tmp_path / "split")
    convert(tmp_path / "split")
    x = {"x": np.random.default_rng(5).standard_normal((2, 8)).astype(np.float32)}
    got = run_split(tmp_path / "split", x)
    np.testing.assert_array_equal(got["shape"], [2, 3])
    np.testing.assert_array_equal(got["y"], onnxruntime_outputs(model, None, x)[0])


def test_an_op_of_another_domain_runs_on_the_cpu(tmp_path):
    """A com.microsoft op (onnxruntime has it) after a device op. ONNX cannot
    infer its output's shape, so what reads it stays on the CPU too."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("FastGelu", ["a"], ["g"], name="fast_gelu", domain="com.microsoft"),
        helper.make_node("Sigmoid", ["g"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    _, plan = split_model(model, tmp_path / "split")
    convert(tmp_path / "split")
    assert [g.device for g in plan.graphs] == ["tt", "cpu"]
    x = {"x": np.random.default_rng(6).standard_normal((2, 8)).astype(np.float32)}
    got = run_split(tmp_path / "split", x)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(model, None, x)[0], rtol=1e-5, atol=1e-6)


def test_an_untyped_output_of_another_domain_takes_its_type_from_a_run(tmp_path):
    """The model declares its outputs with no type and ONNX cannot infer a
    com.microsoft op's: the split learns the types from onnxruntime's run
    (as AutoSplit runs its sub-models) and keeps the op's part on the CPU.
    The host reads them: their element type and rank, not one run's sizes."""
    from forge_opt.check.split import check_fallback

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="relu"),
        helper.make_node("FastGelu", ["a"], ["f"], name="fast_gelu", domain="com.microsoft"),
        helper.make_node("Relu", ["f"], ["y"], name="after"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("f")])
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    _, plan = split_model(model, tmp_path / "split")
    assert [g.device for g in plan.graphs] == ["tt", "cpu"]
    assert plan.tensors["y"].to_json() == {"shape": [-1, -1], "dtype": "float32", "attr": "output"}
    report = check_fallback(model)
    assert report.ok, report.format()


def _run_time_sized_identity(dim: str | None):
    """Relu, then NonZero's indices (a run-time count) cast to float and
    passed through an Identity, which lowers to no Forge op at all; `dim`:
    the name an exporter's shape inference gives the count (torchvision's
    detectors carry `unk__6`), or none."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("NonZero", ["r"], ["nz"], name="nonzero"),
        helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Identity", ["f"], ["y"], name="identity"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              value_info=[helper.make_tensor_value_info("f", TensorProto.FLOAT, [2, dim])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("dim", [None, "unk__6"])
def test_a_node_of_run_time_sizes_goes_to_the_cpu_even_when_it_lowers_to_nothing(tmp_path, dim):
    """Issue 38: a detector's split put such a node on the device, and
    convert then refused its sub-model (or compiled it for unknown sizes)."""
    from forge_opt.check.split import check_fallback
    from forge_opt.frontends.onnx import import_model
    from forge_opt.transforms.placement import Where, place

    model = _run_time_sized_identity(dim)
    identity = place(import_model(model))["identity"]
    assert identity.where is Where.CPU and "sizes known only at run time" in identity.reason
    _, plan = split_model(model, tmp_path / "split")
    assert [g.device for g in plan.graphs] == ["tt", "cpu"]
    convert(tmp_path / "split")
    report = check_fallback(model)
    assert report.ok and "split into 2 sub-models (tt, cpu)" in report.summary, report.format()
