"""Export the CNNs Tenstorrent's ONNX path lists as needing several chips,
as their users export them (timm models, the TorchScript exporter, opset 17,
64×64 images, random weights with random normalisation statistics), at their
own depths and narrower, 10 classes:

- `cnn_resnet18.onnx`: timm `resnet18` at an eighth of its widths (channels 8, 16, 32, 64);
- `cnn_mobilenetv3.onnx`: timm `mobilenetv3_large_100` at channel multiplier
  0.25 (depthwise convolutions, squeeze-and-excitation, hard-swish);
- `cnn_efficientnet_b0.onnx`: timm `efficientnet_b0` at channel multiplier
  0.25 (depthwise convolutions, squeeze-and-excitation, SiLU);
- `cnn_convnext_atto.onnx`: timm `convnext_atto` at widths 16, 32, 64, 128 and depths 1, 1, 2, 1
  (depthwise 7×7 convolutions, LayerNorm over channels last, the pointwise MLP as MatMuls);
- `cnn_unet_tiny.onnx`: a diffusion UNet's kinds of layers at toy width
  (`TinyUNet`; input `x` [1, 3, 32, 32], output `y` [1, 4, 32, 32]);
- `det_yolov8.onnx`: ultralytics YOLOv8 at n's depth and a quarter of its
  width, exported without NMS (`YOLO(...).export(format="onnx")`, 128×128,
  3 classes): the raw head, [1, 7, 336].

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.0' 'torchvision==0.29.0' 'timm==1.0.29' \\
        'onnx==1.23.2' pyyaml psutil opencv-python-headless matplotlib scipy requests tqdm polars \\
        ultralytics-thop pandas
    /tmp/exp/bin/pip install --no-deps 'ultralytics==8.4.190'
    YOLO_OFFLINE=1 /tmp/exp/bin/python tests/data/models/make_cnns.py

Input `x` [1, 3, 64, 64], output `logits` [1, 10] (YOLO: `images`, `output0`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import timm  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
import torch  # pyright: ignore[reportMissingImports]
import ultralytics  # pyright: ignore[reportMissingImports]
import yaml  # pyright: ignore[reportMissingModuleSource]
from timm.models import efficientnet, mobilenetv3  # pyright: ignore[reportMissingImports]
from torch import nn  # pyright: ignore[reportMissingImports]
from ultralytics import YOLO  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent

TIMM = {  # a registered model with its own widths, or one of timm's generators with a channel multiplier
    "cnn_resnet18": lambda: timm.create_model("resnet18", num_classes=10, channels=(8, 16, 32, 64), stem_width=8),
    "cnn_mobilenetv3": lambda: mobilenetv3._gen_mobilenet_v3("mobilenetv3_large_100", 0.25, num_classes=10),
    "cnn_efficientnet_b0": lambda: efficientnet._gen_efficientnet("efficientnet_b0", 0.25, num_classes=10),
    "cnn_convnext_atto": lambda: timm.create_model("convnext_atto", num_classes=10, dims=(16, 32, 64, 128),
                                                   depths=(1, 1, 2, 1)),
}


def export_timm(name: str, make) -> None:
    torch.manual_seed(0)
    model = make().eval()
    for m in model.modules():  # random statistics, so that the normalisations compute something
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    torch.onnx.export(model, (torch.randn(1, 3, 64, 64),), str(HERE / f"{name}.onnx"), opset_version=17,
                      dynamo=False, input_names=["x"], output_names=["logits"])


class TinyUNet(nn.Module):
    """The layers of a diffusion UNet (SDXL's), one or two of each at toy
    width: GroupNorm and SiLU, a strided convolution down, a transposed
    convolution up (and a grouped one), nearest and bilinear upsampling,
    a skip joined along channels, 4 output channels (a latent's)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp, self.norm1 = nn.Conv2d(3, 16, 3, padding=1), nn.GroupNorm(4, 16)
        self.down, self.norm2 = nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(8, 32)
        self.mid = nn.Conv2d(32, 32, 3, padding=1)
        self.up, self.up_grouped = nn.ConvTranspose2d(32, 16, 2, stride=2), nn.ConvTranspose2d(16, 16, 3, padding=1,
                                                                                               groups=4)
        self.nearest, self.bilinear = nn.Upsample(scale_factor=2), nn.Upsample(scale_factor=2, mode="bilinear")
        self.out = nn.Conv2d(32, 4, 3, padding=1)

    def forward(self, x):
        h0 = nn.functional.silu(self.norm1(self.inp(x)))
        h1 = nn.functional.silu(self.norm2(self.down(h0)))
        h2 = self.mid(h1)
        u = self.up_grouped(nn.functional.silu(self.up(h2)))
        joined = torch.cat([u, h0], 1) + self.nearest(h2) + self.bilinear(h1)
        return self.out(joined)


def export_unet() -> None:
    torch.manual_seed(0)
    torch.onnx.export(TinyUNet().eval(), (torch.randn(1, 3, 32, 32),), str(HERE / "cnn_unet_tiny.onnx"),
                      opset_version=17, dynamo=False, input_names=["x"], output_names=["y"])


def export_yolo() -> None:
    source = Path(str(ultralytics.__file__)).parent / "cfg" / "models" / "v8" / "yolov8.yaml"
    config = yaml.safe_load(source.read_text())
    config["nc"] = 3
    config["scales"] = {"t": [0.33, 0.0625, 256]}  # [depth, width, max channels]: n's depth, 1/4 of n's width
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        Path("yolov8t.yaml").write_text(yaml.safe_dump(config))
        torch.manual_seed(0)
        exported = YOLO("yolov8t.yaml").export(format="onnx", imgsz=128, simplify=False, opset=17, dynamic=False)
        shutil.copyfile(str(exported), HERE / "det_yolov8.onnx")
        os.chdir(here)


def main() -> None:
    for name, make in TIMM.items():
        export_timm(name, make)
    export_unet()
    export_yolo()


if __name__ == "__main__":
    main()
