"""Decoder families as Hugging Face Optimum exports them
(`data/models/make_llm_families.py`: 2 layers each) on two devices: each
matches onnxruntime with at most Megatron's collectives (2 per layer + 2,
or 1 per layer + 2 for a parallel block, whose attention and MLP partial
sums meet before one all-reduce), and decodes 8 tokens as onnxruntime
does (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from model_helpers import export_feeds

from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel

MODELS = Path(__file__).parent / "data" / "models"
LAYERS = 2
DIMS = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
MEGATRON, PARALLEL_BLOCK = 2 * LAYERS + 2, LAYERS + 2
BOUNDS = {
    "gptj": PARALLEL_BLOCK, "gpt_neox": PARALLEL_BLOCK, "phi": PARALLEL_BLOCK, "cohere": PARALLEL_BLOCK,
    "falcon": PARALLEL_BLOCK, "gpt_bigcode": MEGATRON, "gemma": MEGATRON, "gemma2": MEGATRON, "qwen3": MEGATRON,
    "olmo": MEGATRON, "bloom": MEGATRON, "mpt": MEGATRON, "opt": MEGATRON, "stablelm": MEGATRON, "granite": MEGATRON,
    "qwen3_moe": MEGATRON,  # one all-reduce per MoE layer: the experts' weighted sum stays partial
}


def path(name: str) -> Path:
    return MODELS / f"fam_{name}.onnx"


def feeds(name: str) -> dict[str, np.ndarray]:
    """Optimum's runtime's inputs to the family's export (`model_helpers.export_feeds`)."""
    return export_feeds(path(name), DIMS)


@pytest.mark.parametrize("name", BOUNDS)
def test_a_family_matches_with_megatrons_collectives(name):
    report = check_parallel(path(name), 2, feeds(name))
    assert report.status == MATCH, report.format()
    collectives = int(re.search(r"(\d+) collectives? sending", report.summary).group(1))  # pyright: ignore
    assert collectives <= BOUNDS[name], report.summary


@pytest.mark.parametrize("name", ["falcon", "gpt_bigcode"])
def test_a_multi_query_projection_keeps_its_one_kv_head_whole_on_four_devices(name):
    """The query's heads column-parallel, the K/V head's columns a Linear of
    their own on every device: no collective for attention but the one
    after it."""
    report = check_parallel(path(name), 4, feeds(name))
    assert report.status == MATCH, report.format()
    assert f"{BOUNDS[name]} collectives" in report.summary
    assert "2 replicated" in report.summary and "warning" not in report.summary


STATIC = ["gpt_neox", "phi", "falcon", "gpt_bigcode", "qwen3", "olmo", "cohere", "bloom", "opt", "stablelm", "granite",
          "qwen3_moe"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [*STATIC, "gemma", "gemma2", "mpt", "gptj"])
def test_a_family_decodes_8_tokens_as_onnxruntime_does(name):
    """From one static cache (2 programs), or with the cache as exported
    where a static one cannot serve the export (below)."""
    from forge_opt.check.decode import check_decode

    report = check_decode(path(name), 8, feeds(name), devices=2, growing_cache=name not in STATIC)
    assert report.status == MATCH, report.format()
    assert "decode: 8/8 tokens equal to onnxruntime's (2 devices" in report.format()


@pytest.mark.parametrize("name", ["gemma", "mpt"])
def test_an_export_that_reads_its_padded_cache_is_refused_a_static_one(name):
    """MPT's ALiBi reads key positions by index, and Gemma's export moves
    with the masked positions too: onnxruntime's own logits change when the
    cache is padded, so no static-cache program can equal the model. The
    check says so (exit 2), where it reported a mismatch of ours."""
    from forge_opt.check.decode import check_decode

    report = check_decode(path(name), 8, feeds(name))
    assert report.status == 2
    assert "logits change when its KV cache is padded to 15 positions" in report.error
    assert "--growing-cache" in report.error
