"""Export torchvision's detectors as users export them (TorchScript exporter,
opset 17, a list of one 3×128×128 image, post-processing in the graph: NMS,
TopK, RoiAlign, the mask and keypoint heads' Loops), on a backbone of three
strided convolutions and heads narrowed to fit a test, random weights:

    python -m venv /tmp/exp && /tmp/exp/bin/pip install 'torch==2.14.1' 'torchvision==0.29.0' pillow \\
        'onnx==1.23.2'
    /tmp/exp/bin/python tests/data/models/make_detectors.py

Writes `det_{faster_rcnn,retinanet,fcos,mask_rcnn,keypoint_rcnn}.onnx` here, input `image`
[3, 128, 128], outputs named as torchvision's result dicts. RetinaNet and FCOS keep every score
(`score_thresh=0`): with random weights their scores are alike to 1e-7, so the boxes kept depend
on rounding, which `forge-check --fallback` reports as ill-conditioned.
"""

from __future__ import annotations

from pathlib import Path

import torch  # pyright: ignore[reportMissingImports]  (optional: only to remake the models)
from torch import nn  # pyright: ignore[reportMissingImports]
from torchvision.models.detection import (  # pyright: ignore[reportMissingImports]
    FCOS,
    FasterRCNN,
    KeypointRCNN,
    MaskRCNN,
    RetinaNet,
)
from torchvision.models.detection.anchor_utils import AnchorGenerator  # pyright: ignore[reportMissingImports]
from torchvision.models.detection.faster_rcnn import (  # pyright: ignore[reportMissingImports]
    FastRCNNPredictor,
    TwoMLPHead,
)
from torchvision.models.detection.keypoint_rcnn import (  # pyright: ignore[reportMissingImports]
    KeypointRCNNHeads,
    KeypointRCNNPredictor,
)
from torchvision.models.detection.mask_rcnn import (  # pyright: ignore[reportMissingImports]
    MaskRCNNHeads,
    MaskRCNNPredictor,
)
from torchvision.ops import MultiScaleRoIAlign  # pyright: ignore[reportMissingImports]

HERE = Path(__file__).resolve().parent
SIZE = dict(min_size=128, max_size=128)


class Backbone(nn.Sequential):
    def __init__(self, channels: int = 8):
        super().__init__(nn.Conv2d(3, channels, 3, 2, 1), nn.ReLU(), nn.Conv2d(channels, channels, 3, 2, 1), nn.ReLU(),
                         nn.Conv2d(channels, channels, 3, 2, 1), nn.ReLU())
        self.out_channels = channels


def _anchors() -> AnchorGenerator:
    return AnchorGenerator(sizes=((16, 32, 64),), aspect_ratios=((0.5, 1.0, 2.0),))


def _two_stage(classes: int) -> dict:
    return dict(num_classes=None, rpn_anchor_generator=_anchors(), box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2),
                box_head=TwoMLPHead(8 * 49, 32), box_predictor=FastRCNNPredictor(32, classes), **SIZE)


MODELS = {
    "faster_rcnn": (lambda: FasterRCNN(Backbone(), **_two_stage(3)), ["boxes", "labels", "scores"]),
    "retinanet": (lambda: RetinaNet(Backbone(), num_classes=3, anchor_generator=_anchors(), score_thresh=0.0, **SIZE),
                  ["boxes", "scores", "labels"]),
    # FCOS's head normalises in groups of 32 channels
    "fcos": (lambda: FCOS(Backbone(32), num_classes=3, score_thresh=0.0, **SIZE,
                          anchor_generator=AnchorGenerator(sizes=((8,),), aspect_ratios=((1.0,),))),
             ["boxes", "scores", "labels"]),
    "mask_rcnn": (lambda: MaskRCNN(Backbone(), mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
                                   mask_head=MaskRCNNHeads(8, (8, 8), 1), mask_predictor=MaskRCNNPredictor(8, 8, 3),
                                   **_two_stage(3)),
                  ["boxes", "labels", "scores", "masks"]),
    "keypoint_rcnn": (lambda: KeypointRCNN(Backbone(), keypoint_roi_pool=MultiScaleRoIAlign(["0"], 14, 2),
                                           keypoint_head=KeypointRCNNHeads(8, (8, 8)),
                                           keypoint_predictor=KeypointRCNNPredictor(8, 5), **_two_stage(2)),
                      ["boxes", "labels", "scores", "keypoints", "keypoints_scores"]),
}


def main() -> None:
    for name, (make, outputs) in MODELS.items():
        torch.manual_seed(0)
        model = make().eval()
        torch.onnx.export(model, ([torch.rand(3, 128, 128)],), str(HERE / f"det_{name}.onnx"), opset_version=17,
                          dynamo=False, input_names=["image"], output_names=outputs)


if __name__ == "__main__":
    main()
