"""Export the encoder-decoder translation families as users export them:
Hugging Face Optimum, task `text2text-generation-with-past`, tiny random
configs (2 encoder and 2 decoder layers, d_model 32, 4 heads, vocabulary
128): BART, mBART, Marian.

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'optimum-onnx==0.1.0' 'optimum==2.1.0' \\
        'transformers==4.57.6' 'tokenizers==0.22.2' 'torch==2.14.1' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_seq2seq_families.py [NAME ...]

Writes, for each, Optimum's `encoder_model.onnx` as `fam_{name}_encoder.onnx`
(inputs `input_ids`, `attention_mask`; output `last_hidden_state`) and its
`decoder_with_past_model.onnx` as `fam_{name}_decoder.onnx` (inputs
`encoder_attention_mask`, `input_ids`, `past_key_values.{i}.{decoder,encoder}.{key,value}`;
outputs `logits`, `present.{i}.decoder.{key,value}`: the cross-attention's
cache is the encoder's, fed unchanged every step).
"""

from __future__ import annotations

import sys

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers as t  # pyright: ignore[reportMissingImports]
from make_llm_families import export  # (run as a script: this folder is on the path)

COMMON = dict(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
              decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
MODELS = {
    "bart": lambda: t.BartForConditionalGeneration(t.BartConfig(**COMMON)),
    "mbart": lambda: t.MBartForConditionalGeneration(t.MBartConfig(**COMMON)),
    "marian": lambda: t.MarianMTModel(t.MarianConfig(**COMMON, decoder_start_token_id=0, pad_token_id=0)),
}
FILES = {"encoder_model.onnx": "encoder", "decoder_with_past_model.onnx": "decoder"}


def main(names: list[str]) -> None:
    for name in names or MODELS:
        torch.manual_seed(0)
        export(MODELS[name](), "text2text-generation-with-past",
               {exported: f"fam_{name}_{part}.onnx" for exported, part in FILES.items()})


if __name__ == "__main__":
    main(sys.argv[1:])
