"""Host-side control flow in a split: an If whose condition is known only at
run time keeps a CPU sub-model any AutoSplit runner can run whole, and each
branch is split in turn (its MatMuls on the device); forge-split's runner
reads the condition and runs the chosen branch's split."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check.split import check_fallback
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.plan.folder import read_split
from forge_opt.split.api import convert, run_split, split_model

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "docs" / "graph_infos.schema.json").read_text())


def wake_word_style():
    """A projection, a run-time condition (is the input's sum positive?), and
    an If whose branches read the projection and weights from outside them:
    then a MatMul and a Relu, else a scaling; a Sigmoid after."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W2"),
        numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 16])
    then = helper.make_graph([helper.make_node("MatMul", ["h", "W2"], ["t"], name="then_matmul"),
                              helper.make_node("Relu", ["t"], ["out"], name="then_relu")], "then", [], [out])
    otherwise = helper.make_graph([helper.make_node("Mul", ["h", "two"], ["out"], name="else_mul")], "else", [],
                                  [out])
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"], name="proj"),
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
        helper.make_node("If", ["c"], ["b"], then_branch=then, else_branch=otherwise, name="branch"),
        helper.make_node("Sigmoid", ["b"], ["y"], name="post"),
    ]
    graph = helper.make_graph(nodes, "wake", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def _x(sign: float) -> dict[str, np.ndarray]:
    return {"x": (sign * np.abs(np.random.default_rng(1).standard_normal((2, 8)))).astype(np.float32)}


def test_each_branch_is_split_and_the_if_stays_a_valid_cpu_sub_model(tmp_path):
    model = wake_word_style()
    folder = tmp_path / "split"
    _, plan = split_model(model, folder)
    jsonschema.validate(json.loads((folder / "graph_infos.json").read_text()), SCHEMA)
    entry = next(g for g in plan.graphs if g.branches is not None)
    assert entry.branches is not None
    assert entry.device == "cpu" and sorted(entry.inputs) == ["c", "h"]
    assert entry.branches.condition == "c" and entry.branches.results == ["b"]
    for which in ("then", "else"):
        branch = read_split(folder / entry.branches.of(which).folder)[0]
        assert [g.device for g in branch.graphs] == ["tt"]  # the then MatMul and the else Mul on the device
    # the If's own sub-model carries what its branches read (h, and W2 and two as weights): onnxruntime runs it
    sub = onnx.load(folder / entry.model_path)
    assert sorted(t.name for t in sub.graph.initializer) == ["W2", "two"]
    h = np.ones((2, 16), np.float32)
    for c in (True, False):
        got = onnxruntime_outputs(sub, folder, {"c": np.array(c), "h": h})[0]
        np.testing.assert_allclose(got, np.maximum(h @ onnx.numpy_helper.to_array(model.graph.initializer[1]), 0)
                                   if c else 2 * h, rtol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
@pytest.mark.parametrize("mode", ["device", "cpu"])
def test_the_runner_takes_the_branch_the_condition_picks(tmp_path, sign, mode):
    model = wake_word_style()
    folder = tmp_path / "split"
    split_model(model, folder)
    assert [p.relative_to(folder).as_posix() for p in convert(folder)] == [
        "graph_ir_0/graph_0.py", "graph_1_then/graph_ir_0/graph_0.py", "graph_1_else/graph_ir_0/graph_0.py",
        "graph_ir_2/graph_2.py",
    ]
    got = run_split(folder, _x(sign), mode=mode)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(model, None, _x(sign))[0], rtol=1e-5, atol=1e-6)


def test_the_branch_run_is_the_converted_module(tmp_path):
    """The then branch's converted module, edited, changes the run: what runs
    is what convert wrote, in the branch's folder too."""
    model = wake_word_style()
    folder = tmp_path / "split"
    split_model(model, folder)
    convert(folder)
    module = folder / "graph_1_then" / "graph_ir_0" / "graph_0.py"
    module.write_text(module.read_text().replace("forge.op.Relu(", "forge.op.Sigmoid("))
    got = run_split(folder, _x(1.0))["y"]
    assert not np.allclose(got, onnxruntime_outputs(model, None, _x(1.0))[0], atol=1e-3)
    np.testing.assert_allclose(run_split(folder, _x(-1.0))["y"], onnxruntime_outputs(model, None, _x(-1.0))[0],
                               rtol=1e-5)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_forge_check_fallback_passes_an_if_on_outer_values(sign):
    report = check_fallback(wake_word_style(), _x(sign))
    assert report.ok, report.format() + report.error


def test_a_branch_that_passes_an_outer_value_through_and_a_nested_if(tmp_path):
    """The else branch passes `h` through; the then branch holds an If of its own."""
    rng = np.random.default_rng(2)
    w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "w")
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])
    inner = helper.make_node(
        "If", ["d"], ["out"], name="inner",
        then_branch=helper.make_graph([helper.make_node("MatMul", ["h", "w"], ["out"], name="mm")], "t2", [],
                                      [out]),
        else_branch=helper.make_graph([helper.make_node("Neg", ["h"], ["out"], name="neg")], "e2", [], [out]),
    )
    outer = helper.make_node("If", ["c"], ["y"], name="outer",
                             then_branch=helper.make_graph([inner], "t1", [], [out]),
                             else_branch=helper.make_graph([helper.make_node("Identity", ["h"], ["out"])], "e1",
                                                           [], [out]))
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["h"], name="relu"), outer], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("d", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    folder = tmp_path / "split"
    split_model(model, folder)
    convert(folder)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for c in (True, False):
        for d in (True, False):
            feeds = {"x": x, "c": np.array(c), "d": np.array(d)}
            np.testing.assert_allclose(run_split(folder, feeds)["y"], onnxruntime_outputs(model, None, feeds)[0],
                                       rtol=1e-5, atol=1e-6)


def recurrent_loop(while_loop: bool = False):
    """A Loop whose trip count is an input (`steps`) or, with `while_loop`,
    whose body decides when to stop (the state's sum past a bound): the
    body carries `h` through tanh(h W + x) and scans each step's `h`."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array((rng.standard_normal((4, 4)) * 0.5).astype(np.float32), "W")
    bound = numpy_helper.from_array(np.array(0.5, np.float32), "bound")
    body_nodes = [
        helper.make_node("MatMul", ["h_in", "W"], ["hw"], name="body_matmul"),
        helper.make_node("Add", ["hw", "x"], ["pre"], name="body_add"),
        helper.make_node("Tanh", ["pre"], ["h_out"], name="body_tanh"),
        helper.make_node("Identity", ["h_out"], ["h_scan"], name="body_scan"),
    ]
    if while_loop:
        body_nodes += [helper.make_node("ReduceSum", ["h_out"], ["total"], keepdims=0, name="body_sum"),
                       helper.make_node("Less", ["total", "bound"], ["cond_out"], name="body_less")]
    else:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"))
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("h_scan", TensorProto.FLOAT, [1, 4])],
    )
    loop_inputs = ["", "go", "h0"] if while_loop else ["steps", "", "h0"]
    nodes = [helper.make_node("Relu", ["x"], ["h0"], name="start"),
             helper.make_node("Loop", loop_inputs, ["h", "hs"], body=body, name="loop"),
             helper.make_node("Sigmoid", ["h"], ["y"], name="after")]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])]
    graph_inputs.append(helper.make_tensor_value_info("go", TensorProto.BOOL, []) if while_loop
                        else helper.make_tensor_value_info("steps", TensorProto.INT64, []))
    graph = helper.make_graph(nodes, "rnn", graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]),
                               helper.make_tensor_value_info("hs", TensorProto.FLOAT, None)],
                              [w, bound] if while_loop else [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


@pytest.mark.parametrize("steps", [3, 1])
def test_a_loop_of_a_run_time_trip_count_iterates_on_the_host(tmp_path, steps):
    model = recurrent_loop()
    folder = tmp_path / "split"
    _, plan = split_model(model, folder)
    jsonschema.validate(json.loads((folder / "graph_infos.json").read_text()), SCHEMA)
    loop = next(g.loop for g in plan.graphs if g.loop is not None)
    assert loop.trip_count == "steps" and loop.results == ["h", "hs"]
    body = read_split(folder / loop.body.folder)[0]
    assert [g.device for g in body.graphs] == ["tt"]  # the body's MatMul on the device
    convert(folder)
    feeds = {"x": np.random.default_rng(4).standard_normal((1, 4)).astype(np.float32),
             "steps": np.array(steps, np.int64)}
    got = run_split(folder, feeds)
    want = onnxruntime_outputs(model, None, feeds)
    np.testing.assert_allclose(got["y"], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["hs"], want[1], rtol=1e-5, atol=1e-6)


def test_a_while_loop_stops_when_its_body_says(tmp_path):
    model = recurrent_loop(while_loop=True)
    feeds = {"x": np.full((1, 4), 0.1, np.float32), "go": np.array(True)}
    report = check_fallback(model, feeds)
    assert report.ok, report.format() + report.error
    assert "cpu Loop[body: tt" in report.summary
    assert report.outputs[1].shape == (4, 1, 4)  # four iterations: the sum passes 0.5 at the fourth


def test_forge_split_reports_the_branches_and_the_body(tmp_path, capsys):
    from forge_opt.tools.forge_split import main

    for name, model in (("if", wake_word_style()), ("loop", recurrent_loop())):
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        with pytest.raises(SystemExit) as done:
            main([str(path), "-o", str(tmp_path / name), "--why"])
        assert done.value.code == 0
    out = capsys.readouterr().out
    assert "  then: graph_1_then/ (1 sub-model: tt), when 'c' is true" in out
    assert "  else: graph_1_else/ (1 sub-model: tt), when 'c' is false" in out
    assert "  body: graph_1_body/ (1 sub-model: tt), run 'steps' times" in out
    assert "graph_1 (cpu): node 'loop': a Loop of a run-time trip count or condition" in out


@pytest.mark.parametrize("mpi", [False, True])
def test_a_run_time_if_in_a_split_for_two_devices(tmp_path, mpi):
    """The chosen branch's device sub-models run tensor-parallel (its
    scalar weight, `zero`, stays a scalar in each device's weights). Under
    MPI every process takes the branch process 0's condition picks."""
    import shutil
    import sys

    from forge_opt.split.mpi import run_split_mpi

    if mpi and shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and \
            shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")
    model = wake_word_style()
    split_model(model, tmp_path / "split", devices=2)
    convert(tmp_path / "split")
    for sign in (1.0, -1.0):
        got = (run_split_mpi if mpi else run_split)(tmp_path / "split", _x(sign))["y"]
        np.testing.assert_allclose(got, onnxruntime_outputs(model, None, _x(sign))[0], rtol=1e-5, atol=1e-6)


def _loop_with_a_constant_condition():
    """`recurrent_loop` whose Loop starts from a Constant node's condition,
    as torchvision's Mask R-CNN export has it ('/transform/Constant_7_output_0'):
    the import folds it into a weight of the Loop's sub-model."""
    model = recurrent_loop()
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    loop.input[1] = "go"
    model.graph.node.insert(0, helper.make_node("Constant", [], ["go"], name="go_constant",
                                                value=numpy_helper.from_array(np.array(True))))
    return model


def test_a_loop_whose_condition_is_a_constant_of_the_outer_graph(tmp_path):
    """Issue 38: the split wrote a plan its own reader refused ('the loop
    reads ..., which is not an input of the graph'); the host reads the
    condition from the Loop's sub-model's weights."""
    model = _loop_with_a_constant_condition()
    folder = tmp_path / "split"
    _, plan = split_model(model, folder)
    loop = next(g for g in plan.graphs if g.loop is not None)
    assert loop.loop is not None and loop.loop.condition == "go" and "go" not in loop.inputs
    convert(folder)
    feeds = {"x": np.random.default_rng(5).standard_normal((1, 4)).astype(np.float32), "steps": np.array(3, np.int64)}
    got = run_split(folder, feeds)
    for name, want in zip(["y", "hs"], onnxruntime_outputs(model, None, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6)
    assert check_fallback(model, feeds).ok


def test_a_loop_reading_what_no_graph_gives_is_named(tmp_path):
    split_model(_loop_with_a_constant_condition(), tmp_path / "split")
    infos = json.loads((tmp_path / "split" / "graph_infos.json").read_text())
    entry = next(g for g in infos["graphs"] if "loop" in g)
    entry["loop"]["condition"] = "nowhere"
    (tmp_path / "split" / "graph_infos.json").write_text(json.dumps(infos))
    with pytest.raises(ForgeOptError, match="the host reads 'nowhere' to run its Loop, which is neither an input"):
        read_split(tmp_path / "split")


def test_a_value_only_the_host_reads_takes_no_size_from_a_run(tmp_path):
    """Issue 51 (torchvision's Mask R-CNN: 'input res_append.7 of the model has
    shape [100, 320, 320], where the model takes [52, 320, 320]'): a value
    whose type ONNX cannot infer (there, the masks a run-time Loop appends)
    took its sizes from the run that learned its rank, so a run keeping
    another count of masks was refused. A value only the host reads keeps
    the element type and rank a run gives, and no sizes (here, after an op
    of another domain, everything runs on the host)."""
    from forge_opt.split.api import split_model

    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Gelu", ["x"], ["g"], domain="com.microsoft", name="gelu"),  # ONNX cannot type it
             helper.make_node("Relu", ["g"], ["r"], name="relu")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("r", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    _, plan = split_model(model, tmp_path / "split")
    assert plan.tensors["r"].shape == [-1, -1]
