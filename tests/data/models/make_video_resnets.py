"""Export torchvision's video ResNets as users export them (TorchScript
exporter, opset 17, a clip of 8 frames of 56×56), with torchvision's own
blocks at a sixteenth of their widths and one block per stage, random weights:
R3D (3-D convolutions throughout, `r3d_18`'s blocks) and MC3 (3-D in the first
stage, then (1, 3, 3) kernels, `mc3_18`'s):

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'torchvision==0.29.0' pillow \\
        'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_video_resnets.py

Writes `video_r3d_narrow.onnx` and `video_mc3_narrow.onnx` here: input `clip` [1, 3, 8, 56, 56],
output `y` [1, 10].
"""

from __future__ import annotations

from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
from torch import nn  # pyright: ignore[reportMissingImports]
from torchvision.models.video.resnet import (  # pyright: ignore[reportMissingImports]
    BasicBlock,
    Conv3DNoTemporal,
    Conv3DSimple,
    VideoResNet,
)

HERE = Path(__file__).resolve().parent
NARROWER = 16


class NarrowVideoResNet(VideoResNet):
    """torchvision's VideoResNet with every stage NARROWER times narrower."""

    def _make_layer(self, block, conv_builder, planes, blocks, stride=1):
        if self.inplanes == 64:  # the stem's width, which VideoResNet fixes before the first stage
            self.inplanes = 64 // NARROWER
        return super()._make_layer(block, conv_builder, planes // NARROWER, blocks, stride)


def _stem() -> nn.Module:
    """torchvision's BasicStem (a (3, 7, 7) convolution), narrower."""
    return nn.Sequential(nn.Conv3d(3, 64 // NARROWER, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
                         nn.BatchNorm3d(64 // NARROWER), nn.ReLU(inplace=True))


def main() -> None:
    for name, makers in (("r3d", [Conv3DSimple] * 4), ("mc3", [Conv3DSimple] + [Conv3DNoTemporal] * 3)):
        torch.manual_seed(0)
        model = NarrowVideoResNet(BasicBlock, makers, [1, 1, 1, 1], _stem, num_classes=10)
        model.fc = nn.Linear(512 // NARROWER, 10)
        model.eval()
        for m in model.modules():  # random statistics, so that the normalisations compute something
            if isinstance(m, nn.BatchNorm3d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        torch.onnx.export(model, (torch.randn(1, 3, 8, 56, 56),), str(HERE / f"video_{name}_narrow.onnx"),
                          opset_version=17, dynamo=False, input_names=["clip"], output_names=["y"])


if __name__ == "__main__":
    main()
