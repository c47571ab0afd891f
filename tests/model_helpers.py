"""Helpers for whole-model tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def randomize_constant_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of a model whose ConstantOfShape weights (how the onnx
    package's light models stand in for their real weights: every weight is
    the same number) become random initializers, so numerical checks have
    teeth. Scales keep activations in range: He-style for kernels and
    matrices, near 1 for per-channel vectors (positive, for variances)."""
    rng = np.random.default_rng(seed)
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: t for t in m.graph.initializer}
    keep = []
    for node in m.graph.node:
        if node.op_type == "ConstantOfShape" and node.input and node.input[0] in inits:
            shape = [int(d) for d in numpy_helper.to_array(inits[node.input[0]]).reshape(-1)]
            if len(shape) >= 2:
                fan_in = int(np.prod(shape[1:]))
                value = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            else:
                value = rng.uniform(0.5, 1.5, shape)
            m.graph.initializer.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        else:
            keep.append(node)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    return m


def export_feeds(path, dims: dict[str, int]) -> dict[str, np.ndarray]:
    """Inputs as Optimum's runtime passes them to the export at `path`, each
    of its declared inputs sized by `dims` (its symbolic dims): token ids,
    masks of ones (over past and new), positions after the past, and the
    rest random (caches, an encoder's states)."""
    rng = np.random.default_rng(0)
    past, new = dims.get("past_sequence_length", 0), dims.get("sequence_length", 0)
    sizes = {**dims, "past_sequence_length + sequence_length": past + new}
    feeds = {}
    for i in onnx.load(path, load_external_data=False).graph.input:
        shape = [sizes[d.dim_param] if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]
        if i.name == "input_ids":
            feeds[i.name] = rng.integers(0, 128, shape).astype(np.int64)
        elif i.name.endswith("attention_mask"):
            feeds[i.name] = np.ones(shape, np.int64)
        elif i.name == "position_ids":
            feeds[i.name] = np.broadcast_to(np.arange(past, past + shape[-1], dtype=np.int64), shape).copy()
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 18) -> onnx.ModelProto:
    """A one-graph model of the default domain at `opset`, IR version 10
    (the newest onnxruntime reads)."""
    graph = onnx.helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=10)


def value_info(name: str, shape, elem: int = onnx.TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, elem, shape)


def assert_matches(model, inputs=None, **kwargs) -> None:
    """forge-check's verdict on the model is a match."""
    from forge_opt.check import MATCH, check_model

    report = check_model(model, inputs, **kwargs)
    assert report.status == MATCH, report.error or report.format()


def matched_plan(source, devices: int, **options):
    """The plan of a check at `devices` devices (`check_parallel`) that matched."""
    from forge_opt.check import MATCH
    from forge_opt.check.split import check_parallel

    report = check_parallel(source, devices=devices, **options)
    assert report.status == MATCH, report.error or report.format()
    assert report.plan is not None
    return report.plan


def relu_topk_sigmoid(y_shape=(2, 3)) -> onnx.ModelProto:
    """Relu -> TopK (k=3 on axis 1) -> Sigmoid of a [2, 8] input: a model
    whose middle op AutoSplit can pin to the CPU. `y_shape` None declares
    the output without a shape."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("TopK", ["a", "k"], ["v", "i"], name="topk", axis=1),
        helper.make_node("Sigmoid", ["v"], ["y"], name="last"),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None if y_shape is None else list(y_shape))],
        [numpy_helper.from_array(np.array([3], np.int64), "k")],
    )


class RoundsOtherwise:
    """A check strategy (`check.run.Strategy`) for a program that computes
    the model exactly but rounds its inputs otherwise: onnxruntime on them
    moved by a few units in the last place (`seed` picks the signs), with
    `wrong` added to some outputs. What a correct program that rounds in
    another order returns, and, with `wrong`, one that does not."""

    mode = "a test's program"
    takes = frozenset()
    failed = "the test's program failed"
    forge_python = ""

    def __init__(self, wrong: dict[str, float] | None = None, seed: int = 1):
        self.wrong, self.seed = wrong or {}, seed

    def prepare(self, loaded):
        return loaded

    def module(self):
        return None

    def run(self, prepared, feeds, reference, folder):
        from forge_opt.check.conditioning import nudged
        from forge_opt.check.run import Ran
        from forge_opt.execution.oracle import onnxruntime_outputs

        names = [o.name for o in prepared.model.graph.output]
        outputs = onnxruntime_outputs(prepared.model, None, nudged(feeds, seed=self.seed))
        return Ran({n: o + self.wrong.get(n, 0) for n, o in zip(names, outputs)})
