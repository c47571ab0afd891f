"""What the window ops (convolutions and pooling) share: their ONNX
attributes read as strides, dilations and pads, and a Pad before them folded
in. No lowering of its own: the families import it, never each other."""

from __future__ import annotations

import math

from forge_opt.dialects import tir


def spatial(op, e, x_shape, kernel, name):
    """Strides, dilations and [top, left, bottom, right] pads of a 2-D window
    op, with auto_pad resolved."""
    if len(x_shape) != 4:
        raise e.error(f"only 2-D {name} (4-D input) is supported, the input has rank {len(x_shape)}")
    strides = list(op.strides.get_values()) if op.strides is not None else [1, 1]
    dilations = list(op.dilations.get_values()) if op.dilations is not None else [1, 1]
    auto_pad = op.auto_pad.data
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads_begin, pads_end = [], []
        for size, k, s, d in zip(x_shape[2:], kernel, strides, dilations):
            out = math.ceil(size / s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin, end = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
            pads_begin.append(begin)
            pads_end.append(end)
        pads = [pads_begin[0], pads_begin[1], pads_end[0], pads_end[1]]
    elif auto_pad == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = list(op.pads.get_values()) if op.pads is not None else [0, 0, 0, 0]
        # ONNX: [x1_begin, x2_begin, x1_end, x2_end] = [top, left, bottom, right]
    return strides, dilations, pads


def fold_spatial_pad(x, pads: list[int], identity: float):
    """(input, pads) with a constant `tir.pad` of `identity` on the two
    spatial dims of `x` folded into the op's [top, left, bottom, right]
    pads: exporters write TF-style padding as a Pad before Conv or pooling,
    and Forge pads inside the op for free. The Pad goes if nothing else uses it."""
    while isinstance(pad := x.owner, tir.PadOp) and pad.value.value.data == identity:
        p = list(pad.pads.get_values())
        if len(p) != 8 or any(p[:4]):
            break
        top, bottom, left, right = p[4:]
        x, pads = pad.input, [pads[0] + top, pads[1] + left, pads[2] + bottom, pads[3] + right]
    return x, pads
