"""Write `docs/multichip.md`: each model family Tenstorrent's ONNX path
lists as needing several chips (and its kin), the export it was tried on,
and what `forge-check --devices P` gives at P = 2 and 4: collectives, the
bytes each device stores and its peak of activations, the verdict; and
what `forge-check --stages 2` gives each decoder: the cut, the weights
each stage stores, the activations it sends, the verdict; and what
`forge-check --mesh RxC` gives the decoders on a mesh, as a line laid on
it and in Galaxy's layout: the collectives per mesh axis and per layer,
the ring steps beside the line of R·C devices' (or the bytes sent).

    python -m forge_opt.tools.gen_multichip          # write (from the repository's root)
    python -m forge_opt.tools.gen_multichip --check  # exit 1 if the page is stale
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forge_opt.check.report import NOT_COMPILED, VERDICTS
from forge_opt.check.split import check_parallel
from forge_opt.check.stages import check_stages
from forge_opt.plan.graph_infos import GALAXY_LAYOUT, LINE_LAYOUT
from forge_opt.targets.devices.mesh_report import line_collectives, per_layer, ring_steps
from forge_opt.tools.generated_file import generator_main

#: relative to the repository's root, where the generator runs
PAGE = Path("docs") / "multichip.md"
MODELS = Path("tests") / "data" / "models"
DECODE = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
#: an encoder-decoder's: 6 source tokens; a decoder step, 1 new target token over 3 cached
ENCODE = {"batch_size": 1, "encoder_sequence_length": 6}
SEQ2SEQ = {**ENCODE, "decoder_sequence_length": 1, "past_decoder_sequence_length": 3}
#: a 64x64 RGB image
GLPN = {"batch_size": 1, "num_channels": 3, "height": 64, "width": 64}


@dataclass(frozen=True)
class Entry:
    family: str
    listed: str  # the name on TT-Forge-ONNX's multi-chip list, or "" for a kin
    file: str
    exporter: str
    layers: int = 0  # for a count per layer (0: not a stack of like layers)
    dims: Mapping[str, int] | None = None  # the sizes of its symbolic dims (a decode step's)
    inputs: Callable[[], dict[str, np.ndarray]] | None = None  # its inputs, where random ones would not do


OPTIMUM = "Optimum `text-generation-with-past`, tiny random config (`{script}`)"
VISION = "tiny random config (`make_vision_families.py`)"
SEQ2SEQ_EXPORT = "Optimum `text2text-generation-with-past`'s {part}, tiny random config (`make_seq2seq_families.py`)"
ENTRIES = [
    Entry("Llama", "Llama-3.x 1B–8B", "llm_llama", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE),
    Entry("Mistral", "Ministral", "llm_mistral", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE),
    Entry("Qwen2", "Qwen2.5", "llm_qwen2", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE),
    Entry("Qwen3", "", "fam_qwen3", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Qwen3-MoE", "", "fam_qwen3_moe", OPTIMUM.format(script="make_llm_families.py") + "; 4 experts, 2 a token, "
          "split by experts (`stack-experts`)",
          2, DECODE),
    Entry("Phi-3", "Phi-3/3.5", "llm_phi3", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE),
    Entry("Phi-2", "Phi-1/2", "fam_phi", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Gemma", "Gemma", "fam_gemma", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Gemma-2", "Gemma-2", "fam_gemma2", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Bloom", "Bloom", "fam_bloom", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("GPT-2", "", "llm_gpt2", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE),
    Entry("GPT-J", "", "fam_gptj", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("GPT-NeoX", "", "fam_gpt_neox", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Falcon", "", "fam_falcon", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("GPT-BigCode", "", "fam_gpt_bigcode", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("OLMo", "", "fam_olmo", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Cohere", "", "fam_cohere", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("MPT", "", "fam_mpt", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("OPT", "", "fam_opt", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("StableLM", "", "fam_stablelm", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    Entry("Granite", "", "fam_granite", OPTIMUM.format(script="make_llm_families.py"), 2, DECODE),
    *(Entry(f"{family} {part}", "", f"fam_{name}_{part}", SEQ2SEQ_EXPORT.format(part=exported), 2, dims)
      for family, name in (("BART", "bart"), ("mBART", "mbart"), ("Marian", "marian"))
      for part, exported, dims in (("encoder", "encoder_model", ENCODE),
                                   ("decoder", "decoder_with_past_model", SEQ2SEQ))),
    Entry("BERT", "a BERT variant", "bert_opset17", "torch.onnx.export, tiny random config (`make_models.py`)", 2),
    Entry("ViT", "ViT", "vit_opset17", "torch.onnx.export, tiny random config (`make_models.py`)", 2),
    Entry("Whisper encoder", "Whisper-large", "whisper_encoder_opset17",
          "torch.onnx.export, tiny random config (`make_whisper_encoder.py`)", 2),
    Entry("ResNet-18", "", "cnn_resnet18", "timm, an eighth of its widths (`make_cnns.py`)"),
    Entry("MobileNetV3", "", "cnn_mobilenetv3", "timm, channel multiplier 0.25 (`make_cnns.py`)"),
    Entry("EfficientNet-B0", "EfficientNet", "cnn_efficientnet_b0", "timm, channel multiplier 0.25 (`make_cnns.py`)"),
    Entry("YOLOv8", "YOLOv4 (a YOLO)", "det_yolov8", "ultralytics, n's depth, 1/4 width, no NMS (`make_cnns.py`)"),
    Entry("UNet layers", "SDXL (its UNet)", "cnn_unet_tiny", "torch.onnx.export of a toy UNet (`make_cnns.py`)"),
    Entry("GLPN", "GLPN", "fam_glpn", f"Optimum `depth-estimation`, {VISION}", dims=GLPN),
    Entry("SAM vision encoder", "SAM", "fam_sam_vision", f"Optimum `feature-extraction`'s vision_encoder, {VISION}",
          dims={"batch_size": 1}),
    Entry("SAM mask decoder", "SAM", "fam_sam_decoder",
          f"Optimum `feature-extraction`'s prompt_encoder_mask_decoder, {VISION}; 2 points",
          dims={"batch_size": 1, "point_batch_size": 1, "nb_points_per_image": 2}),
    Entry("Fuyu", "Fuyu", "fam_fuyu", "torch.onnx.export (TorchScript) with its KV cache under Optimum's names, "
          "tiny random config (`make_vision_families.py`); a step of 8 tokens over 3 cached, 4 image patches at 4 of "
          "them; 2 layers: 2 collectives a layer + 2, and 1 for the patches' projection (column-parallel, gathered)",
          inputs=lambda: fuyu_feeds([1, 2, 4, 6])),
]
NOT_TRIED: list[str] = []
DEVICES = (2, 4)
#: Llama-3-70B's heads (32 query over 8 KV), for the meshes of a T3K and a Galaxy
GQA32 = Entry("Llama, 32/8 heads", "", "llm_llama_gqa32", OPTIMUM.format(script="make_llm_decoders.py"), 2, DECODE)


def fuyu_feeds(placeholders: list[int]) -> dict[str, np.ndarray]:
    """A step of Fuyu's with 3 positions cached: 8 tokens, its image
    placeholder (5) at `placeholders`, and its 4 patches."""
    rng = np.random.default_rng(0)
    ids = rng.integers(6, 128, (1, 8))
    ids[0, placeholders] = 5
    feeds = {"input_ids": ids.astype(np.int64), "image_patches": rng.standard_normal((1, 4, 48)).astype(np.float32),
             "attention_mask": np.ones((1, 11), np.int64), "position_ids": np.arange(3, 11, dtype=np.int64)[None]}
    for name in (f"past_key_values.{i}.{kv}" for i in range(2) for kv in ("key", "value")):
        feeds[name] = rng.standard_normal((1, 4, 3, 8)).astype(np.float32)
    return feeds


def row(entry: Entry, devices: int) -> str:
    """`| P | collectives | stored bytes | peak activations | verdict |`"""
    inputs = entry.inputs() if entry.inputs is not None else None
    report = check_parallel(MODELS / f"{entry.file}.onnx", devices, inputs, dims=entry.dims)
    verdict = VERDICTS[report.status]
    if report.plan is None:  # did not compile: why, briefly
        return f"| {devices} | – | – | – | {verdict}: {(report.error or 'no plan').splitlines()[0][:120]} |"
    collectives = len(report.plan.collectives)
    per_layer = f" ({(collectives - 2) / entry.layers:g} per layer + 2)" if entry.layers else ""
    dev0 = report.plan.devices[0]
    return f"| {devices} | {collectives}{per_layer} | {dev0.stored_bytes:,} | {dev0.activation_bytes:,} | {verdict} |"


def pipeline_row(entry: Entry, stages: int = 2) -> str:
    """`| cut | weights per stage | sent | the one-stage program | verdict |`"""
    path = MODELS / f"{entry.file}.onnx"
    inputs = entry.inputs() if entry.inputs is not None else None
    report = check_stages(path, stages, inputs, dims=entry.dims)
    verdict = VERDICTS[report.status]
    if report.status == NOT_COMPILED:
        return f"| – | – | – | – | {verdict}: {(report.error or '').splitlines()[0][:120]} |"
    cut = report.cut
    assert cut is not None
    layers = ", ".join(st.layers or "–" for st in cut.stages)
    weights = " / ".join(f"{st.weight_bytes:,}" for st in cut.stages)
    sent = " / ".join(f"{st.sent_bytes:,}" for st in cut.stages[:-1])
    same = "equal, bit for bit" if any("bit for bit" in n for n in report.notes) else "differs"
    return f"| {layers} | {weights} | {sent} | {same} | {verdict} |"


def mesh_row(entry: Entry, mesh: str, layout: str = LINE_LAYOUT) -> str:
    """`| mesh | collectives per axis | per layer | ring steps | stored bytes | verdict |` (for the line's
    layout, the ring steps on the mesh and on the line of R·C devices; for Galaxy's, bytes sent too)"""
    rows, cols = (int(n) for n in mesh.split("x"))
    report = check_parallel(MODELS / f"{entry.file}.onnx", rows * cols, dims=entry.dims, mesh=mesh,
                            mesh_layout=layout)
    verdict = VERDICTS[report.status]
    if report.plan is None:
        return f"| {mesh} | – | – | – | – | {verdict}: {(report.error or 'no plan').splitlines()[0][:120]} |"
    plan = report.plan
    on = [sum(c.mesh_axis == axis for c in plan.collectives) for axis in (0, 1)]
    layers = sorted(set(per_layer(plan).values()))
    steps = sum(ring_steps(c.op, c.group or 1) for c in plan.collectives)
    if layout == LINE_LAYOUT:
        line = sum(ring_steps(kind, rows * cols) for kind, _ in line_collectives(plan.collectives))
        sent = f"{steps} / {line}"
    else:
        sent = f"{steps} / {sum(c.ring_bytes_per_device for c in plan.collectives):,}"
    return (f"| {mesh} | {on[0]} / {on[1]} | {', '.join(map(str, layers))} | {sent} | "
            f"{plan.devices[0].stored_bytes:,} | {verdict} |")


def page() -> str:
    lines = [
        "# Multi-chip: the families, as tried",
        "",
        "Generated by `python -m forge_opt.tools.gen_multichip` (a test fails when it is stale). Each export is",
        "checked in under `tests/data/models/` with the script that made it; `forge-check MODEL --devices P`",
        "compiles it for P devices (`README.md`, \"Models too big for one device: tensor parallelism\") and",
        "compares the run with onnxruntime. Decoders are checked on a decode step (1 sequence, 4 new tokens",
        "over 3 cached; an encoder-decoder's, 1 new token over 3 cached and 6 source tokens); their",
        "`--decode 8` runs are in `tests/test_llm_decoders.py`, `tests/test_llm_families.py`,",
        "`tests/test_seq2seq_families.py` and (Fuyu's, after its image) `tests/test_vision_families.py`.",
        "",
        "| family | on TT-Forge-ONNX's multi-chip list as | export |",
        "|---|---|---|",
        *(f"| {e.family} | {e.listed or '–'} | `{e.file}.onnx`: {e.exporter} |" for e in ENTRIES),
        "",
        *([f"Not tried yet (no export of ours): {', '.join(NOT_TRIED)}.", ""] if NOT_TRIED else []),
        "Collectives are per run of the model (2-layer stacks: Megatron's count is 2 per layer + 2, 1 per layer",
        "+ 2 for parallel blocks, 3 per layer + 2 for an encoder-decoder's decoder: self-attention,",
        "cross-attention, MLP). Bytes are device 0's (every device holds alike): what it stores (its blocks",
        "of the weights, its constants) and the most activation bytes it holds at once.",
        "",
        "| family | P | collectives | stored bytes | peak activations | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for entry in ENTRIES:
        for devices in DEVICES:
            lines.append(f"| {entry.family} {row(entry, devices)}")
    lines += [
        "",
        "## Pipeline stages",
        "",
        "`forge-check MODEL --stages 2` cuts each decoder into 2 stages of contiguous layers, one device each",
        "(`README.md`, \"Pipeline stages\"), balanced by the weights each stores: the embedding on the first,",
        "the head on the last, each layer's KV cache on its layer's stage. Each stage's layers and stored bytes,",
        "the activation bytes the first sends the second per run, whether the outputs equal the one-stage",
        "program's, and the verdict against onnxruntime:",
        "",
        "| family | layers per stage | stored bytes per stage | sent bytes | against one stage | verdict |",
        "|---|---|---|---|---|---|",
        *(f"| {e.family} {pipeline_row(e)}" for e in ENTRIES if e.layers and e.dims is DECODE),
        "",
        "## Meshes",
        "",
        "`forge-check MODEL --mesh RxC` lays the devices on R rows of C (`README.md`, \"Meshes\"): each",
        "weight is split over all R·C devices as on a line, but K and V where R·C does not divide their KV",
        "heads and R does (2 KV heads on 2x2, 8 on 8x4): each row holds its block of them and of the KV",
        "cache. Each collective runs over one mesh axis at a time (an all-reduce: a reduce-scatter along the",
        "row, an all-reduce of that 1/C down the column, an all-gather back). Collectives down the columns",
        "(axis 0) and along the rows (axis 1), those of each decoder layer (Galaxy's hand-written layout runs",
        "9), the ring steps a run takes on the mesh and on a line of R·C devices, device 0's stored bytes,",
        "and the verdict:",
        "",
        "| family | mesh | collectives (axis 0 / axis 1) | per layer | ring steps (mesh / line) | stored bytes "
        "| verdict |",
        "|---|---|---|---|---|---|---|",
        *(f"| {e.family} {mesh_row(e, '2x2')}" for e in ENTRIES if e.layers and e.dims is DECODE),
        *(f"| {GQA32.family} {mesh_row(GQA32, mesh)}" for mesh in ("2x4", "8x4")),
        "",
        "In Galaxy's layout (`--mesh-layout galaxy`, `README.md`, \"Galaxy's layout\") the residual stream is",
        "split by hidden over the columns and each weight is a block over both axes; a family that",
        "normalises with LayerNormalization gathers the stream for it and is column-parallel on both axes.",
        "A gated MLP reduce-scatters its gate's and up projection's sums over the columns and all-gathers",
        "once before its down projection, as Galaxy's FF1 and FF3 do (`scatter-all-reduces`). Where the",
        "columns divide a row's KV heads (the 32/8-head Llama at 2x4), one reduce-scatter makes each",
        "column's heads, each device keeps its own block of the KV cache, and one all-gather joins the heads",
        "for the output projection, as Galaxy's attention does (`scatter-attention-heads`).",
        "The same columns, with the ring steps and the bytes each device sends per run:",
        "",
        "| family | mesh | collectives (axis 0 / axis 1) | per layer | ring steps / bytes sent | stored bytes "
        "| verdict |",
        "|---|---|---|---|---|---|---|",
        *(f"| {e.family} {mesh_row(e, '2x2', GALAXY_LAYOUT)}" for e in ENTRIES if e.layers and e.dims is DECODE),
        *(f"| {GQA32.family} {mesh_row(GQA32, mesh, GALAXY_LAYOUT)}" for mesh in ("2x4", "8x4")),
        "",
        "Tenstorrent's own compiler takes these programs: with `--tt-mlir`, tt-mlir (jax-tt-plugin 0.1.3, mock",
        "Blackhole p150 chips laid out as the mesh) compiles the 32-query, 8-KV-head decoder at 2x2, 2x4 and",
        "8x4 to TTNN, each collective on one mesh axis (`tests/test_executors.py`).",
    ]
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, PAGE, page, "forge_opt.tools.gen_multichip", argv)


if __name__ == "__main__":
    sys.exit(main())
