"""Property tests: random Split configurations (rank 1-5, any axis, the three
rules, zero-size pieces) compile to Forge Python that computes exactly what
onnxruntime computes. A fixed budget and seed keep CI deterministic;
hypothesis shrinks a failure to a minimal model."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, check_model


@st.composite
def split_models(draw):
    rank = draw(st.integers(1, 5))
    shape = draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    axis = draw(st.integers(-rank, rank - 1))
    dim = draw(st.integers(0, 9))
    shape[axis] = dim
    rule = draw(st.sampled_from(["sections", "equal", "num_outputs"] if dim else ["sections"]))
    opset, inputs, inits, attrs = 18, ["x"], [], {"axis": axis}
    if rule == "sections":
        count = draw(st.integers(1, 4))
        cuts = sorted(draw(st.lists(st.integers(0, dim), min_size=count - 1, max_size=count - 1)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim])]
        inits.append(numpy_helper.from_array(np.asarray(sizes, np.int64), "split"))
        inputs.append("split")
    elif rule == "equal":
        count = draw(st.sampled_from([d for d in range(1, dim + 1) if dim % d == 0]))
        sizes = [dim // count] * count
        opset = 13
    else:
        count = draw(st.integers(1, dim))
        size = -(-dim // count)
        sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
        if len(sizes) != count:  # ONNX-18 needs exactly num_outputs pieces
            count = len(sizes)
        attrs["num_outputs"] = count
    outs = [f"y{i}" for i in range(len(sizes))]
    out_types = []
    for s in sizes:
        o = list(shape)
        o[axis] = s
        out_types.append(helper.make_tensor_value_info(f"y{len(out_types)}", TensorProto.FLOAT, o))
    node = helper.make_node("Split", inputs, outs, name="split", **attrs)
    graph = helper.make_graph(
        [node], "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], out_types, inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(split_models())
def test_random_splits_match_onnxruntime(model):
    report = check_model(model, rtol=0, atol=0)
    assert report.status == MATCH, report.format() + report.error


ELEMENTWISE = ["Relu", "Sigmoid", "Tanh", "Abs", "Exp", "Neg", "Softplus", "Add", "Mul", "Sub", "Max"]


@st.composite
def elementwise_graphs(draw):
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    values, nodes = ["x"], []
    for i in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(ELEMENTWISE))
        a = draw(st.sampled_from(values))
        ins = [a, draw(st.sampled_from(values))] if op in ("Add", "Mul", "Sub", "Max") else [a]
        nodes.append(helper.make_node(op, ins, [f"v{i}"], name=f"n{i}"))
        values.append(f"v{i}")
    graph = helper.make_graph(
        nodes,
        "elementwise",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(values[-1], TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(elementwise_graphs())
def test_random_elementwise_graphs_match_onnxruntime(model):
    report = check_model(model, rtol=1e-5, atol=1e-6)
    assert report.status == MATCH, report.format() + report.error
