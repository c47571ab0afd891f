"""The models `checker_trust.py` adds to the test models: a deep CNN whose
output is a near-constant sigmoid map, a per-channel int8 QDQ CNN, and
models whose outputs hold near-ties."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent


def deep_cnn_sigmoid(depth: int = 10, seed: int = 0) -> onnx.ModelProto:
    """A deep CNN (Conv, BatchNormalization, Relu) ending in the sigmoid of
    large negative logits: a near-constant map whose differences are
    rounding, the case a fixed PCC calls a mismatch."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    nodes, inits, x, c = [], [], "x", 3
    for k in range(depth):
        w = (rng.standard_normal((8, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{k}")]
        for name, value in (("scale", 1 + 0.1 * rng.standard_normal(8)), ("bias", 0.1 * rng.standard_normal(8)),
                            ("mean", 0.1 * rng.standard_normal(8)), ("var", 1 + 0.1 * rng.random(8))):
            inits.append(numpy_helper.from_array(value.astype(np.float32), f"{name}{k}"))
        nodes += [helper.make_node("Conv", [x, f"w{k}"], [f"c{k}"], pads=[1, 1, 1, 1], name=f"conv{k}"),
                  helper.make_node("BatchNormalization", [f"c{k}", f"scale{k}", f"bias{k}", f"mean{k}", f"var{k}"],
                                   [f"b{k}"], name=f"bn{k}"),
                  helper.make_node("Relu", [f"b{k}"], [f"r{k}"], name=f"relu{k}")]
        x, c = f"r{k}", 8
    inits += [numpy_helper.from_array((rng.standard_normal((1, 8, 1, 1)) * 0.05).astype(np.float32), "head"),
              numpy_helper.from_array(np.array([-12.0], np.float32), "head_bias")]
    nodes += [helper.make_node("Conv", [x, "head", "head_bias"], ["logits"], name="head"),
              helper.make_node("Sigmoid", ["logits"], ["map"], name="sigmoid")]
    graph = helper.make_graph(nodes, "deep_cnn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
                              [helper.make_tensor_value_info("map", TensorProto.FLOAT, [1, 1, 32, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def tie_models(seed: int = 0) -> list[tuple[str, onnx.ModelProto]]:
    """Models whose outputs hold near-ties: scores x·W whose columns 0 and 7
    differ by about 3e-7, so that float32 and float64 (and onnxruntime's
    variants) choose between them otherwise on some rows; their ArgMax, a
    table Gathered by it beside a Linear, and TopK's values and indices.
    The inputs are fixed (a graph input with a value of its own cannot be
    random: random inputs rarely tie), so each is a model of no inputs but
    a seed's; checked on random `bias` inputs added to the scores' input."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    n, k, c = 256, 16, 8
    x = rng.standard_normal((n, k)).astype(np.float32)
    x[:, 0] = np.abs(x[:, 0]) + 3
    w = (rng.standard_normal((k, c)) * 0.3).astype(np.float32)
    w[0, 0] = 3.0
    w[:, 7] = w[:, 0] + (rng.standard_normal(k) * 3e-7).astype(np.float32)
    table = rng.standard_normal((c, 32)).astype(np.float32)
    w2 = (rng.standard_normal((k, 32)) * 0.3).astype(np.float32)
    weights = {"X": x, "W": w, "E": table, "W2": w2, "K": np.array([2], np.int64)}

    def model(name: str, nodes: list, outputs: list) -> tuple[str, onnx.ModelProto]:
        # x is a weight (ties need its exact values), shifted by an input of zeros' scale: 0 * bias
        nodes = [helper.make_node("Mul", ["bias", "zero"], ["shift"]), helper.make_node("Add", ["X", "shift"], ["x"]),
                 helper.make_node("MatMul", ["x", "W"], ["s"], name="score"), *nodes]
        inits = [numpy_helper.from_array(v, k) for k, v in {**weights, "zero": np.zeros((), np.float32)}.items()
                 if any(k in node.input for node in nodes)]
        graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, k])],
                                  outputs, inits)
        return name, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

    argmax = helper.make_node("ArgMax", ["s"], ["idx"], axis=1, keepdims=0, name="am")
    ints = [helper.make_tensor_value_info("idx", TensorProto.INT64, [n])]
    return [
        model("ties_argmax", [argmax], ints),
        model("ties_gather", [argmax, helper.make_node("Gather", ["E", "idx"], ["emb"], axis=0, name="gather"),
                              helper.make_node("MatMul", ["x", "W2"], ["lin"], name="lin"),
                              helper.make_node("Add", ["emb", "lin"], ["y"], name="add")],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, 32])]),
        model("ties_topk", [helper.make_node("TopK", ["s", "K"], ["v", "i"], axis=1, name="topk")],
              [helper.make_tensor_value_info("v", TensorProto.FLOAT, [n, 2]),
               helper.make_tensor_value_info("i", TensorProto.INT64, [n, 2])]),
    ]


def qdq_cnn() -> onnx.ModelProto:
    """The tiny CNN quantized as onnxruntime's quantizer writes it: QDQ,
    per-channel int8 weights."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    source = ROOT / "tests" / "data" / "models" / "tiny_cnn_opset17.onnx"
    name = onnx.load(str(source)).graph.input[0].name
    shape = [d.dim_value or 1 for d in onnx.load(str(source)).graph.input[0].type.tensor_type.shape.dim]

    class Calibration(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.batches = iter([{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "qdq.onnx"
        quantize_static(str(source), str(out), Calibration(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
        return onnx.load(str(out))
