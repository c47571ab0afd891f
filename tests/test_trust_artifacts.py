"""The audit's findings on artifacts and runs (`shared/reference/audit.md`),
each a test that failed on 5ebca78: files written through a link or
emptied, a split or plan that runs what it should not, a run that hangs
or names nothing. The numbers are the audit's."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from audit_models import MODELS, ROOT, external_model, mlp, onnx_model, rand, tanh_loop, vi
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, NOT_COMPILED
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import expected_outputs
from forge_opt.tools.forge_opt import run as forge_opt

# --- files (audit 1, 2, 14, 15, 16, 20, 22, 23) ------------------------------------------------


def test_a_plan_written_over_an_older_one_is_not_written_through_its_links(tmp_path):
    """Audit 1: devices 2 and 3 hard-linked device 0's modules; a new plan in
    the same folder wrote every device's module through them into one inode."""
    from forge_opt.split.api import run_parallel
    from forge_opt.split.runner import assemble

    llama = ["--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim", "past_sequence_length=3"]
    out = f"{tmp_path}/tp/"
    assert forge_opt([str(MODELS / "gpt2_opset17.onnx"), "-p", "onnx-to-forge{devices=4}", "-t", "forge-python",
                      "-o", out]) == 0
    assert forge_opt([str(MODELS / "llm_llama.onnx"), *llama, "-p", "onnx-to-forge{devices=4}", "-t",
                      "forge-python", "-o", out]) == 0
    inodes = {os.stat(tmp_path / "tp" / f"dev{k}" / "segment_1.py").st_ino for k in range(4)}
    texts = {(tmp_path / "tp" / f"dev{k}" / "segment_1.py").read_text() for k in range(4)}
    assert len(inodes) >= len(texts)  # no two different modules behind one inode
    rng = np.random.default_rng(1)
    model = onnx.load(str(MODELS / "llm_llama.onnx"))
    feeds = {}
    for i in model.graph.input:
        shape = [{"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3,
                  "past_sequence_length + sequence_length": 7}.get(d.dim_param, d.dim_value)
                 for d in i.type.tensor_type.shape.dim]
        feeds[i.name] = (rng.integers(0, 100, shape) if i.name == "input_ids" else np.ones(shape, np.int64)
                         if i.name == "attention_mask" else np.arange(3, 7)[None] if i.name == "position_ids"
                         else rng.standard_normal(shape).astype(np.float32))
    from forge_opt.plan.folder import read_split

    got, _ = assemble(read_split(tmp_path / "tp")[0], run_parallel(tmp_path / "tp", feeds))
    want = expected_outputs(model, MODELS, feeds).outputs
    np.testing.assert_allclose(got["logits"], want[0], rtol=1e-4, atol=1e-4)


def test_two_modules_in_one_folder_keep_their_own_constants(tmp_path):
    """Audit 2: the constants file was named for the ONNX graph, which every
    PyTorch export calls main_graph; it is named for the module now."""
    for name, scale in (("base", 1.0), ("tuned", 1.5)):
        onnx.save(mlp(scale), str(tmp_path / f"{name}.onnx"))
        # a constant the compiler computes: W1 + W1 is folded
    for name in ("base", "tuned"):
        model = onnx.load(str(tmp_path / f"{name}.onnx"))
        model.graph.node.insert(0, helper.make_node("Add", ["W1", "W1"], ["W1x2"]))
        model.graph.node[1].input[1] = "W1x2"
        onnx.save(model, str(tmp_path / f"{name}.onnx"))
        assert forge_opt([str(tmp_path / f"{name}.onnx"), "-p", "onnx-to-forge", "-t", "forge-python", "-o",
                          str(tmp_path / f"{name}.py")]) == 0
    assert (tmp_path / "base_constants.npz").is_file() and (tmp_path / "tuned_constants.npz").is_file()
    assert "base_constants.npz" in (tmp_path / "base.py").read_text()


def test_a_failed_compile_leaves_the_output_file_as_it_was(tmp_path):
    """Audit 16: `-o FILE` was emptied before compiling."""
    keep = tmp_path / "keep.py"
    keep.write_text("precious\n")
    onnx.save(mlp(), str(tmp_path / "mlp.onnx"))
    assert forge_opt([str(MODELS / "llm_llama.onnx"), "-p", "onnx-to-forge", "-t", "forge-python", "-o",
                      str(keep)]) != 0
    assert forge_opt([str(tmp_path / "mlp.onnx"), "-p", "onnx-to-forge{devices=2}", "-t", "forge-python", "-o",
                      str(keep)]) != 0
    assert keep.read_text() == "precious\n"


