"""Tensor parallelism on decoders as Hugging Face Optimum exports them
(`make_llm_decoders.py`: GPT-2, LLaMA, Qwen2 and Mistral with 4 query heads
over 2 KV heads, Phi-3 with fused projections; two layers each): every
output equal to onnxruntime's, Megatron's collective count, each device's
share of the parameters, and the KV cache kept on the devices."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import export_feeds

from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.execution.oracle import expected_outputs
from forge_opt.split.api import tensor_parallel
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble, run_parallel
from forge_opt.transforms.compile_options import CompileOptions

MODELS = Path(__file__).parent / "data" / "models"
LAYERS = 2
DECODE = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
PREFILL = {"batch_size": 1, "sequence_length": 5, "past_sequence_length": 0}


def model_path(name: str) -> Path:
    return MODELS / f"llm_{name}.onnx"


def optimum_feeds(name: str, dims: dict[str, int]) -> dict[str, np.ndarray]:
    """Optimum's runtime's inputs to the test export `name` (`model_helpers.export_feeds`)."""
    return export_feeds(model_path(name), dims)


def _parameter_bytes(name: str) -> int:
    model = onnx.load(model_path(name))
    return sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer if np.prod(t.dims) > 1)


CASES = [("gpt2", 2), ("gpt2", 4), ("llama", 2), ("llama", 4), ("qwen2", 2), ("mistral", 2), ("phi3", 2), ("phi3", 4)]


@pytest.mark.parametrize("name, devices", CASES)
def test_a_decode_step_matches_onnxruntime_with_megatrons_collectives(tmp_path, name, devices):
    feeds = optimum_feeds(name, DECODE)
    plan = tensor_parallel(model_path(name), tmp_path / "tp", devices, dims=DECODE)
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    want = expected_outputs(onnx.load(model_path(name)), MODELS, feeds)
    names = [o.name for o in onnx.load(model_path(name), load_external_data=False).graph.output]
    assert not differ
    for n, expected in zip(names, want.outputs):
        np.testing.assert_allclose(got[n], expected, rtol=1e-4, atol=1e-5, err_msg=n)
    # one all-reduce per attention and per MLP, one for the embeddings, one gather of the logits
    assert len(plan.collectives) <= 2 * LAYERS + 2
    assert all(c.op != "all_gather" or c.input == "/lm_head/MatMul" for c in plan.collectives)
    share = max(d.parameter_bytes for d in plan.devices) / _parameter_bytes(name)
    assert share <= 1 / devices + 0.10, f"{share:.2f} of the parameters on one device"


@pytest.mark.parametrize("name, devices", CASES)
def test_a_one_token_step_keeps_megatrons_collectives(tmp_path, name, devices):
    """Issue 52: at one token GPT-2's `c_attn` output, reshaped from
    [1, 3 * width] to [1, 1, 3 * width], was read as one head of the whole
    width, so the fused projection was not packed: attention ran replicated
    behind an all-gather, 9 collectives at P=2 (`2 vocab, 7 column, 2 row`)."""
    one = {**DECODE, "sequence_length": 1}
    feeds = optimum_feeds(name, one)
    plan = tensor_parallel(model_path(name), tmp_path / "tp", devices, dims=one)
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    want = expected_outputs(onnx.load(model_path(name)), MODELS, feeds)
    assert not differ
    for n, expected in zip([o.name for o in onnx.load(model_path(name)).graph.output], want.outputs):
        np.testing.assert_allclose(got[n], expected, rtol=1e-4, atol=1e-5, err_msg=n)
    assert len(plan.collectives) == 2 * LAYERS + 2


@pytest.mark.parametrize("name", ["gpt2", "llama", "phi3"])
def test_the_kv_cache_stays_on_its_devices(tmp_path, name):
    """Each device receives and returns only its heads of the cache; the
    plan says along which axis, and the runner joins them only to compare."""
    plan = tensor_parallel(model_path(name), tmp_path / "tp", 2, dims=DECODE)
    tensors = plan.tensors
    caches = [n for n in tensors if n.startswith(("past_key_values", "present"))]
    assert len(caches) == 4 * LAYERS
    heads = 2 if name in ("llama",) else 4
    for n in caches:
        assert tensors[n].split_axis == 1
        assert tensors[n].shape[1] == heads // 2
    assert tensors["logits"].split_axis is None
    per_device = run_parallel(tmp_path / "tp", optimum_feeds(name, DECODE))
    assert per_device[0]["present.0.key"].shape[1] == heads // 2
    assert not np.array_equal(per_device[0]["present.0.key"], per_device[1]["present.0.key"])


@pytest.mark.parametrize("name", ["llama", "phi3"])
def test_a_prefill_with_an_empty_past(name):
    report = check_parallel(model_path(name), 2, optimum_feeds(name, PREFILL), dims=PREFILL)
    assert report.status == MATCH, report.error
    assert "6 collectives" in report.summary


def test_kv_projections_stay_replicated_where_the_devices_do_not_divide_the_kv_heads(tmp_path):
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", 4, dims=DECODE)
    cases = {layer.node: layer for layer in plan.layers}
    k = cases["/model/layers.0/self_attn/k_proj/MatMul"]
    assert k.case == "replicated" and k.reason == "its 2 heads do not divide by 4 devices"
    assert cases["/model/layers.0/self_attn/q_proj/MatMul"].case == "column"
    assert plan.tensors["present.0.key"].split_axis is None  # the cache is replicated with them


def test_the_report_warns_of_large_weights_left_replicated():
    report = check_parallel(model_path("llama"), 4, optimum_feeds("llama", DECODE), dims=DECODE)
    assert report.status == MATCH, report.error
    assert "layers: 1 vocab, 7 column, 4 replicated, 4 row" in report.summary
    assert ("warning: /model/layers.0/self_attn/k_proj/MatMul stays replicated on every device: its 2 heads do "
            "not divide by 4 devices") in report.summary


def test_phi3s_fused_projections_are_packed(tmp_path):
    plan = tensor_parallel(model_path("phi3"), tmp_path / "tp", 2, dims=DECODE)
    packed = {layer.node: layer.packed for layer in plan.layers}
    assert packed["/model/layers.0/self_attn/qkv_proj/MatMul"] == 3
    assert packed["/model/layers.0/mlp/gate_up_proj/MatMul"] == 2


@pytest.mark.parametrize("options", [CompileOptions(2), CompileOptions(4, mesh="2x2")])
def test_the_plan_with_a_split_cache_passes_the_schema(tmp_path, options):
    """On a line, and on a mesh whose rows split the cache (`split_blocks`)."""
    jsonschema = pytest.importorskip("jsonschema")
    tensor_parallel(model_path("qwen2"), tmp_path / "tp", options, dims=DECODE)
    schema = json.loads((Path(__file__).parents[1] / "docs" / "graph_infos.schema.json").read_text())
    plan = json.loads((tmp_path / "tp" / "graph_infos.json").read_text())
    jsonschema.validate(plan, schema)
    assert plan["tensors"]["past_key_values.0.key"].get("split_blocks") == (2 if options.mesh else None)


def test_under_mpi(tmp_path):
    if shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")
    feeds = optimum_feeds("llama", DECODE)
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", 2, dims=DECODE)
    mpi, _ = assemble(plan, run_mpi(tmp_path / "tp", feeds, 2))
    simulated, _ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    for n in simulated:
        np.testing.assert_array_equal(mpi[n], simulated[n], err_msg=n)


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "mistral", "phi3"])
def test_one_device_matches(name):
    from forge_opt.check.model import check_model

    report = check_model(str(model_path(name)), optimum_feeds(name, DECODE), dims=DECODE)
    assert report.status == MATCH, report.format() + report.error


@pytest.mark.parametrize("name, devices", [("llama", 1), ("llama", 2), ("phi3", 2), ("gpt2", 4)])
def test_decode_8_tokens_equal_to_onnxruntimes(name, devices):
    from forge_opt.check.decode import check_decode

    report = check_decode(model_path(name), 8, optimum_feeds(name, DECODE), devices=devices)
    assert report.status == MATCH, report.format()
    assert "decode: 8/8 tokens equal to onnxruntime's" in report.format()
    # a prefill and a decode step, each over a static cache of 3 past + 4 prompt + 8 steps
    assert "2 programs built, a static KV cache of 15 positions" in report.format()
    logits = [r.shape for r in report.outputs if r.name.startswith("logits")]
    assert logits == [(1, 4, 128)] + [(1, 1, 128)] * 7
    assert any(r.name.startswith("present.") for r in report.outputs)  # the last step's cache, compared too


def test_decode_under_mpi():
    if shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")
    from forge_opt.check.decode import check_decode

    report = check_decode(model_path("qwen2"), 8, optimum_feeds("qwen2", DECODE), devices=2, mpi=True)
    assert report.status == MATCH, report.format()
    assert "decode: 8/8 tokens equal to onnxruntime's (2 devices under MPI" in report.format()


def test_a_different_token_is_a_mismatch(monkeypatch):
    """A program whose logits favour another token at step 2 makes the loop
    a mismatch, though the step's logits alone are close."""
    from forge_opt.check import decode

    run = decode.Programs.run
    calls = []

    def nudged(self, feeds):
        out = dict(run(self, feeds))
        calls.append(1)
        if len(calls) == 3:
            logits = out["logits"].copy()
            second = np.argsort(logits[0, -1])[-2]
            logits[0, -1, second] = logits[0, -1].max() + 1e-6
            out["logits"] = logits
        return out

    monkeypatch.setattr(decode.Programs, "run", nudged)
    report = decode.check_decode(model_path("llama"), 4, optimum_feeds("llama", DECODE))
    assert report.status == 1
    steps = report.format().splitlines()
    assert not any(line.endswith("differs") for line in steps if line.startswith(("0 ", "1 ")))
    assert next(line for line in steps if line.startswith("2 ")).endswith("differs")
    # from there the two loops feed different tokens forward
    assert "decode: 2/4 tokens equal to onnxruntime's" in report.format()


