"""Export the decoder families Tenstorrent's ONNX path needs several chips
for (and their kin) as users export them: Hugging Face Optimum, task
`text-generation-with-past`, tiny random configs of 2 layers (hidden 32,
4 query heads, vocabulary 128):

- parallel blocks, attention and MLP reading one input and summed: GPT-J,
  GPT-NeoX, Phi-2 (`phi`), Falcon (old architecture, multi-query);
- multi-query attention: GPT-BigCode, Falcon;
- QK-norm and other norms: Gemma, Gemma-2, Qwen3, OLMo, Cohere;
- ALiBi and learned positions: Bloom, MPT, OPT; StableLM, Granite;
- a mixture of experts: Qwen3-MoE.

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'optimum-onnx==0.1.0' 'optimum==2.1.0' \\
        'transformers==4.57.6' 'tokenizers==0.22.2' 'torch==2.14.1' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_llm_families.py [NAME ...]

Writes `fam_{name}.onnx` here (inputs `input_ids`, `attention_mask`, often
`position_ids`, `past_key_values.{i}.{key,value}`; outputs `logits`,
`present.{i}.{key,value}`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers as t  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent

COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=64)
CONFIGS = {
    "gptj": lambda: t.GPTJConfig(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64, rotary_dim=4),
    "gpt_neox": lambda: t.GPTNeoXConfig(**COMMON),
    "phi": lambda: t.PhiConfig(**COMMON, pad_token_id=0),
    "falcon": lambda: t.FalconConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     multi_query=True, parallel_attn=True, new_decoder_architecture=False,
                                     bias=False, alibi=False),
    "gpt_bigcode": lambda: t.GPTBigCodeConfig(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                              multi_query=True),
    "gemma": lambda: t.GemmaConfig(**COMMON, num_key_value_heads=2, head_dim=8),
    "gemma2": lambda: t.Gemma2Config(**COMMON, num_key_value_heads=2, head_dim=8, sliding_window=64),
    "qwen3": lambda: t.Qwen3Config(**COMMON, num_key_value_heads=2, head_dim=8),
    "olmo": lambda: t.OlmoConfig(**COMMON, pad_token_id=0),
    "cohere": lambda: t.CohereConfig(**COMMON, num_key_value_heads=2, pad_token_id=0),
    "bloom": lambda: t.BloomConfig(vocab_size=128, hidden_size=32, n_layer=2, n_head=4),
    "mpt": lambda: t.MptConfig(vocab_size=128, d_model=32, n_layers=2, n_heads=4, max_seq_len=64),
    "opt": lambda: t.OPTConfig(vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=64, word_embed_proj_dim=32),
    "stablelm": lambda: t.StableLmConfig(**COMMON, num_key_value_heads=2),
    "granite": lambda: t.GraniteConfig(**COMMON, num_key_value_heads=2),
    # 4 experts of 2 per token; Optimum exports the dispatch as traced: per expert a NonZero of its tokens
    "qwen3_moe": lambda: t.Qwen3MoeConfig(**COMMON, num_key_value_heads=2, head_dim=8, moe_intermediate_size=16,
                                          num_experts=4, num_experts_per_tok=2, norm_topk_prob=True),
}


def export(model, task: str, files: dict[str, str]) -> None:
    """Save `model`, export it as `optimum-cli export onnx --task TASK` does,
    and copy the exported `files` (Optimum's name: ours) here."""
    cli = Path(sys.executable).parent / "optimum-cli"
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, out = Path(tmp) / "model", Path(tmp) / "onnx"
        model.save_pretrained(model_dir)
        subprocess.run([str(cli), "export", "onnx", "--model", str(model_dir), "--task", task, str(out)], check=True)
        for exported, ours in files.items():
            shutil.copy(out / exported, HERE / ours)
            print(f"wrote {ours}")


def main(names: list[str]) -> None:
    for name in names or CONFIGS:
        torch.manual_seed(0)
        export(t.AutoModelForCausalLM.from_config(CONFIGS[name]()), "text-generation-with-past",
               {"model.onnx": f"fam_{name}.onnx"})


if __name__ == "__main__":
    main(sys.argv[1:])
