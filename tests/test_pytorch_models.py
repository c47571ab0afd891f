"""Models exported from PyTorch (tests/data/models/make_models.py: a CNN,
GPT-2, BERT, ViT, ResNet and MobileNetV2 from transformers, random weights,
opsets 14 and 17; make_swin.py: torchvision's Swin at Swin-T's depths, whose
blocks pad by sizes computed at run time, one after another;
make_video_resnets.py: its R3D and MC3 with 3-D convolutions) compile to
Forge Python that computes what onnxruntime computes."""

from pathlib import Path

import onnx
import pytest

from forge_opt.check import MATCH, check_model, compare_output
from forge_opt.execution.engine import compile_model, random_inputs, run_compiled

MODELS_DIR = Path(__file__).parent / "data" / "models"
# the symbolic-dim exports need sizes: tests/test_dynamic_shapes.py checks them
# (the merged seq2seq decoders branch on a run-time If: tests/test_merged_decoders.py checks them; the
# decoders with a KV cache need sizes: tests/test_llm_decoders.py, tests/test_llm_families.py; the detectors
# need the CPU for their post-processing: tests/test_detectors.py; the quantized encoders need sizes:
# tests/test_tp_quantized.py)
MODELS = sorted(
    p for p in MODELS_DIR.glob("*.onnx")
    if "_dynamic" not in p.stem and not p.stem.startswith(("splits", "llm_", "fam_", "det_", "q_"))
    and not p.stem.endswith("_merged")
)


ARCHITECTURES = ["bert", "gpt2", "mobilenet_v2", "resnet", "tiny_cnn", "vit"]


def _export(arch: str, opset: int) -> Path:
    return MODELS_DIR / f"{arch}_opset{opset}.onnx"


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_both_exports_compute_alike(arch):
    """The opset-14 and opset-17 exports of one architecture (one set of
    weights) are different graphs; compiled, they compute the same outputs
    on the same inputs, and each declares the opset its name says."""
    outputs = []
    for opset in (14, 17):
        model = onnx.load(_export(arch, opset))
        declared = {o.version for o in model.opset_import if o.domain in ("", "ai.onnx")}
        assert declared == {opset}
        compiled = compile_model(model)
        outputs.append(run_compiled(compiled, random_inputs(compiled.module, seed=1)))
    assert outputs[0] and len(outputs[0]) == len(outputs[1])
    for name, (a, b) in enumerate(zip(*outputs)):
        result = compare_output(str(name), b, a, rtol=1e-4, atol=1e-4, min_pcc=0.999)
        assert result.ok, f"output {name}: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_pytorch_model(path):
    report = check_model(str(path))
    assert report.status == MATCH, report.format() + report.error
    # weights load as parameters, or (a Conv with its BatchNormalization folded in) as computed constants
    assert "self.get_parameter(" in report.forge_python or "_constants.npz" in report.forge_python