def test_decode_names_what_it_needs(tmp_path):
    from forge_opt.check.decode import check_decode
    from forge_opt.tools import forge_check

    model = onnx.load(MODELS / "tiny_cnn_opset17.onnx")
    report = check_decode(model, 2)
    assert report.status == 2 and "inputs 'input_ids' and 'past_key_values.*'" in report.error
    with pytest.raises(SystemExit) as done:
        forge_check.main([str(model_path("llama")), "--decode", "2", "--fallback"])
    assert done.value.code == 2


def test_require_sharded_turns_the_warning_into_an_error(tmp_path, capsys):
    from forge_opt.tools import forge_check

    x = tmp_path / "x.npz"
    np.savez(x, **optimum_feeds("llama", DECODE))  # pyright: ignore[reportArgumentType]
    with pytest.raises(SystemExit) as done:
        forge_check.main([str(model_path("llama")), "--inputs", str(x), "--devices", "4", "--require-sharded"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "4 layers of at least min-size 0 weight elements would stay replicated on every device" in err
    assert "node '/model/layers.0/self_attn/k_proj/MatMul' (tir.matmul): its 2 heads do not divide by 4" in err
    with pytest.raises(SystemExit) as done:  # K and V have 512 weight elements each: under min-size 1000
        forge_check.main([str(model_path("llama")), "--inputs", str(x), "--devices", "4", "--require-sharded",
                          "--min-size", "1000"])
    assert done.value.code == 0


def test_forge_opt_writes_each_layers_case_into_the_plan(tmp_path):
    from forge_opt.tools import forge_opt as forge_opt_tool

    out = tmp_path / "tp"
    assert forge_opt_tool.run([str(model_path("phi3")), "--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim",
                               "past_sequence_length=3", "-p", "onnx-to-forge{devices=2}", "-t", "forge-python",
                               "-o", f"{out}/"]) == 0
    layers = json.loads((out / "graph_infos.json").read_text())["layers"]
    qkv = next(layer for layer in layers if layer["node"] == "/model/layers.0/self_attn/qkv_proj/MatMul")
    assert qkv == {"node": "/model/layers.0/self_attn/qkv_proj/MatMul", "kind": "linear", "case": "column",
                   "packed": 3, "padded_rows": 0, "reason": "its input is replicated", "unshared": False, "blocks": 0}


def test_device_memory_chooses_the_smallest_count_that_fits(tmp_path, capsys):
    from forge_opt.tools import forge_check

    x = tmp_path / "x.npz"
    np.savez(x, **optimum_feeds("llama", DECODE))  # pyright: ignore[reportArgumentType]
    with pytest.raises(SystemExit) as done:
        forge_check.main([str(model_path("llama")), "--inputs", str(x), "--device-memory", "60000"])
    assert done.value.code == 0
    captured = capsys.readouterr()
    assert "2                54,012          896         54,908  yes" in captured.err and "devices: 2" in captured.err
    assert "6 segments on 2 devices" in captured.err and captured.out.strip().endswith("match")
    with pytest.raises(SystemExit) as done:  # too small for any count: the table says why
        forge_check.main([str(model_path("llama")), "--inputs", str(x), "--device-memory", "1KB", "--max-devices", "2"])
    assert done.value.code == 2
    assert "no device count up to 2 fits the model in 1,000 bytes per device" in capsys.readouterr().err


def test_device_memory_as_a_pass_option(tmp_path, capsys):
    from forge_opt.tools import forge_opt as forge_opt_tool

    sizes = ["--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim", "past_sequence_length=3"]
    out = tmp_path / "tp"
    assert forge_opt_tool.run([str(model_path("phi3")), *sizes, "-p", "onnx-to-forge{device-memory=60000}", "-t",
                               "forge-python", "-o", f"{out}/"]) == 0
    assert json.loads((out / "graph_infos.json").read_text())["grid"]["shape"] == [2]
    assert "devices: 2" in capsys.readouterr().err
    one = tmp_path / "one.py"  # enough for one device: an ordinary module
    assert forge_opt_tool.run([str(model_path("phi3")), *sizes, "-p", "onnx-to-forge{device-memory=1MiB}", "-t",
                               "forge-python", "-o", str(one)]) == 0
    assert "class " in one.read_text() and "devices: 1" in capsys.readouterr().err


@pytest.mark.parametrize("text, size", [("12000", 12000), ("512MiB", 512 * 2**20), ("24GB", 24 * 10**9),
                                        ("1.5k", 1500)])
def test_sizes_in_bytes(text, size):
    from forge_opt.transforms.compile_options import parse_bytes

    assert parse_bytes(text) == size


def test_a_size_that_is_not_one():
    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.transforms.compile_options import parse_bytes

    with pytest.raises(ForgeOptError, match="'lots' is not a size in bytes"):
        parse_bytes("lots")


def test_forge_split_runs_a_plan_with_a_split_cache(tmp_path, capsys):
    """`forge-split run --check` on forge-opt's folder: its random past is
    the whole cache, which each device gets its heads of."""
    from forge_opt.tools import forge_opt as forge_opt_tool
    from forge_opt.tools.forge_split import main as forge_split

    out = tmp_path / "tp"
    assert forge_opt_tool.run([str(model_path("llama")), "--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim",
                               "past_sequence_length=3", "-p", "onnx-to-forge{devices=2}", "-t", "forge-python",
                               "-o", f"{out}/"]) == 0
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(out), "--check", "--model", str(model_path("llama"))])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip().endswith("match")


