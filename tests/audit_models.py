"""The audit's small models (`shared/reference/audit.md`, appendix A), as
the tests of its findings build them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"
RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def onnx_model(nodes, inputs, outputs, inits=(), name="main_graph"):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def mlp(scale: float = 1.0) -> onnx.ModelProto:
    """The audit's `mlp.onnx` (x [1, 4, 8] → Linear → ReLU → Linear), its
    first weight times `scale`."""
    rng = np.random.default_rng(0)
    w1, b1, w2, b2 = (rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16,), (16, 8), (8,)])
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "B1"], ["h1"], name="fc1b"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("MatMul", ["h2", "W2"], ["h3"], name="fc2"),
             helper.make_node("Add", ["h3", "B2"], ["y"], name="fc2b")]
    inits = [numpy_helper.from_array(a, n) for a, n in [(w1 * np.float32(scale), "W1"), (b1, "B1"), (w2, "W2"),
                                                          (b2, "B2")]]
    return onnx_model(nodes, [vi("x", [1, 4, 8])], [vi("y", [1, 4, 8])], inits)


def external_model(folder: Path, location: str, scale: float = 1.0) -> Path:
    """The audit's `mk_ext.py`: W1 in external data at `location`, a 128 KiB W2 inline."""
    from onnx.external_data_helper import set_external_data

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((256, 256)) * 0.05 * scale).astype(np.float32), "W1")
    w2 = numpy_helper.from_array((rng.standard_normal((256, 128)) * 0.05).astype(np.float32), "W2")
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["a"], name="fc1"), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("MatMul", ["b", "W2"], ["y"], name="fc2")]
    model = onnx_model(nodes, [vi("x", [4, 256])], [vi("y", [4, 128])], [w1, w2], name="ext")
    t = model.graph.initializer[0]
    (folder / location).write_bytes(t.raw_data)
    set_external_data(t, location, 0, len(t.raw_data))
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    onnx.save(model, str(folder / "model.onnx"))
    return folder / "model.onnx"


def tanh_loop() -> onnx.ModelProto:
    """The audit's `loop.onnx`: a run-time Loop of n steps, h = tanh(h @ Wl),
    whose condition is an Identity of its input."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "Wl"], ["hm"], name="body_mm"),
         helper.make_node("Tanh", ["hm"], ["h_out"], name="body_tanh"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")], "body",
        [vi("i", [], TensorProto.INT64), vi("cond_in", [], TensorProto.BOOL), vi("h_in", [1, 8])],
        [vi("cond_out", [], TensorProto.BOOL), vi("h_out", [1, 8])])
    return onnx_model([helper.make_node("Loop", ["n", "", "h0"], ["h"], name="loop", body=body)],
                      [vi("n", [], TensorProto.INT64), vi("h0", [1, 8])], [vi("h", [1, 8])],
                      [numpy_helper.from_array(rand(8, 8) * np.float32(0.3), "Wl")])


def near_ties(seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The audit's `mk_illcond.py` data: inputs x [256, 16] and weights whose
    score columns 0 and 7 differ by about 3e-7, so that float32 and float64
    (and onnxruntime's variants) choose between them otherwise on some rows."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    x[:, 0] = np.abs(x[:, 0]) + 3
    w = (rng.standard_normal((16, 8)) * 0.3).astype(np.float32)
    w[0, 0] = 3.0
    w[:, 7] = w[:, 0] + (rng.standard_normal(16) * 3e-7).astype(np.float32)
    table = rng.standard_normal((8, 32)).astype(np.float32)
    w2 = (rng.standard_normal((16, 32)) * 0.3).astype(np.float32)
    return {"x": x}, {"W": w, "E": table, "W2": w2}


def argmax_model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """idx = ArgMax(x·W) over near-tied scores."""
    return onnx_model([helper.make_node("MatMul", ["x", "W"], ["s"], name="score"),
                       helper.make_node("ArgMax", ["s"], ["idx"], axis=1, keepdims=0, name="am")],
                      [vi("x", [256, 16])], [vi("idx", [256], TensorProto.INT64)],
                      [numpy_helper.from_array(weights["W"], "W")])


def gather_model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """y = Gather(E, ArgMax(x·W)) + x·W2: a float output whose tied rows
    take another table row."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["s"], name="score"),
             helper.make_node("ArgMax", ["s"], ["idx"], axis=1, keepdims=0, name="am"),
             helper.make_node("Gather", ["E", "idx"], ["emb"], axis=0, name="gather"),
             helper.make_node("MatMul", ["x", "W2"], ["lin"], name="lin"),
             helper.make_node("Add", ["emb", "lin"], ["y"], name="add")]
    return onnx_model(nodes, [vi("x", [256, 16])], [vi("y", [256, 32])],
                      [numpy_helper.from_array(v, k) for k, v in weights.items()])


def topk_gather_model(weights: dict[str, np.ndarray]) -> onnx.ModelProto:
    """y = Gather(E, TopK(x·W, 2).indices): the two best of near-tied scores,
    in an order rounding decides, choose the rows of a table."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["s"], name="score"),
             helper.make_node("TopK", ["s", "k"], ["v", "i"], axis=1, name="topk"),
             helper.make_node("Gather", ["E", "i"], ["y"], axis=0, name="gather")]
    inits = [numpy_helper.from_array(weights["W"], "W"), numpy_helper.from_array(weights["E"], "E"),
             numpy_helper.from_array(np.array([2], np.int64), "k")]
    return onnx_model(nodes, [vi("x", [256, 16])], [vi("y", [256, 2, 32])], inits)