def test_a_constants_file_forge_opt_did_not_write_is_never_replaced(tmp_path, capsys):
    """The module's computed constants go beside it as <stem>_constants.npz:
    a user's file of that name stays as it was (an error naming it); one
    forge-opt wrote is replaced by the next run."""
    model = str(MODELS / "tiny_cnn_opset17.onnx")
    theirs = tmp_path / "model_constants.npz"
    theirs.write_text("mine\n")
    args = [model, "-p", "onnx-to-forge", "-t", "forge-python", "-o", str(tmp_path / "model.py")]
    assert forge_opt(args) != 0
    assert theirs.read_text() == "mine\n" and not (tmp_path / "model.py").exists()
    assert "model_constants.npz: exists and holds no constants forge-opt wrote" in capsys.readouterr().err
    theirs.unlink()
    assert forge_opt(args) == 0 and forge_opt(args) == 0
    assert theirs.is_file()


def test_a_forced_resplit_never_writes_the_older_models_data(tmp_path):
    """Audit 14 and 20: the split hard-links external data; `--force` with a
    new version wrote it through the link into the old model's file, and
    with the same model raised SameFileError."""
    from forge_opt.split.api import split_model

    v1 = external_model(tmp_path / "v1", "model.onnx_data")
    v2 = external_model(tmp_path / "v2", "model.onnx_data", scale=2.0)
    before = (tmp_path / "v1" / "model.onnx_data").read_bytes()
    split_model(v1, tmp_path / "split")
    split_model(v2, tmp_path / "split", force=True)
    split_model(v2, tmp_path / "split", force=True)
    assert (tmp_path / "v1" / "model.onnx_data").read_bytes() == before


def test_a_split_into_the_models_own_folder_is_refused(tmp_path):
    """Audit 15: the split's weights.bin truncated the model's own weights.bin."""
    from forge_opt.split.api import split_model

    path = external_model(tmp_path / "ext2", "weights.bin")
    before = (tmp_path / "ext2" / "weights.bin").read_bytes()
    with pytest.raises(ForgeOptError, match="holds the model itself"):
        split_model(path, tmp_path / "ext2", force=True)
    assert (tmp_path / "ext2" / "weights.bin").read_bytes() == before


def test_fallback_checks_a_model_with_external_data(tmp_path):
    """Audit 18: --fallback lost the model's folder."""
    from forge_opt.check.split import check_fallback

    report = check_fallback(str(external_model(tmp_path / "v2", "model.onnx_data")))
    assert report.ok, report.format()


def test_emit_writes_a_module_that_runs_and_checks_its_path_first(tmp_path):
    """Audit 22 and 23: --emit wrote no constants beside the module, and a
    bad path was a traceback after the verdict."""
    from forge_opt.interpreters.forge_standin import forge_instance, run_instance
    from forge_opt.tools.forge_check import main as forge_check

    model = onnx.load(str(MODELS / "gpt2_opset17.onnx"))
    with pytest.raises(SystemExit) as done:
        forge_check([str(MODELS / "gpt2_opset17.onnx"), "--emit", str(tmp_path / "g.py")])
    assert done.value.code == MATCH
    assert (tmp_path / "g_constants.npz").is_file()
    x = np.random.default_rng(0).integers(0, 128, (1, 16))
    got = run_instance(forge_instance((tmp_path / "g.py").read_text(), str(tmp_path / "g.py"), model), [x])[0]
    np.testing.assert_allclose(got, expected_outputs(model, None, {"input_ids": x}).outputs[0], rtol=1e-4, atol=1e-4)
    with pytest.raises(SystemExit) as done:
        forge_check([str(MODELS / "tiny_cnn_opset17.onnx"), "--emit", str(tmp_path / "nodir" / "x.py")])
    assert done.value.code == NOT_COMPILED


# --- splits (audit 7, 13) -----------------------------------------------------------------------


