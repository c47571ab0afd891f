"""Quantize checked-in exports as users of onnxruntime do (its dynamic
quantization, which `optimum-cli onnxruntime quantize` runs): every MatMul
with a constant weight becomes DynamicQuantizeLinear of its input and
MatMulInteger with the 8-bit weight and its zero point, then Cast and Mul
by the two scales.

- `q_bart_encoder_int8.onnx`: `fam_bart_encoder.onnx` (Optimum's BART
  encoder, 2 layers) with int8 weights, one scale a weight;
- `q_bart_encoder_int8_per_channel.onnx`: the same, one scale and zero
  point per output column;
- `q_llama_int8.onnx`: `llm_llama.onnx` (Optimum's LLaMA with its KV
  cache, 4 query heads over 2 KV heads) with int8 weights.

Run from the repository's root with the project's own onnxruntime (pinned
in pyproject.toml):

    .venv/bin/python tests/data/models/make_quantized.py
"""

from __future__ import annotations

from pathlib import Path

from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = Path(__file__).parent


def main() -> None:
    source = HERE / "fam_bart_encoder.onnx"
    quantize_dynamic(source, HERE / "q_bart_encoder_int8.onnx", weight_type=QuantType.QInt8)
    quantize_dynamic(source, HERE / "q_bart_encoder_int8_per_channel.onnx", weight_type=QuantType.QInt8,
                     per_channel=True)
    quantize_dynamic(HERE / "llm_llama.onnx", HERE / "q_llama_int8.onnx", weight_type=QuantType.QInt8)


if __name__ == "__main__":
    main()