def test_devices_past_the_second_reuse_its_segment_modules(tmp_path, monkeypatch):
    """Every file of the plan is the same whether devices 2 and 3 reuse
    device 0's segment modules or make their own."""
    from forge_opt.targets import devices as parallel

    made = []
    compile_segment = parallel.compile_segment
    monkeypatch.setattr(parallel, "compile_segment", lambda *a: made.append(1) or compile_segment(*a))
    tensor_parallel(model_path("phi3"), tmp_path / "shared", 4, dims=DECODE)
    segments = json.loads((tmp_path / "shared" / "graph_infos.json").read_text())["graph_num"]
    assert len(made) == 2 * segments
    monkeypatch.setattr(parallel.CompiledSegment, "same_as", lambda self, other: False)
    tensor_parallel(model_path("phi3"), tmp_path / "own", 4, dims=DECODE)
    assert len(made) == 2 * segments + 4 * segments
    for path in sorted((tmp_path / "own").rglob("*")):
        if path.is_file():
            assert path.read_bytes() == (tmp_path / "shared" / path.relative_to(tmp_path / "own")).read_bytes(), path


GQA_FORMS = {  # (form, devices): each of K and V's case and the words of its reason
    ("interleave", 2): ("column", "its input is replicated"),
    ("attention_op23", 2): ("column", "its input is replicated"),
    ("tile", 2): ("replicated", "repeats its heads whole"),
    ("interleave", 4): ("replicated", "its 2 heads do not divide by 4 devices"),
    ("attention_op23", 4): ("replicated", "its 2 heads do not divide by 4 devices"),
}


@pytest.mark.parametrize("form, devices", list(GQA_FORMS))
def test_grouped_query_attention_in_each_exported_form(tmp_path, form, devices):
    """K/V repeated by `repeat_interleave` (Tile after Unsqueeze) or by an
    opset-23 `Attention` are shared by KV-head groups; repeated by `repeat`
    (Tile along the heads: query head j reads KV head j mod 2) every device
    needs every KV head, so K and V stay replicated, with the reason. One
    all-reduce either way, and the same outputs as onnxruntime."""
    path = MODELS / f"gqa_{form}.onnx"
    x = {"x": np.random.default_rng(0).standard_normal((1, 5, 32)).astype(np.float32)}
    report = check_parallel(path, devices, x)
    assert report.status == MATCH, report.error
    plan = tensor_parallel(path, tmp_path / "tp", devices)
    assert [c.op for c in plan.collectives] == ["all_reduce"]
    case, reason = GQA_FORMS[form, devices]
    q, k, v, o = plan.layers
    assert (q.case, o.case) == ("column", "row")
    for layer in (k, v):
        assert layer.case == case and reason in layer.reason, layer
