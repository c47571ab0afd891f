"""Export a grouped-query attention block (4 query heads over 2 KV heads,
causal, q/k/v/o projections without bias) in the three forms PyTorch users
get, for the tensor-parallel tests:

- `gqa_interleave.onnx`: K/V repeated by `repeat_interleave` (HF's
  `repeat_kv` order: query head j reads KV head j // 2), which the
  TorchScript exporter writes as Unsqueeze, Tile and Reshape;
- `gqa_tile.onnx`: K/V repeated by `repeat` (query head j reads KV head
  j mod 2), a Tile along the heads;
- `gqa_attention_op23.onnx`: `scaled_dot_product_attention(enable_gqa=True)`
  through the dynamo exporter at opset 23, one ONNX `Attention` node.

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'onnx==1.23.2' 'onnxscript==0.7.2'
    /tmp/exp/bin/python tests/data/models/make_gqa_attention.py
"""

from __future__ import annotations

from pathlib import Path

import onnx
import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import torch.nn.functional as F  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent
HIDDEN, HEADS, KV_HEADS = 32, 4, 2
WIDTH = HIDDEN // HEADS


class Attention(torch.nn.Module):
    def __init__(self, form: str):
        super().__init__()
        self.form = form
        self.q = torch.nn.Linear(HIDDEN, HEADS * WIDTH, bias=False)
        self.k = torch.nn.Linear(HIDDEN, KV_HEADS * WIDTH, bias=False)
        self.v = torch.nn.Linear(HIDDEN, KV_HEADS * WIDTH, bias=False)
        self.o = torch.nn.Linear(HEADS * WIDTH, HIDDEN, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, HEADS, WIDTH).transpose(1, 2)
        k = self.k(x).view(b, s, KV_HEADS, WIDTH).transpose(1, 2)
        v = self.v(x).view(b, s, KV_HEADS, WIDTH).transpose(1, 2)
        n = HEADS // KV_HEADS
        if self.form == "interleave":
            k, v = k.repeat_interleave(n, dim=1), v.repeat_interleave(n, dim=1)
        elif self.form == "tile":
            k, v = k.repeat(1, n, 1, 1), v.repeat(1, n, 1, 1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.form == "op23")
        return self.o(y.transpose(1, 2).reshape(b, s, HIDDEN))


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 5, HIDDEN)
    names = dict(input_names=["x"], output_names=["y"])
    for form in ("interleave", "tile"):
        torch.onnx.export(Attention(form).eval(), (x,), str(HERE / f"gqa_{form}.onnx"), dynamo=False,
                          opset_version=18, **names)
    path = HERE / "gqa_attention_op23.onnx"
    torch.onnx.export(Attention("op23").eval(), (x,), str(path), dynamo=True, opset_version=23, **names)
    onnx.save(onnx.load(str(path)), str(path))  # the weights inline: one file to check in
    (HERE / "gqa_attention_op23.onnx.data").unlink(missing_ok=True)


if __name__ == "__main__":
    main()
