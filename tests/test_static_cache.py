"""A static KV cache (`static-kv-cache`, `forge-check --decode N
[--max-length L]`): Optimum's decoders, exported with a growing cache,
decode every token with one program: a prefill and a decode step, each
with the cache at L positions written in place at `cache_position`; the
tokens and logits still equal onnxruntime's on the model as exported."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from model_helpers import make_model, value_info
from onnx import helper
from test_llm_decoders import DECODE, model_path, optimum_feeds
from test_tensor_parallel import needs_mpiexec

from forge_opt.check.decode import check_decode
from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.check.static_cache import from_static, to_static
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.engine import compile_model, run_compiled
from forge_opt.split.api import tensor_parallel
from forge_opt.transforms.compile_options import CompileOptions

NAMES = ["gpt2", "llama", "qwen2", "mistral", "phi3"]


@pytest.mark.parametrize("name", NAMES)
def test_32_tokens_with_two_programs(name):
    report = check_decode(model_path(name), 32, optimum_feeds(name, DECODE))
    text = report.format()
    assert report.status == MATCH, text
    assert "decode: 32/32 tokens equal to onnxruntime's (one device; 2 programs built, a static KV cache of 39 " \
           "positions)" in text


@pytest.mark.parametrize("name", ["llama", "phi3"])
def test_32_tokens_on_two_devices_with_two_programs(name):
    report = check_decode(model_path(name), 32, optimum_feeds(name, DECODE), devices=2)
    assert report.status == MATCH, report.format()
    assert "(2 devices; 2 programs built, a static KV cache of 39 positions)" in report.format()


@pytest.mark.slow
def test_under_mpi():
    needs_mpiexec()
    report = check_decode(model_path("qwen2"), 4, optimum_feeds("qwen2", DECODE), devices=2, mpi=True)
    assert report.status == MATCH, report.format()
    assert "(2 devices under MPI; 2 programs built" in report.format()


def test_decode_keeps_the_loop_and_the_strategy_it_wraps_builds_each_program():
    """`Decode` builds no program itself: each step's is the wrapped
    strategy's `build`, at the static cache's shapes."""
    from forge_opt.check.decode import Decode
    from forge_opt.check.options import CheckOptions
    from forge_opt.check.run import run_check
    from forge_opt.check.split import Parallel

    built = []

    class Counted(Parallel):
        def build(self, model, base, shapes, folder):
            built.append((self.options.compile.devices, self.options.compile.static_cache, dict(shapes.shapes)))
            return super().build(model, base, shapes, folder)

    options = CheckOptions(optimum_feeds("llama", DECODE), compile=CompileOptions(devices=2), steps=3)
    report = run_check(model_path("llama"), options, Decode(options, Counted))
    assert report.status == MATCH, report.format()
    assert [(d, length) for d, length, _ in built] == [(2, 10), (2, 10)]  # the prompt's program, then a step's
    assert [shapes["input_ids"] for *_, shapes in built] == [(1, 4), (1, 1)]


def test_decode_steps_are_judged_by_the_drivers_one_rule():
    """Logits shifted by one at every step after the prompt keep every
    token (the argmax moves with them): the driver's rule, which judges each
    step's outputs, makes it a mismatch at those steps alone."""
    from forge_opt.check.decode import Decode
    from forge_opt.check.model import OneDevice
    from forge_opt.check.options import CheckOptions
    from forge_opt.check.report import MISMATCH
    from forge_opt.check.run import run_check

    class Shifted(OneDevice):
        def build(self, model, base, shapes, folder):
            program, report = super().build(model, base, shapes, folder)
            if shapes.shapes["input_ids"] == (1, 4):  # the prompt's program
                return program, report
            return (lambda feeds: {**(out := program(feeds)), "logits": out["logits"] + 1.0}), report

    options = CheckOptions(optimum_feeds("llama", DECODE), steps=3)
    report = run_check(model_path("llama"), options, Decode(options, Shifted))
    assert report.status == MISMATCH, report.format()
    assert [r.name for r in report.outputs if not r.ok] == ["logits (step 1)", "logits (step 2)"]
    assert "decode: 3/3 tokens equal" in report.format()


def test_the_plan_records_the_cache_each_device_keeps_its_heads_of(tmp_path):
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 9}
    tensor_parallel(model_path("llama"), tmp_path / "tp", 2, dims=dims, static_cache=9)
    infos = json.loads((tmp_path / "tp" / "graph_infos.json").read_text())
    static = infos["static_cache"]
    assert static["length"] == 9 and static["position"] == "cache_position"
    assert static["caches"]["past_key_values.1.value"] == "present.1.value" and len(static["caches"]) == 4
    for past, present in static["caches"].items():  # each device receives and returns its heads (of 2 KV heads)
        assert infos["tensors"][past]["split_axis"] == 1 and infos["tensors"][past]["shape"] == [1, 1, 9, 8]
        assert infos["tensors"][present]["split_axis"] == 1
    assert infos["tensors"]["cache_position"] == {"shape": [1], "dtype": "int64", "attr": "input"}


