"""Export Optimum's merged seq2seq decoders (`decoder_model_merged.onnx`: one
`If` on the bool input `use_cache_branch`, both branches reusing many value
names) for tiny random T5 and Whisper configurations, as users export them:

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'optimum-onnx==0.1.0' 'optimum==2.1.0' \\
        'transformers==4.57.6' 'tokenizers==0.22.2' torch 'onnx==1.23.2' sentencepiece
    PYTHONHASHSEED=0 /tmp/exp/bin/python tests/data/models/make_merged_decoders.py

Writes `{t5,whisper}_decoder_merged.onnx` here (the tests only read them).
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


def t5(folder: Path) -> str:
    config = transformers.T5Config(vocab_size=64, d_model=16, d_kv=4, d_ff=32, num_layers=1, num_decoder_layers=1,
                                   num_heads=2, relative_attention_num_buckets=8, decoder_start_token_id=0)
    transformers.T5ForConditionalGeneration(config).save_pretrained(folder)
    return "text2text-generation-with-past"


def whisper(folder: Path) -> str:
    config = transformers.WhisperConfig(vocab_size=64, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
                                        encoder_attention_heads=2, decoder_attention_heads=2, d_model=16,
                                        encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=1500,
                                        max_target_positions=32, pad_token_id=1, bos_token_id=2, eos_token_id=3,
                                        decoder_start_token_id=2, suppress_tokens=[], begin_suppress_tokens=[])
    transformers.WhisperForConditionalGeneration(config).save_pretrained(folder)
    return "automatic-speech-recognition-with-past"


def main() -> None:
    cli = Path(sys.executable).parent / "optimum-cli"
    for name, make in (("t5", t5), ("whisper", whisper)):
        torch.manual_seed(0)
        with tempfile.TemporaryDirectory() as tmp:
            model_dir, out = Path(tmp) / "model", Path(tmp) / "onnx"
            task = make(model_dir)
            if name == "t5":  # the exporter wants a tokenizer for T5's dummy inputs: a tiny SentencePiece-free one
                transformers.PreTrainedTokenizerFast(
                    tokenizer_object=_tokenizer(64), pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
                ).save_pretrained(model_dir)
            subprocess.run([str(cli), "export", "onnx", "--model", str(model_dir), "--task", task, str(out)],
                           check=True)
            shutil.copy(out / "decoder_model_merged.onnx", HERE / f"{name}_decoder_merged.onnx")
            print(f"wrote {name}_decoder_merged.onnx")


def _tokenizer(size: int):
    from tokenizers import Tokenizer, models  # pyright: ignore[reportMissingImports]

    vocab = {"<pad>": 0, "</s>": 1, "<unk>": 2, **{f"t{i}": i for i in range(3, size)}}
    return Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))


if __name__ == "__main__":
    main()