def test_run_refuses_a_module_converted_from_another_sub_model(tmp_path):
    """Audit 7: after a re-split without convert, run ran the older model's
    converted modules."""
    from forge_opt.split.api import convert, run_split, split_model

    relu = tmp_path / "relu.onnxtxt"
    relu.write_text((ROOT / "examples" / "detector.onnxtxt").read_text())
    split_model(relu, tmp_path / "det")
    convert(tmp_path / "det")
    sigmoid = tmp_path / "sigmoid.onnxtxt"
    sigmoid.write_text(relu.read_text().replace("features = Relu (c)", "features = Sigmoid (c)"))
    split_model(sigmoid, tmp_path / "det", force=True)
    assert not list((tmp_path / "det").glob("graph_ir_*/*.py"))  # the older split's modules are gone
    (tmp_path / "det" / "graph_ir_0").mkdir(exist_ok=True)  # and one put back by hand is refused
    (tmp_path / "det" / "graph_ir_0" / "graph_0.py").write_text("raise SystemExit\n")
    with pytest.raises(ForgeOptError, match=r"not converted from graph_0\.onnx"):
        run_split(tmp_path / "det", {"image": np.zeros((1, 3, 8, 8), np.float32)})


def test_a_while_loop_that_never_ends_is_stopped_by_its_time_limit(tmp_path):
    """Audit 13: the limit was 2^20 iterations, about three hours."""
    import time

    from forge_opt.split.api import convert, run_split, split_model

    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "Wl"], ["hm"], name="body_mm"),
         helper.make_node("Tanh", ["hm"], ["h_out"], name="body_tanh"),
         helper.make_node("ReduceSum", ["h_out"], ["s"], name="body_sum", keepdims=0),
         helper.make_node("Greater", ["s", "thr"], ["cond_out"], name="body_cond")], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", [1, 8])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, 8])])
    model = onnx_model([helper.make_node("Loop", ["", "c0", "h0"], ["h"], name="loop", body=body)],
                   [vi("c0", [], TensorProto.BOOL), vi("h0", [1, 8])], [vi("h", [1, 8])],
                   [numpy_helper.from_array(np.eye(8, dtype=np.float32) * 3, "Wl"),
                    numpy_helper.from_array(np.array(-100, np.float32), "thr")])
    split_model(model, tmp_path / "s")
    convert(tmp_path / "s")
    start = time.monotonic()
    with pytest.raises(ForgeOptError, match="its condition still holds"):
        run_split(tmp_path / "s", {"c0": np.array(True), "h0": np.ones((1, 8), np.float32)}, loop_seconds=1)
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("seconds, says", [("1", "(--loop-seconds raises the limit)"),
                                           ("0", "--loop-seconds 0.0: give a positive number of seconds")])
def test_forge_split_run_takes_a_loop_time_limit(tmp_path, capsys, seconds, says):
    """`forge-split run --loop-seconds S` as a user gives it, a bad value included."""
    from forge_opt.split.api import convert, split_model
    from forge_opt.tools.forge_split import main as forge_split

    body = helper.make_graph(
        [helper.make_node("Identity", ["h_in"], ["h_out"], name="body_h"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", [1, 8])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, 8])])
    forever = onnx_model([helper.make_node("Loop", ["", "c0", "h0"], ["h"], name="loop", body=body)],
                         [vi("c0", [], TensorProto.BOOL), vi("h0", [1, 8])], [vi("h", [1, 8])])
    split_model(forever, tmp_path / "s")
    convert(tmp_path / "s")
    np.savez(tmp_path / "x.npz", c0=np.array(True), h0=np.ones((1, 8), np.float32))
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(tmp_path / "s"), "--inputs", str(tmp_path / "x.npz"), "--loop-seconds", seconds])
    assert done.value.code == NOT_COMPILED and says in capsys.readouterr().err


def test_tp_run_refuses_one_output_file_for_every_device(tmp_path):
    """Audit 30: every rank wrote the same file."""
    import shutil
    import subprocess

    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent))
    if mpiexec is None:
        pytest.skip("mpiexec not installed (the distributed extra)")
    from forge_opt.split.api import tensor_parallel

    tensor_parallel(mlp(), tmp_path / "tp", 2)
    np.savez(tmp_path / "x.npz", x=rand(1, 4, 8))
    done = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "forge_opt.tools.tp_run", str(tmp_path / "tp"),
                           "--inputs", str(tmp_path / "x.npz"), "--output", str(tmp_path / "same.npz")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "{rank}" in done.stderr


