"""Lowerings of ONNX's linear-algebra and convolution ops to `tir`: MatMul,
Gemm, Conv (3-D ones by `volumes.py`), ConvTranspose, Det. Pooling is
`pool.py`, normalisations `norm.py`."""

from __future__ import annotations

from xdsl.ir import SSAValue

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.onnx_lowerings.volumes import conv3d
from forge_opt.transforms.onnx_lowerings.windows import fold_spatial_pad, spatial, window
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers


@lowers(onnx.MatMulOp)
def _matmul(op: onnx.MatMulOp, e: TirEmitter):
    return [e.matmul(op.A, op.B)]


def transpose_2d(e: TirEmitter, x):
    rank = len(static_shape(x, e))
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return e.transpose(x, perm)


@lowers(onnx.GemmOp)
def _gemm(op: onnx.GemmOp, e: TirEmitter):
    """alpha * A' B' + beta * C -> transposes, matmul, scaling, add."""
    a, b = op.A, op.B
    if op.transA.value.data:
        a = transpose_2d(e, a)
    if op.transB.value.data:
        b = transpose_2d(e, b)
    y = e.matmul(a, b)
    alpha, beta = op.alpha.value.data, op.beta.value.data
    if alpha != 1.0:
        y = e.binary(BinaryFn.MUL, y, e.scalar(alpha, y))
    if op.C is not None and beta != 0.0:
        c = op.C
        if beta != 1.0:
            c = e.binary(BinaryFn.MUL, c, e.scalar(beta, c))
        y = e.binary(BinaryFn.ADD, y, c)
    return [y]


@lowers(onnx.ConvOp)
def _conv(op: onnx.ConvOp, e: TirEmitter):
    x_shape, w_shape = static_shape(op.X, e), static_shape(op.W, e, "weight")
    if len(x_shape) == 3:
        return [_conv1d(op, e, x_shape, w_shape)]
    if len(x_shape) == 5:
        return [conv3d(op, e, x_shape, w_shape)]
    kernel = w_shape[2:]
    strides, dilations, pads = spatial(op, e, x_shape, kernel, "Conv")
    x, pads = fold_spatial_pad(op.X, pads, 0.0)
    x_shape = static_shape(x, e)
    return [e.value(tir.Conv2dOp(x, op.W, op.B, strides, pads, dilations, op.group.value.data))]


def _conv1d(op, e, x_shape, w_shape):
    """A 1-D convolution as a 2-D one over a height of 1."""
    x = e.reshape(op.X, [x_shape[0], x_shape[1], 1, x_shape[2]])
    w = e.reshape(op.W, [w_shape[0], w_shape[1], 1, w_shape[2]])
    (s,), (d,), (lo,), (hi,) = window(op, x_shape, w_shape[2:])
    y = e.value(tir.Conv2dOp(x, w, op.B, [1, s], [0, lo, 0, hi], [1, d], op.group.value.data))
    return e.reshape(y, [x_shape[0], w_shape[0], static_shape(y, e)[3]])


#: Det expands along the first row; its n! terms are emitted up to this size.
_LARGEST_DET = 4


@lowers(onnx.DetOp)
def _det(op: onnx.DetOp, e: TirEmitter):
    """The determinant of each trailing square matrix by cofactor expansion
    (exact sums of products; sizes up to 4)."""
    shape = static_shape(op.X, e)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise e.error(f"the input {shape} does not end in square matrices")
    n, batch, rank = shape[-1], shape[:-2], len(shape)
    if n > _LARGEST_DET:
        raise e.error(f"determinants of {n}x{n} matrices are not supported (up to {_LARGEST_DET}x{_LARGEST_DET})")
    entries = [
        [
            e.reshape(
                e.slice(op.X, [rank - 2, rank - 1], [i, j], [i + 1, j + 1], [1, 1]), batch
            )
            for j in range(n)
        ]
        for i in range(n)
    ]

    def det(rows: list[int], cols: list[int]) -> SSAValue:
        if len(rows) == 1:
            return entries[rows[0]][cols[0]]
        terms = [
            e.binary(BinaryFn.MUL, entries[rows[0]][c], det(rows[1:], cols[:k] + cols[k + 1 :]))
            for k, c in enumerate(cols)
        ]
        total = terms[0]
        for k, term in enumerate(terms[1:], 1):
            total = e.binary(BinaryFn.SUB if k % 2 else BinaryFn.ADD, total, term)
        return total

    return [det(list(range(n)), list(range(n)))]


@lowers(onnx.ConvTransposeOp)
def _conv_transpose(op: onnx.ConvTransposeOp, e: TirEmitter):
    """Forge's Conv2dTranspose (torch's conv_transpose2d, ONNX's weight
    layout). Its padding is symmetric: uneven ONNX pads cut the smaller
    amount there and the rest with a slice. 1-D runs over a height of 1."""
    x_shape, w_shape = static_shape(op.X, e), static_shape(op.W, e, "weight")
    out_shape = static_shape(op.Y, e, "result")
    rank = len(x_shape) - 2
    if rank not in (1, 2):
        raise e.error(f"{rank}-D transposed convolution is not supported (1-D and 2-D are)")

    def ints(attr, default: int) -> list[int]:
        return list(attr.get_values()) if attr is not None else [default] * rank

    strides, dilations, extra = ints(op.strides, 1), ints(op.dilations, 1), ints(op.output_padding, 0)
    kernel = list(op.kernel_shape.get_values()) if op.kernel_shape is not None else w_shape[2:]
    full = [(x_shape[2 + i] - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 + extra[i] for i in range(rank)]
    auto_pad = op.auto_pad.data
    if op.pads is not None and auto_pad == "NOTSET" and op.output_shape is None:
        pads = list(op.pads.get_values())
        begin, end = pads[:rank], pads[rank:]
    else:  # from the output size (auto_pad, output_shape): ONNX's split of the total
        total = [full[i] - out_shape[2 + i] for i in range(rank)]
        for i, t in enumerate(total):  # a larger output: rows past the full result, as output_padding adds
            if t < 0:
                if extra[i] - t >= max(strides[i], dilations[i]):
                    raise e.error(f"an output of {out_shape[2:]} is larger than the full result {full} allows")
                extra[i] -= t
                total[i] = 0
        upper = auto_pad == "SAME_UPPER"
        begin = [t // 2 if upper else t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    x, w = op.X, op.W
    if rank == 1:  # over a height of 1
        x = e.reshape(x, [x_shape[0], x_shape[1], 1, x_shape[2]])
        w = e.reshape(w, [*w_shape[:2], 1, w_shape[2]])
        strides, dilations, extra = [1, *strides], [1, *dilations], [0, *extra]
        begin, end = [0, *begin], [0, *end]
    symmetric = [min(b, t) for b, t in zip(begin, end)]
    y = e.value(tir.ConvTranspose2dOp(x, w, op.B, strides, symmetric, dilations, extra, op.group.value.data))
    shape = static_shape(y, e)
    cuts = [(2 + i, b - p, shape[2 + i] - (t - p)) for i, (b, t, p) in enumerate(zip(begin, end, symmetric)) if b != t]
    if cuts:
        axes, starts, stops = (list(c) for c in zip(*cuts))
        y = e.slice(y, axes, starts, stops, [1] * len(cuts))
    if rank == 1:
        y = e.reshape(y, out_shape)
    return [y]
