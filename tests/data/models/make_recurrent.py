"""Export recurrent models as PyTorch users do (the TorchScript exporter,
opset 17, random weights), for tensor parallelism across devices (issue 52):

- `rnn_crnn_bilstm.onnx`: an OCR recogniser in the CRNN shape (a convolution
  stack over a [1, 1, 32, 128] text line, its columns as 32 steps, a
  2-layer bidirectional LSTM of 96 hidden units, a per-step classifier of
  40 characters): output `logits` [32, 1, 40];
- `rnn_gru_tagger.onnx`: a sequence tagger (an embedding of 500 tokens, a
  bidirectional GRU of 64 hidden units, whose ONNX form has
  linear_before_reset=1, a per-token classifier of 9 tags) over
  `tokens` [1, 24]: output `tags` [1, 24, 9];
- `rnn_lstm_cell_unrolled.onnx`: an `nn.LSTMCell` stepped in a Python
  loop over 16 steps, which the exporter unrolls: every step's two Gemms
  read the same two weights (one initializer, 16 readers), then a head of
  10 classes: input `x` [16, 1, 48], output `logits` [1, 10];
- `shared_albert.onnx`: transformers' ALBERT, whose 4 layers are one layer's
  weights read 4 times (hidden 64, 4 heads, embeddings of 32 mapped up),
  over `input_ids` [1, 8]: outputs `last_hidden_state` [1, 8, 64] and `pooler_output` [1, 64].

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.0' 'transformers==4.57.6' 'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_recurrent.py
"""

from __future__ import annotations

from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import transformers  # pyright: ignore[reportMissingImports]
from torch import nn  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).parent


class CRNN(nn.Module):
    def __init__(self, classes: int = 40, hidden: int = 96):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),  # 16x64
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d((2, 2)),  # 8x32
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d((8, 1)),  # 1x32
        )
        self.rnn = nn.LSTM(64, hidden, num_layers=2, bidirectional=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, image):
        features = self.cnn(image).squeeze(2).permute(2, 0, 1)  # [steps, batch, channels]
        steps, _ = self.rnn(features)
        return self.head(steps)


class Tagger(nn.Module):
    def __init__(self, vocab: int = 500, width: int = 48, hidden: int = 64, tags: int = 9):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.GRU(width, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        states, _ = self.rnn(self.embed(tokens))
        return self.head(states)


class UnrolledCell(nn.Module):
    def __init__(self, width: int = 48, hidden: int = 128, classes: int = 10):
        super().__init__()
        self.cell = nn.LSTMCell(width, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        h = torch.zeros(x.shape[1], self.cell.hidden_size)
        c = torch.zeros_like(h)
        for t in range(x.shape[0]):
            h, c = self.cell(x[t], (h, c))
        return self.head(h)


def _randomize_norms(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)


def export(model: nn.Module, example: torch.Tensor, name: str, inputs: list[str], outputs: list[str]) -> None:
    model.eval()
    torch.onnx.export(model, (example,), str(HERE / name), input_names=inputs, output_names=outputs,
                      opset_version=17, dynamo=False)


def main() -> None:
    torch.manual_seed(0)
    with torch.no_grad():
        crnn = CRNN()
        _randomize_norms(crnn)
        export(crnn, torch.randn(1, 1, 32, 128), "rnn_crnn_bilstm.onnx", ["image"], ["logits"])
        export(Tagger(), torch.randint(0, 500, (1, 24)), "rnn_gru_tagger.onnx", ["tokens"], ["tags"])
        export(UnrolledCell(), torch.randn(16, 1, 48), "rnn_lstm_cell_unrolled.onnx", ["x"], ["logits"])
        albert = transformers.AlbertModel(transformers.AlbertConfig(
            vocab_size=128, embedding_size=32, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64))
        export(albert, torch.randint(0, 128, (1, 8)), "shared_albert.onnx", ["input_ids"],
               ["last_hidden_state", "pooler_output"])


if __name__ == "__main__":
    main()
