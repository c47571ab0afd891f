"""Export decoder-only LLMs with their KV cache as users export them for
several devices: Hugging Face Optimum, task `text-generation-with-past`, on
tiny random configs of GPT-2 (fused Conv1D `c_attn`), LLaMA and Mistral
(4 query heads over 2 KV heads), Qwen2 (the same, with biased Q/K/V) and
Phi-3 (fused `qkv_proj` and `gate_up_proj`), and a LLaMA with Llama-3-70B's
32 query heads over 8 KV heads (`llama_gqa32`, for an 8×4 mesh):

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'optimum-onnx==0.1.0' 'optimum==2.1.0' \\
        'transformers==4.57.6' 'tokenizers==0.22.2' 'torch==2.14.1' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_llm_decoders.py [NAME ...]

Writes `llm_{gpt2,llama,qwen2,mistral,phi3,llama_gqa32}.onnx` (or those NAMEd) here (the tests only read
them): inputs `input_ids`, `attention_mask`, `position_ids`,
`past_key_values.{i}.{key,value}`; outputs `logits`, `present.{i}.{key,value}`.
Optimum exports with torch's TorchScript exporter at opset 18.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent

# two layers, so that a per-layer count of collectives can be read off
COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=64)
CONFIGS = {
    "gpt2": lambda: transformers.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64),
    "llama": lambda: transformers.LlamaConfig(**COMMON, num_key_value_heads=2),
    "qwen2": lambda: transformers.Qwen2Config(**COMMON, num_key_value_heads=2),
    "mistral": lambda: transformers.MistralConfig(**COMMON, num_key_value_heads=2, sliding_window=None),
    "phi3": lambda: transformers.Phi3Config(**COMMON, num_key_value_heads=4, pad_token_id=0),
    # every weight divides by 32 devices; heads of 4
    "llama_gqa32": lambda: transformers.LlamaConfig(**{**COMMON, "hidden_size": 128, "intermediate_size": 256,
                                                       "num_attention_heads": 32}, num_key_value_heads=8),
}
MODELS = {
    "gpt2": transformers.GPT2LMHeadModel,
    "llama": transformers.LlamaForCausalLM,
    "qwen2": transformers.Qwen2ForCausalLM,
    "mistral": transformers.MistralForCausalLM,
    "phi3": transformers.Phi3ForCausalLM,
    "llama_gqa32": transformers.LlamaForCausalLM,
}


def main() -> None:
    cli = Path(sys.executable).parent / "optimum-cli"
    for name, config in CONFIGS.items():
        if sys.argv[1:] and name not in sys.argv[1:]:
            continue
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as tmp:
            model_dir, out = Path(tmp) / "model", Path(tmp) / "onnx"
            MODELS[name](config()).save_pretrained(model_dir)
            subprocess.run([str(cli), "export", "onnx", "--model", str(model_dir), "--task",
                            "text-generation-with-past", str(out)], check=True)
            shutil.copy(out / "model.onnx", HERE / f"llm_{name}.onnx")
            print(f"wrote llm_{name}.onnx")


if __name__ == "__main__":
    main()