def test_a_loop_whose_carried_value_grows_is_not_run_at_its_first_shape(tmp_path):
    """Audit 8: the body's device sub-model was compiled for the first
    iteration's [1, 3] and fed [1, 4], [1, 5]: wrong values, no error."""
    from forge_opt.split.api import convert, run_split, split_model

    h_in, h_out = onnx.ValueInfoProto(), onnx.ValueInfoProto()  # no shape: it grows
    h_in.name, h_out.name = "h_in", "h_out"
    h_in.type.tensor_type.elem_type = h_out.type.tensor_type.elem_type = TensorProto.FLOAT
    consts = [numpy_helper.from_array(np.array([-1]), "st"), numpy_helper.from_array(np.array([2**62]), "en"),
              numpy_helper.from_array(np.array([1]), "ax"), numpy_helper.from_array(np.array(2, np.float32), "two")]
    body = helper.make_graph(
        [helper.make_node("Slice", ["h_in", "st", "en", "ax"], ["last"], name="body_slice"),
         helper.make_node("Mul", ["last", "two"], ["l2"], name="body_mul"),
         helper.make_node("Sigmoid", ["l2"], ["sg"], name="body_sig"),
         helper.make_node("Concat", ["h_in", "sg"], ["h_out"], name="body_cat", axis=1),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), h_in],
        [vi("cond_out", [], TensorProto.BOOL), h_out], consts)
    model = onnx_model([helper.make_node("Loop", ["n", "", "h0"], ["h"], name="loop", body=body)],
                   [vi("n", [], TensorProto.INT64), vi("h0", [1, 3])], [vi("h", [1, None])])
    split_model(model, tmp_path / "s")
    convert(tmp_path / "s")
    feeds = {"n": np.array(3), "h0": rand(1, 3)}
    got = run_split(tmp_path / "s", feeds)["h"]
    np.testing.assert_allclose(got, expected_outputs(model, None, feeds).outputs[0], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["graphs"][0].update(outputs=["scores", "boxes", "best_boxes"]), "in order"),
    (lambda d: d["tensors"]["image"].update(dtype="int64"), "is int64 in 'tensors' but float32"),
    (lambda d: d["tensors"]["image"].update(shape=[7, 7]), "has shape [7, 7] in 'tensors'"),
    (lambda d: d["outputs"].append({"name": "extra", "tensor": "extra"}), "which no graph makes"),
    (lambda d: d["graphs"][0].update(model_info="graph_0.onnx"), "'model_info' must be an object"),
    (lambda d: d.update(graph_num="2"), "not a count"),
    (lambda d: d["tensors"]["image"].update(dtype="U8"), "no tensor element type"),
])
def test_a_hand_edited_split_is_checked_against_its_sub_models(tmp_path, edit, says):
    """Audit 9 and 28: mis-wired entries were accepted (and `run --check`
    said match), or ended in a KeyError or a TypeError."""
    import json

    from forge_opt.split.api import run_split, split_model

    split_model(ROOT / "examples" / "detector.onnxtxt", tmp_path / "det")
    infos = json.loads((tmp_path / "det" / "graph_infos.json").read_text())
    edit(infos)
    (tmp_path / "det" / "graph_infos.json").write_text(json.dumps(infos))
    with pytest.raises(ForgeOptError) as error:
        run_split(tmp_path / "det", {"image": np.zeros((1, 3, 8, 8), np.float32)}, mode="cpu")
    assert says in str(error.value)


def test_an_output_sliced_along_the_sequence_is_no_kv_cache():
    """Audit 19: any input of the output's type but one axis was taken for
    a KV cache's past, and the plan read a tensor before any graph made it."""
    from forge_opt.check.split import check_parallel

    model = onnx_model([helper.make_node("MatMul", ["x", "W"], ["h"], name="proj"),
                    helper.make_node("Slice", ["h", "st", "en", "ax"], ["y"], name="first_tokens")],
                   [vi("x", [1, 4, 16])], [vi("y", [1, 2, 16])],
                   [numpy_helper.from_array(rand(16, 16), "W"), numpy_helper.from_array(np.array([0]), "st"),
                    numpy_helper.from_array(np.array([2]), "en"), numpy_helper.from_array(np.array([1]), "ax")])
    report = check_parallel(model, 2)
    assert report.ok, report.error + report.format()


def test_a_plan_refuses_an_input_of_another_shape(tmp_path):
    """Audit 29: a plan compiled for [1, 4, 8] ran on [1, 5, 8] and printed its outputs."""
    from forge_opt.split.api import run_parallel, tensor_parallel

    tensor_parallel(mlp(), tmp_path / "tp", 2)
    with pytest.raises(ForgeOptError, match=r"has shape \[1, 5, 8\], where the plan takes \[1, 4, 8\]"):
        run_parallel(tmp_path / "tp", {"x": rand(1, 5, 8)})


def _passthru():
    return onnx_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
                  [vi("x", [2, 3]), vi("y", [2, 3])])


def _outweight():
    return onnx_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])],
                  [vi("y", [2, 3]), vi("w", [2, 3])], [numpy_helper.from_array(rand(2, 3), "w")])


