"""3-D convolution, which Forge has no function for (tt-forge-fe's
`forge/forge/op/convolution.py` offers Conv2d and Conv2dTranspose), as 2-D
convolutions over the depth axis: exact, a sum over the kernel's depth taps.
No lowering of its own: `nn.py`'s Conv calls it for a 5-D input. (3-D
pooling needs nothing of it: `pool.py` pools any rank as strided slices.)

Output frame d reads input frames d·s + t·dilation for taps t < kD. With
one group, the taps' frames are stacked along the channels and one Conv2d
takes the weight laid out [O, kD·C, kH, kW]: the depth of each output frame
is a batch entry, so the whole volume is one Forge call. With several
groups the stacking would interleave them, so each tap is a Conv2d of its
own and the taps are summed.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.lowering import static_shape
from forge_opt.transforms.onnx_lowerings.windows import window
from forge_opt.transforms.tir_builder import TirEmitter

#: [N, C, D, H, W] ↔ [N, D, C, H, W]
_DEPTH_FIRST = [0, 2, 1, 3, 4]


def conv3d(op, e: TirEmitter, x_shape: list[int], w_shape: list[int]) -> SSAValue:
    n, c, depth, h, w = x_shape
    o, cg, kd, kh, kw = w_shape
    (sd, sh, sw), (dd, dh, dw), begin, end = window(op, x_shape, w_shape[2:])
    groups = op.group.value.data
    x = op.X
    if begin[0] or end[0]:
        x = e.value(tir.PadOp(x, [0, 0, 0, 0, begin[0], end[0], 0, 0, 0, 0], 0.0))
    padded = depth + begin[0] + end[0]
    frames = (padded - dd * (kd - 1) - 1) // sd + 1
    if frames < 1:
        raise e.error(f"the kernel's depth {kd} (dilation {dd}) reaches past the padded input's {padded} frames")

    def taps(first: int, last: int) -> SSAValue:
        """[N·frames, (last-first)·C, H, W]: for each output frame, the input
        frames taps first..last-1 read, stacked along the channels."""
        parts = []
        for t in range(first, last):
            start = t * dd
            whole = start == 0 and sd == 1 and frames == padded
            parts.append(x if whole else e.slice(x, [2], [start], [start + sd * (frames - 1) + 1],
                                                                    [sd]))
        stacked = parts[0] if len(parts) == 1 else e.concat(parts, 1)
        return e.reshape(e.transpose(stacked, _DEPTH_FIRST), [n * frames, (last - first) * c, h, w])

    strides, pads, dilations = [sh, sw], [begin[1], begin[2], end[1], end[2]], [dh, dw]
    if groups == 1:
        stacked = taps(0, kd)
        weight = e.reshape(e.transpose(op.W, _DEPTH_FIRST), [o, kd * cg, kh, kw])
        y = e.value(tir.Conv2dOp(stacked, weight, op.B, strides, pads, dilations, 1))
    else:
        y = None
        for t in range(kd):
            weight = e.reshape(e.slice(op.W, [2], [t], [t + 1], [1]), [o, cg, kh, kw])
            part = e.value(tir.Conv2dOp(taps(t, t + 1), weight, op.B if t == 0 else None, strides, pads, dilations,
                                        groups))
            y = part if y is None else e.binary(BinaryFn.ADD, y, part)
        assert y is not None
    out_h, out_w = static_shape(y, e)[2:]
    return e.transpose(e.reshape(y, [n, frames, o, out_h, out_w]), _DEPTH_FIRST)
