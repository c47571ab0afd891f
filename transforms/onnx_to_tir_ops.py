"""All `onnx` -> `tir` lowerings, by ONNX op class."""

from forge_opt.transforms import (
    onnx_to_tir_dft,
    onnx_to_tir_einsum,
    onnx_to_tir_elementwise,
    onnx_to_tir_gather_scatter,
    onnx_to_tir_grid_sample,
    onnx_to_tir_loss,
    onnx_to_tir_nn,
    onnx_to_tir_norm,
    onnx_to_tir_pool,
    onnx_to_tir_quantize,
    onnx_to_tir_recurrent,
    onnx_to_tir_resize,
    onnx_to_tir_shape,
)

ONNX_LOWERINGS = {
    **onnx_to_tir_elementwise.LOWERINGS,
    **onnx_to_tir_dft.LOWERINGS,
    **onnx_to_tir_einsum.LOWERINGS,
    **onnx_to_tir_grid_sample.LOWERINGS,
    **onnx_to_tir_nn.LOWERINGS,
    **onnx_to_tir_pool.LOWERINGS,
    **onnx_to_tir_norm.LOWERINGS,
    **onnx_to_tir_quantize.LOWERINGS,
    **onnx_to_tir_recurrent.LOWERINGS,
    **onnx_to_tir_resize.LOWERINGS,
    **onnx_to_tir_shape.LOWERINGS,
    **onnx_to_tir_gather_scatter.LOWERINGS,
    **onnx_to_tir_loss.LOWERINGS,
}
