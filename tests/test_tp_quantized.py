"""Quantized layers across devices (issue 52): onnxruntime's dynamic
quantization (`make_quantized.py`: DynamicQuantizeLinear, MatMulInteger
with an int8 weight and its zero point, Cast, Mul by the scales) splits as
the float model does, and each device stores its block of the integers,
not a float32 block four times its size (`tp/narrow_blocks`)."""

from __future__ import annotations

import math
from pathlib import Path

import onnx
import pytest
from model_helpers import matched_plan
from onnx import TensorProto, numpy_helper

from forge_opt.split.parallel import tensor_parallel

MODELS = Path(__file__).parent / "data" / "models"
DIMS = {"batch_size": 1, "encoder_sequence_length": 8}


def _weight_bytes(model: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


@pytest.mark.parametrize("name", ["q_bart_encoder_int8", "q_bart_encoder_int8_per_channel"])
@pytest.mark.parametrize("devices", [2, 4])
def test_an_int8_encoder_splits_its_quantized_matmuls(name, devices):
    """Each MatMulInteger is a Linear, paired as Megatron pairs the float
    ones; a device holds 1/P of the model's bytes, plus what stays whole
    (norms, the row layers' biases and per-column scales: at d_model 32,
    about a tenth of the bytes)."""
    path = MODELS / f"{name}.onnx"
    plan = matched_plan(path, devices, dims=DIMS)
    cases = [layer.case for layer in plan.layers if layer.node.endswith("MatMul_quant")]
    assert cases == ["column", "column", "column", "row", "column", "row"] * 2
    held = max(d.parameter_bytes + d.constant_bytes for d in plan.devices)
    assert held <= (1 / devices + 0.12) * _weight_bytes(onnx.load(path))


def test_each_device_stores_int8_blocks(tmp_path):
    """A quantized weight's block is stored as the integers it is (half of
    each weight's bytes on each of 2 devices), and dequantized on the
    device."""
    model = onnx.load(MODELS / "q_bart_encoder_int8.onnx")
    weights = [t for t in model.graph.initializer if t.data_type == TensorProto.INT8 and len(t.dims) == 2]
    tensor_parallel(MODELS / "q_bart_encoder_int8.onnx", tmp_path / "tp", 2, dims=DIMS)
    stored = onnx.load(tmp_path / "tp" / "dev0" / "weights.onnx", load_external_data=False).graph.initializer
    blocks = [t for t in stored if t.data_type == TensorProto.INT8 and len(t.dims) == 2]
    assert len(blocks) == len(weights) == 12
    assert sum(math.prod(t.dims) for t in blocks) * 2 == sum(math.prod(t.dims) for t in weights)
    assert any("forge.op.Cast(" in s.read_text() for s in (tmp_path / "tp" / "dev0").glob("segment_*.py"))
