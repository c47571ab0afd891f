"""Quantized layers across devices (issue 52): onnxruntime's dynamic
quantization (`make_quantized.py`: DynamicQuantizeLinear, MatMulInteger
with an int8 weight and its zero point, Cast, Mul by the scales) splits as
the float model does, and each device stores its block of the integers,
not a float32 block four times its size (`tp/narrow_blocks`)."""

from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import matched_plan
from onnx import TensorProto, numpy_helper

from forge_opt.split.mpi import run_mpi
from forge_opt.split.parallel import tensor_parallel
from forge_opt.split.runner import assemble, run_parallel

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


@pytest.mark.parametrize("devices", [2, 4])
def test_a_quantization_range_is_an_all_reduce_of_each_devices_maximum(devices):
    """DynamicQuantizeLinear's range (ReduceMin, ReduceMax over the whole
    input) of a row layer's split input: each device's maximum of its block
    and of its negation, all-reduced by the maximum as one message of 8
    bytes (`combine-all-reduces`), not the activations all-gathered for it
    twice (issue 52's remainder)."""
    plan = matched_plan(MODELS / "q_bart_encoder_int8.onnx", devices, dims=DIMS)
    assert not [c for c in plan.collectives if c.op == "all_gather"]
    ranges = [c for c in plan.collectives if c.reduction == "max"]
    assert len(ranges) == 4 and all(c.bytes == 8 for c in ranges)  # min and max together, before each row layer
    assert len(plan.collectives) == 4 + 5  # the embedding's, and each layer's two row layers' sums


def test_under_mpi_the_maximum_equals_the_simulated_one(tmp_path):
    if shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")
    path = MODELS / "q_bart_encoder_int8_per_channel.onnx"
    plan = tensor_parallel(path, tmp_path / "tp", 2, dims=DIMS)
    feeds = {"input_ids": np.arange(8, dtype=np.int64)[None] * 7 % 128, "attention_mask": np.ones((1, 8), np.int64)}
    mpi, _ = assemble(plan, run_mpi(tmp_path / "tp", feeds, 2))
    simulated, _ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    for n in simulated:
        np.testing.assert_array_equal(mpi[n], simulated[n], err_msg=n)


@pytest.mark.parametrize("devices, mesh, blocks", [(4, "", 0), (4, "2x2", 2)])
def test_an_int8_decoders_kv_heads_are_found_past_their_dequantization(devices, mesh, blocks):
    """The int8 LLaMA's K/V projections are MatMulIntegers whose products are
    cast and scaled before the reshape to its 2 heads: 4 devices keep them
    whole (as the float model), a 2x2 mesh splits them by its rows, and
    neither stops at the reshape."""
    plan = matched_plan(MODELS / "q_llama_int8.onnx", devices, mesh=mesh,
                        dims={"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3})
    kv = [layer for layer in plan.layers if "k_proj" in layer.node or "v_proj" in layer.node]
    assert len(kv) == 4 and all(layer.blocks == blocks for layer in kv)
    assert all(layer.case == ("column" if blocks else "replicated") for layer in kv)
    assert all("its 2 heads do not divide by 4 devices" in layer.reason for layer in kv)
