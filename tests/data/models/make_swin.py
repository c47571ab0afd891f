"""Export torchvision's Swin Transformer as users export it (TorchScript
exporter, opset 17, a fixed 224×224 input), at Swin-T's depths (2, 2, 6, 2
blocks) and window (7) but 8 channels, with random weights:

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'torchvision==0.29.0' pillow \\
        'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_swin.py

Writes `swin_t_narrow.onnx` here: input `x` [1, 3, 224, 224], output `y` [1, 10]. Each block pads
its windows by a size the graph computes from the previous block's shape (`Shape → Mod → Pad`),
so folding resolves the 12 blocks one after another.
"""

from __future__ import annotations

from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the model)
from torchvision.models.swin_transformer import SwinTransformer  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent


def main() -> None:
    torch.manual_seed(0)
    model = SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2, 6, 2], num_heads=[1, 2, 4, 8],
                            window_size=[7, 7], stochastic_depth_prob=0.0, num_classes=10).eval()
    torch.onnx.export(model, (torch.randn(1, 3, 224, 224),), str(HERE / "swin_t_narrow.onnx"), opset_version=17,
                      dynamo=False, input_names=["x"], output_names=["y"])


if __name__ == "__main__":
    main()