def test_a_step_writes_its_entries_in_place_and_keeps_the_rest():
    """One decode step of the static program: the cache's first p positions
    as given, the new entry at p, the rest untouched (a poisoned value
    there stays, and no logit reads it: the mask zeroes it out)."""
    feeds = optimum_feeds("llama", {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 3})
    pairs = {f"present.{i}.{k}": f"past_key_values.{i}.{k}" for i in range(2) for k in ("key", "value")}
    static = to_static(feeds, pairs, 6)
    poisoned = dict(static)
    for past in pairs.values():
        poisoned[past] = static[past].copy()
        poisoned[past][:, :, 5] = 1e4  # a position no step has written
    compiled = compile_model(onnx.load(model_path("llama")), pipeline="onnx-to-forge{static-cache=6}",
                             shapes=_shapes({n: a.shape for n, a in static.items() if n != "cache_position"}))
    assert compiled.input_names[-1] == "cache_position"
    names = ["logits", *pairs]
    clean = dict(zip(names, run_compiled(compiled, [static[n] for n in compiled.input_names])))
    dirty = dict(zip(names, run_compiled(compiled, [poisoned[n] for n in compiled.input_names])))
    np.testing.assert_array_equal(clean["logits"], dirty["logits"])
    for present, past in pairs.items():
        np.testing.assert_array_equal(clean[present][:, :, :3], feeds[past])
        np.testing.assert_array_equal(dirty[present][:, :, 5], poisoned[past][:, :, 5])
        assert not np.array_equal(clean[present][:, :, 3], static[past][:, :, 3])  # written
    grown = from_static(clean, pairs, 4)
    assert grown["present.0.key"].shape == (1, 2, 4, 8)


def _shapes(shapes):
    from forge_opt.frontends.onnx.shapes import InputShapes

    return InputShapes.of(shapes)


def test_a_cache_read_other_than_by_its_concat_is_an_error_naming_the_node():
    past = value_info("past_key_values.0.key", [1, 2, 3, 4])
    new = value_info("k", [1, 2, 1, 4])
    model = make_model(
        [helper.make_node("Concat", ["past_key_values.0.key", "k"], ["present.0.key"], axis=2, name="cat"),
         helper.make_node("ReduceSum", ["past_key_values.0.key"], ["s"], keepdims=0, name="peek")],
        [past, new], [value_info("present.0.key", [1, 2, 4, 4]), value_info("s", [])],
    )
    with pytest.raises(ForgeOptError, match=r"'peek'.*reads the KV cache 'past_key_values.0.key' other than"):
        compile_model(model, pipeline="onnx-to-forge{static-cache=3}")


def test_max_length_too_short_is_named_and_growing_cache_keeps_the_old_loop():
    feeds = optimum_feeds("llama", DECODE)
    report = check_decode(model_path("llama"), 8, feeds, max_length=10)
    assert report.status == NOT_COMPILED
    assert "--max-length 10: the prompt and 8 steps write 14 positions of the cache" in report.error
    report = check_decode(model_path("llama"), 4, feeds, max_length=20)
    assert report.status == MATCH and "a static KV cache of 20 positions" in report.format()
    report = check_decode(model_path("llama"), 4, feeds, growing_cache=True)
    assert report.status == MATCH and "4 programs built, one per input shape" in report.format()


