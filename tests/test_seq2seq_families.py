"""Encoder-decoder translation families as Hugging Face Optimum exports them
(`data/models/make_seq2seq_families.py`: BART, mBART, Marian; 2 encoder and
2 decoder layers) on two and four devices: the encoder with Megatron's 2
collectives per layer + 2, the decoder (self-attention, cross-attention,
MLP) with 3 per layer + 2, the cross-attention's cache kept as each
device's heads; the decoder decodes 8 tokens as onnxruntime does (issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from model_helpers import export_feeds

from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.check.split import check_parallel

MODELS = Path(__file__).parent / "data" / "models"
FAMILIES = ["bart", "mbart", "marian"]
LAYERS = 2
DIMS = {"batch_size": 1, "encoder_sequence_length": 6, "decoder_sequence_length": 1, "past_decoder_sequence_length": 3}
BOUNDS = {"encoder": 2 * LAYERS + 2, "decoder": 3 * LAYERS + 2}


def path(name: str, part: str) -> Path:
    return MODELS / f"fam_{name}_{part}.onnx"


def feeds(name: str, part: str) -> dict[str, np.ndarray]:
    """Optimum's runtime's inputs (`model_helpers.export_feeds`): the encoder's
    cross-attention keys and values among the random caches."""
    return export_feeds(path(name, part), DIMS)


def collectives(summary: str) -> int:
    return int(re.search(r"(\d+) collectives? sending", summary).group(1))  # pyright: ignore[reportOptionalMemberAccess]


@pytest.mark.parametrize("devices", [2, 4])
@pytest.mark.parametrize("part", BOUNDS)
@pytest.mark.parametrize("name", FAMILIES)
def test_a_family_matches_with_megatrons_collectives(name, part, devices):
    report = check_parallel(path(name, part), devices, feeds(name, part))
    assert report.status == MATCH, report.format()
    assert collectives(report.summary) <= BOUNDS[part], report.summary
    assert "warning" not in report.summary


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_a_family_decodes_8_tokens_as_onnxruntime_does(name):
    """With the cache as exported: the decoder has no mask over its own
    cache, so a static one cannot hide its padding (below)."""
    from forge_opt.check.decode import check_decode

    report = check_decode(path(name, "decoder"), 8, feeds(name, "decoder"), devices=2, growing_cache=True)
    assert report.status == MATCH, report.format()
    assert "decode: 8/8 tokens equal to onnxruntime's (2 devices" in report.format()


def test_a_decoder_without_a_mask_over_its_cache_is_refused_a_static_one():
    """Optimum's decoder_with_past takes no `attention_mask`: padded cache
    positions reach its attention, onnxruntime's logits move, and the check
    says why (exit 2), naming --growing-cache."""
    from forge_opt.check.decode import check_decode

    report = check_decode(path("bart", "decoder"), 8, feeds("bart", "decoder"))
    assert report.status == NOT_COMPILED
    assert "padded to 12 positions with ones it has no 'attention_mask' to hide" in report.error
    assert "--growing-cache" in report.error
