"""All `onnx` -> `tir` lowerings, by ONNX op class."""

from forge_opt.transforms.onnx_lowerings import (
    dft,
    einsum,
    elementwise,
    gather_scatter,
    grid_sample,
    loss,
    nn,
    norm,
    pool,
    quantize,
    recurrent,
    reductions,
    resize,
    shape,
)

ONNX_LOWERINGS = {
    **elementwise.LOWERINGS,
    **dft.LOWERINGS,
    **einsum.LOWERINGS,
    **grid_sample.LOWERINGS,
    **nn.LOWERINGS,
    **pool.LOWERINGS,
    **norm.LOWERINGS,
    **quantize.LOWERINGS,
    **recurrent.LOWERINGS,
    **reductions.LOWERINGS,
    **resize.LOWERINGS,
    **shape.LOWERINGS,
    **gather_scatter.LOWERINGS,
    **loss.LOWERINGS,
}