def test_device_memory_counts_the_static_cache_at_its_length():
    """--device-memory's table counts a static cache at L positions, each
    device its heads of it (2 KV heads: halved on 2 devices)."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import StringAttr

    from forge_opt.frontends.onnx import import_model
    from forge_opt.frontends.onnx.shapes import InputShapes
    from forge_opt.transforms.pipelines import OnnxToForgePass
    from forge_opt.transforms.tp.sizing import SIZING_ATTR

    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 20}
    module = import_model(onnx.load(model_path("llama")), shapes=InputShapes.of(None, dims))
    OnnxToForgePass(static_cache=20, device_memory="60000", max_devices=2).apply(Context(), module)
    table = module.attributes[SIZING_ATTR]
    assert isinstance(table, StringAttr)
    rows = [line.split() for line in table.data.splitlines()[1:3]]
    four_caches = 4 * 1 * 2 * 20 * 8 * 4  # [batch, KV heads, L, head size] float32
    assert [int(r[2].replace(",", "")) for r in rows] == [four_caches, four_caches // 2]


def test_forge_check_sizes_a_decode_by_the_static_cache_it_runs():
    """`forge-check --decode --device-memory` sizes the program the decode
    runs: its cache static at --max-length positions (the growing cache at
    the given past of 4 fits one device; 4000 positions need two, whose
    program stores 89,449 bytes a device as written: its modules compute the
    mask of 4000 positions)."""
    from forge_opt.check.split import size_devices

    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 4}
    sizing = size_devices(model_path("llama"), CompileOptions(device_memory=620_000), dims=dims, steps=4,
                          max_length=4000)
    four_caches = 4 * 1 * 2 * 4000 * 8 * 4  # [batch, KV heads, L, head size] float32
    rows = [line.split() for line in sizing.table[1:3]]
    assert sizing.devices == 2 and [int(r[2].replace(",", "")) for r in rows] == [four_caches, four_caches // 2]
    growing = size_devices(model_path("llama"), CompileOptions(device_memory=600_000), dims=dims, steps=4,
                           max_length=0, growing_cache=True)
    assert growing.devices == 1
    with pytest.raises(ForgeOptError, match="--max-length 6: the prompt and 4 steps write 8 positions"):
        size_devices(model_path("llama"), CompileOptions(device_memory=600_000), dims=dims, steps=4, max_length=6)


def test_a_decode_whose_cache_cannot_be_static_says_how_to_run_it():
    """A decoder that also sums its past (the cache read other than by its
    Concat): --decode names the node and --growing-cache; with it, it runs."""
    from onnx import TensorProto, numpy_helper

    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["e"], name="embed"),
        helper.make_node("Unsqueeze", ["e", "one"], ["k"], name="heads"),
        helper.make_node("Concat", ["past_key_values.0.key", "k"], ["present.0.key"], axis=2, name="cat"),
        helper.make_node("ReduceSum", ["past_key_values.0.key"], ["peek"], keepdims=0, name="peek"),
        helper.make_node("MatMul", ["e", "w"], ["h"], name="head"),
        helper.make_node("Add", ["h", "peek"], ["logits"], name="bias"),
    ]
    model = make_model(
        nodes,
        [value_info("input_ids", [1, "s"], TensorProto.INT64), value_info("past_key_values.0.key", [1, 1, "p", 4])],
        [value_info("logits", [1, "s", 8]), value_info("present.0.key", [1, 1, "t", 4])],
        [numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "table"),
         numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w"),
         numpy_helper.from_array(np.array([1], np.int64), "one")],
    )
    feeds = {"input_ids": np.array([[1, 2]], np.int64),
             "past_key_values.0.key": rng.standard_normal((1, 1, 3, 4)).astype(np.float32)}
    report = check_decode(model, 3, feeds)
    assert report.status == NOT_COMPILED
    assert "node 'peek'" in report.error and "(--growing-cache decodes with the cache as exported)" \
        in report.error
    report = check_decode(model, 3, feeds, growing_cache=True)
    assert report.status == MATCH, report.format()


def test_the_decode_flags_as_a_user_gives_them(capsys):
    from forge_opt.tools.forge_check import main

    model = str(model_path("llama"))
    dims = ["--dim", "batch_size=1", "--dim", "sequence_length=2", "--dim", "past_sequence_length=1"]
    with pytest.raises(SystemExit) as done:
        main([model, *dims, "--decode", "3"])
    assert done.value.code == MATCH
    assert "2 programs built, a static KV cache of 6 positions" in capsys.readouterr().out
    for flags, said in [
        (["--decode", "3", "--max-length", "4"], "--max-length 4: the prompt and 3 steps write 5 positions"),
        (["--decode", "3", "--max-length", "8", "--growing-cache"], "--max-length sizes a static cache"),
        (["--growing-cache"], "--growing-cache does not combine with a check on one device"),
    ]:
        with pytest.raises(SystemExit) as done:
            main([model, *dims, *flags])
        assert done.value.code == NOT_COMPILED and said in capsys.readouterr().err


def test_a_reduced_decode_whose_logits_are_wrong_is_a_mismatch(monkeypatch):
    """Teacher-forced logits far from the oracle's fail the PCC rule, the
    tokens' agreement notwithstanding."""
    from forge_opt.dialects.forge_functions import BY_NAME

    embedding = BY_NAME["Embedding"]
    kernel = embedding.kernel
    assert kernel is not None
    monkeypatch.setattr(embedding, "kernel",  # every token read as the next one's row
                        lambda indices, table: kernel((indices + 1) % table.shape[0], table))
    report = check_decode(model_path("llama"), 3, optimum_feeds("llama", DECODE), data_format="bfloat16")
    logits = [r for r in report.outputs if r.name.startswith("logits")]
    assert report.status == 1 and any(r.pcc < 0.99 for r in logits), report.format()
    assert all(np.isfinite(r.max_abs_error) for r in logits)  # wrong values, not NaN
