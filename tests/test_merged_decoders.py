"""Optimum's merged seq2seq decoders (`decoder_model_merged.onnx`, made by
tests/data/models/make_merged_decoders.py from tiny random T5 and Whisper
configurations): one If on the run-time input `use_cache_branch`, both
branches reusing value names. Through the split the If runs on the host and
each branch's MatMuls on the device; on one device the If is named, and
`--freeze use_cache_branch` compiles the branch its value picks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from forge_opt.check import MATCH, check_model
from forge_opt.check.split import check_fallback
from forge_opt.split.api import split_model

MODELS = Path(__file__).parent / "data" / "models"
DIMS = {"batch_size": 1, "decoder_sequence_length": 1, "encoder_sequence_length": 6, "past_decoder_sequence_length": 3}


def _inputs(model: onnx.ModelProto, use_cache: bool) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        tt = i.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else DIMS[d.dim_param] for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if i.name == "use_cache_branch":
            feeds[i.name] = np.array([use_cache])
        elif "mask" in i.name:
            feeds[i.name] = np.ones(shape, dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[i.name] = rng.integers(0, 64, shape).astype(dtype)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


@pytest.mark.parametrize("name", ["t5", "whisper"])
@pytest.mark.parametrize("use_cache", [True, False], ids=["with_past", "without_past"])
def test_the_merged_decoder_passes_the_split_with_both_branches_on_the_device(name, use_cache):
    model = onnx.load(MODELS / f"{name}_decoder_merged.onnx")
    report = check_fallback(model, _inputs(model, use_cache))
    assert report.status == MATCH, report.format() + report.error
    assert "split into 1 sub-model (cpu If[then: tt; else: tt])" in report.summary


@pytest.mark.parametrize("name", ["t5", "whisper"])
@pytest.mark.parametrize("devices", [1, 2])
def test_a_prompt_of_other_sizes_than_the_exporters_trace_passes_the_split(name, devices):
    """Issue 39: a branch made a model of its own kept the sizes the
    exporter wrote inside it (its trace's: [3, 2, 2, 8] for Whisper's
    `present.0.encoder.value`), and a run at 3 new tokens over 4 cached
    failed on them ("where the model takes [3, 2, 2, 8]"), on one device
    and on two. ONNX now infers them from the user's sizes."""
    model = onnx.load(MODELS / f"{name}_decoder_merged.onnx")
    dims = {**DIMS, "decoder_sequence_length": 3, "past_decoder_sequence_length": 4}
    report = check_fallback(model, dims=dims, devices=devices)
    assert report.status == MATCH, report.format() + report.error


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_every_matmul_of_both_branches_is_on_the_device(name, tmp_path):
    model = onnx.load(MODELS / f"{name}_decoder_merged.onnx")
    _, plan = split_model(model, tmp_path / "split", dims=DIMS)
    branches = plan.graphs[0].branches
    assert branches is not None
    for which in ("then", "else"):
        folder = tmp_path / "split" / branches.of(which).folder
        graphs = json.loads((folder / "graph_infos.json").read_text())["graphs"]
        for g in graphs:
            sub = onnx.load(folder / g["model_info"]["model_path"], load_external_data=False)
            ops = [n.op_type for n in sub.graph.node]
            assert g["device"] == "tt" or "MatMul" not in ops, (which, g.get("why"))


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_on_one_device_the_if_is_named_and_freezing_its_condition_compiles(name):
    model = onnx.load(MODELS / f"{name}_decoder_merged.onnx")
    report = check_model(model, dims=DIMS)
    assert "(onnx.If): the If's condition 'use_cache_branch' is known only at run time" in report.error
    assert "--freeze use_cache_branch" in report.error
    for use_cache in (True, False):
        report = check_model(model, _inputs(model, use_cache), freeze=("use_cache_branch",))
        assert report.status == MATCH, report.format() + report.error


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_a_decoder_without_its_past_keeps_its_presents_split(name, tmp_path):
    """Issue 39: the presents of an encoder-decoder's decoder exported (or
    frozen) without its past were all-gathered, 9 collectives at P=2 where
    5 do; each device now returns its heads, and the host joins them."""
    from forge_opt.execution.oracle import expected_outputs
    from forge_opt.frontends.onnx import freeze_inputs
    from forge_opt.split.api import tensor_parallel
    from forge_opt.split.runner import assemble, run_parallel

    model = onnx.load(MODELS / f"{name}_decoder_merged.onnx")
    feeds = _inputs(model, False)
    model = freeze_inputs(model, {"use_cache_branch": feeds.pop("use_cache_branch")})
    plan = tensor_parallel(model, tmp_path / "tp", 2, dims=DIMS, base=MODELS)
    presents = [o.name for o in model.graph.output if o.name.startswith("present")]
    assert presents and all(plan.tensors[p].split_axis == 1 for p in presents)
    assert [c.op for c in plan.collectives].count("all_gather") == 1  # the logits alone
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    assert not differ
    for o, want in zip(model.graph.output, expected_outputs(model, MODELS, feeds).outputs):
        np.testing.assert_allclose(got[o.name], want, rtol=1e-5, atol=1e-6, err_msg=o.name)


def test_the_t5_decoder_in_bfloat16_has_finite_logits():
    """Issue 52: T5's mask fill, torch.finfo(float32).min, rounded to -inf
    in bfloat16 and met a 0 in `(1 - mask) * fill`: NaN logits. It is held
    at bfloat16's finite extreme, and the report says so."""
    model = onnx.load(MODELS / "t5_decoder_merged.onnx")
    for use_cache in (True, False):
        report = check_model(model, _inputs(model, use_cache), freeze=("use_cache_branch",), data_format="bfloat16")
        assert report.status == MATCH, report.format() + report.error
        assert "held at bfloat16's finite extreme" in report.format()
