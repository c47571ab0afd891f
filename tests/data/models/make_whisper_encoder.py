"""Export a Whisper-style audio encoder (two Conv1d with GELU, sinusoidal
positions, pre-LayerNorm attention blocks) as PyTorch users do, for the
op-count benchmark: a tiny random `WhisperConfig`, the encoder alone,
TorchScript exporter at opset 17, LayerNormalization as one node.

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'transformers==4.57.6' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_whisper_encoder.py

Writes `whisper_encoder_opset17.onnx` here: input `input_features`
[1, 8, 32] (mel bins by frames), output `last_hidden_state` [1, 16, 32].
"""

from __future__ import annotations

from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the model)
import transformers  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent


class Encoder(torch.nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_features):
        return self.encoder(input_features).last_hidden_state


def main() -> None:
    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        d_model=32, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=64, num_mel_bins=8,
        max_source_positions=16, decoder_layers=1, decoder_attention_heads=4, decoder_ffn_dim=64, vocab_size=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
    )
    model = transformers.WhisperModel(config).eval()
    features = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)
    torch.onnx.export(Encoder(model.get_encoder()), (features,), str(HERE / "whisper_encoder_opset17.onnx"),
                      dynamo=False, opset_version=17, input_names=["input_features"],
                      output_names=["last_hidden_state"])


if __name__ == "__main__":
    main()
