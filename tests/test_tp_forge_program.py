"""The program every device runs, as `onnx-to-forge{devices=P}` prints it
(issue 39, item 5): Forge calls on each device's shapes, its blocks of the
weights `shard.all_slice`s of the model's parameters, the collectives
between. Run on P simulated devices by the interpreters, it computes what
onnxruntime computes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from xdsl.dialects.func import FuncOp

from forge_opt import dtypes, import_onnx
from forge_opt.dialects.forge_ops import Conv2dOp, MatmulOp
from forge_opt.interpreters.run import run_module
from forge_opt.interpreters.shard import block, run_threads
from forge_opt.transforms.pipelines import run_pipeline
from forge_opt.transforms.tp.partition import split_axes

MODELS = Path(__file__).parent / "data" / "models"
RNG = np.random.default_rng(0)
DECODE = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}


def _inputs(module, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Random inputs of the imported model's shapes (its dims chosen)."""
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    out = {}
    for i, t in zip(model.graph.input, func.function_type.inputs.data):
        shape = list(dtypes.tensor(t).get_shape())
        dtype = onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        if "mask" in i.name:
            out[i.name] = np.ones(shape, dtype)
        elif "position" in i.name:  # the positions after the cache
            out[i.name] = np.arange(3, 3 + shape[-1], dtype=dtype)[None]
        elif np.issubdtype(dtype, np.integer):
            out[i.name] = RNG.integers(0, 100, shape).astype(dtype)
        else:
            out[i.name] = RNG.standard_normal(shape).astype(dtype)
    return out


@pytest.mark.parametrize(("name", "dims", "layer"), [
    ("llm_llama", DECODE, MatmulOp),  # column- and row-parallel Linears, a KV cache by heads
    ("cnn_resnet18", {}, Conv2dOp),  # convolutions by output and by input channels
    ("fam_qwen3_moe", DECODE, MatmulOp),  # experts by devices, each device's whole on every token
])
@pytest.mark.parametrize("devices", [2, 4])
def test_the_forge_program_of_every_device_computes_the_model(name, dims, layer, devices):
    model = onnx.load(MODELS / f"{name}.onnx")
    module = import_onnx(model, dims=dims)
    feeds = _inputs(module, model)
    run_pipeline(module, f"onnx-to-forge{{devices={devices}}}")
    names = {op.name for op in module.walk()}
    assert not any(n.startswith(("tir.", "onnx.")) for n in names), names
    assert "shard.all_reduce" in names and any(isinstance(op, layer) for op in module.walk())
    want = [np.asarray(w) for w in ort.InferenceSession(model.SerializeToString()).run(None, feeds)]
    func = next(op for op in module.ops if isinstance(op, FuncOp))
    ins = split_axes(func.arg_attrs, len(feeds))  # a KV cache's past: each device its heads
    outs = split_axes(func.res_attrs, len(want))

    def device(member) -> list[np.ndarray]:
        mine = [x if a is None else block(x, a, member.rank, devices) for x, a in zip(feeds.values(), ins)]
        return run_module(module, mine, member)

    got = run_threads(devices, device)
    for out, (ref, axis) in enumerate(zip(want, outs)):
        if axis is None:  # the same on every device
            for d in range(devices):
                np.testing.assert_allclose(got[d][out], ref, rtol=1e-4, atol=1e-5)
        else:
            joined = np.concatenate([got[d][out] for d in range(devices)], axis=axis)
            np.testing.assert_allclose(joined, ref, rtol=1e-4, atol=1e-5)
