"""What the window ops (convolutions and pooling) share: their ONNX
attributes read as strides, dilations and pads, and a Pad before them folded
in. No lowering of its own: the families import it, never each other."""

from __future__ import annotations

import math

from forge_opt.dialects import tir


def window(op, x_shape, kernel) -> tuple[list[int], list[int], list[int], list[int]]:
    """Strides, dilations, and begin and end pads per spatial dim of a
    window op of any rank, with auto_pad resolved."""
    n = len(x_shape) - 2
    strides = list(op.strides.get_values()) if op.strides is not None else [1] * n
    dilations = list(op.dilations.get_values()) if op.dilations is not None else [1] * n
    auto_pad = op.auto_pad.data
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for size, k, s, d in zip(x_shape[2:], kernel, strides, dilations):
            total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
            small, large = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else large)
            end.append(large if auto_pad == "SAME_UPPER" else small)
        return strides, dilations, begin, end
    if auto_pad == "VALID" or op.pads is None:
        return strides, dilations, [0] * n, [0] * n
    pads = list(op.pads.get_values())  # ONNX: [x1_begin, x2_begin, ..., x1_end, x2_end, ...]
    return strides, dilations, pads[:n], pads[n:]


def spatial(op, e, x_shape, kernel, name):
    """Strides, dilations and [top, left, bottom, right] pads of a 2-D window
    op, with auto_pad resolved."""
    if len(x_shape) != 4:
        raise e.error(f"only 2-D {name} (4-D input) is supported, the input has rank {len(x_shape)}")
    strides, dilations, begin, end = window(op, x_shape, kernel)
    return strides, dilations, [begin[0], begin[1], end[0], end[1]]


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