def _empty():
    return onnx_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [0, 3])], [vi("y", [0, 3])])


@pytest.mark.parametrize("make", [_passthru, _outweight, _empty])
@pytest.mark.parametrize("devices", [1, 2])
def test_outputs_no_device_op_computes_are_returned_by_the_host(make, devices):
    """Audit 11 and 17: an output that is an input, a weight or an empty
    tensor was dropped by splits ("1 of 2 outputs were compared") and was a
    KeyError in tensor-parallel plans."""
    from forge_opt.check.split import check_fallback, check_parallel

    report = check_fallback(make(), devices=devices)
    assert report.ok, report.error + report.format()
    if devices > 1:
        report = check_parallel(make(), devices)
        assert report.ok, report.error + report.format()


@pytest.mark.slow
def test_a_merged_decoder_checks_through_a_split_for_two_devices():
    """Audit 17: the with-past branch returns empty present.*.encoder.* constants."""
    from forge_opt.check.split import check_fallback

    report = check_fallback(str(MODELS / "t5_decoder_merged.onnx"), devices=2,
                            dims={"batch_size": 1, "decoder_sequence_length": 1, "encoder_sequence_length": 6,
                                  "past_decoder_sequence_length": 3})
    assert report.ok, report.error + report.format()


def test_why_names_the_reasons_inside_a_loops_body(tmp_path, capsys):
    """Audit 26: --why printed only the Loop's own reason."""
    from forge_opt.tools.forge_split import main as forge_split

    onnx.save(tanh_loop(), str(tmp_path / "loop.onnx"))
    with pytest.raises(SystemExit) as done:
        forge_split([str(tmp_path / "loop.onnx"), "-o", str(tmp_path / "s"), "--cpu-ops", "Tanh", "--why"])
    assert done.value.code == 0
    assert "graph_0_body/graph_1 (cpu): node 'body_tanh': pinned to the CPU" in capsys.readouterr().out


def test_a_dynamically_quantized_lstm_checks_through_the_split(tmp_path):
    """Issue 35: a dynamically quantized CRNN (onnxruntime's quantize_dynamic
    makes its LSTM a com.microsoft DynamicQuantizeLSTM, whose outputs ONNX
    cannot type) was `TypeError: expected a ranked tensor type, got
    tensor<*xui8>` through --fallback."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from forge_opt.check.split import check_fallback

    hidden, features = 16, 8
    inits = [numpy_helper.from_array(rand(1, 4 * hidden, features) * np.float32(0.3), "W"),
             numpy_helper.from_array(rand(1, 4 * hidden, hidden) * np.float32(0.3), "R"),
             numpy_helper.from_array(np.zeros((1, 8 * hidden), np.float32), "B"),
             numpy_helper.from_array(rand(hidden, 5), "Wo"), numpy_helper.from_array(np.array([1]), "ax")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["Y", "", ""], hidden_size=hidden, name="lstm"),
             helper.make_node("Squeeze", ["Y", "ax"], ["h"], name="squeeze"),
             helper.make_node("MatMul", ["h", "Wo"], ["logits"], name="classifier")]
    lstm = onnx_model(nodes, [vi("x", [6, 1, features])], [vi("logits", [6, 1, 5])], inits)
    onnx.save(lstm, str(tmp_path / "m.onnx"))
    quantize_dynamic(str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8)
    assert "DynamicQuantizeLSTM" in {n.op_type for n in onnx.load(str(tmp_path / "q.onnx")).graph.node}
    report = check_fallback(str(tmp_path / "q.onnx"))
    assert report.ok, report.error + report.format()


def test_a_run_time_loop_checks_through_a_split_for_two_devices():
    """Audit 17: a Loop body's condition, an Identity of its input, is a
    plan output no device op computes: KeyError 'cond_out'."""
    from forge_opt.check.split import check_fallback

    report = check_fallback(tanh_loop(), {"n": np.array(3), "h0": rand(1, 8)}, devices=2)
    assert report.ok, report.error + report.format()


def test_a_split_of_a_model_with_no_outputs_is_refused(tmp_path):
    """Audit 21: forge-split wrote a split of 0 outputs, which run then refused."""
    from forge_opt.check.split import check_fallback
    from forge_opt.split.api import split_model

    model = onnx_model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [])
    with pytest.raises(ForgeOptError, match="has no outputs"):
        split_model(model, tmp_path / "s")
    report = check_fallback(model)
    assert report.status == NOT_COMPILED and "has no outputs" in report.error
