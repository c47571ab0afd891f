"""Export an ultralytics YOLOv8 detector as its users export it,
`YOLO(...).export(format="onnx", nms=True)`: NMS in the graph, 128×128 input,
at YOLOv8n's depths and a quarter of its width, 3 classes, random
weights, every score kept (`conf=0`):

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'torchvision==0.29.0' 'onnx==1.23.2' \\
        pyyaml psutil opencv-python-headless matplotlib scipy requests tqdm polars ultralytics-thop pandas
    /tmp/exp/bin/pip install --no-deps 'ultralytics==8.4.190'
    YOLO_OFFLINE=1 /tmp/exp/bin/python tests/data/models/make_yolo.py

Writes `det_yolov8_nms.onnx` here: input `images` [1, 3, 128, 128], output `output0` [1, 300, 6]
(box, score, class). With random weights the three class scores are alike, and which one an
ArgMax picks is decided by rounding.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the model)
import ultralytics  # pyright: ignore[reportMissingImports]
import yaml  # pyright: ignore[reportMissingModuleSource]
from ultralytics import YOLO  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent


def main() -> None:
    source = Path(str(ultralytics.__file__)).parent / "cfg" / "models" / "v8" / "yolov8.yaml"
    config = yaml.safe_load(source.read_text())
    config["nc"] = 3
    config["scales"] = {"t": [0.33, 0.0625, 256]}  # [depth, width, max channels]: n's depth, 1/4 of n's width
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        Path("yolov8t.yaml").write_text(yaml.safe_dump(config))
        torch.manual_seed(0)
        exported = YOLO("yolov8t.yaml").export(format="onnx", imgsz=128, nms=True, simplify=False, opset=17,
                                               dynamic=False, conf=0.0)
        shutil.copyfile(str(exported), HERE / "det_yolov8_nms.onnx")


if __name__ == "__main__":
    main()
