"""Placement asks the lowering: a node runs on the device when it lowers to
Forge calls that pass Forge's rules, on the CPU (with the reason) otherwise."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from forge_opt.frontends.onnx import import_model
from forge_opt.transforms.placement import Where, place


def _model():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("ReverseSequence", ["r", "lens"], ["v"], name="reverse", batch_axis=0, time_axis=1),
        helper.make_node("Shape", ["v"], ["s"], name="shape"),
        helper.make_node("Reshape", ["v", "s"], ["w"], name="reshape"),
        helper.make_node("Pad", ["w", "pads"], ["a"], name="pad_reflect", mode="reflect"),
        helper.make_node("Sigmoid", ["w"], ["y"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 24])],
        [numpy_helper.from_array(np.array([8, 5], np.int64), "lens"),
         # reflecting 8 columns of an 8-column tensor: more than it has
         numpy_helper.from_array(np.array([0, 8, 0, 8], np.int64), "pads")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_the_lowering_decides():
    placements = place(import_model(_model()))
    where = {name: p.where for name, p in placements.items()}
    assert where == {
        "relu": Where.DEVICE,
        "reverse": Where.CPU,
        "shape": Where.FOLDED,
        "reshape": Where.DEVICE,
        "pad_reflect": Where.CPU,
        "sigmoid": Where.DEVICE,
    }
    assert "onnx.ReverseSequence has no lowering to Forge" in placements["reverse"].reason
    assert "reflect padding of 8 needs more than 8 elements on axis 1" in placements["pad_reflect"].reason


def test_pins_move_nodes_to_the_cpu():
    placements = place(import_model(_model()), cpu_ops={"Sigmoid"}, cpu_nodes={"relu"})
    assert placements["sigmoid"].where is Where.CPU and placements["relu"].where is Where.CPU
    assert placements["relu"].reason == "pinned to the CPU"
    assert placements["reshape"].where is Where.DEVICE


def test_the_module_is_left_as_it_was():
    module = import_model(_model())
    before = str(module)
    place(module)
    assert str(module) == before
