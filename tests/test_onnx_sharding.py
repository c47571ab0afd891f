"""ONNX's sharding annotations checked (`frontends/onnx/sharding.py`,
`forge-opt --check-sharding`): onnx's own full check and onnxruntime accept
an annotation that names no configuration, no tensor of its node, an axis
past the rank or 3 shards over 2 devices (the audit's measurement); every
rule of the formalism refuses at least one mutation of a valid file, and
the valid file passes both checkers and runs unchanged."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx.checker
import pytest
from onnx import ModelProto, helper, numpy_helper

from forge_opt.frontends.onnx.sharding import RULES, check_sharding
from forge_opt.tools.forge_opt import run as forge_opt

B, H, F = 4, 8, 16


def annotated_mlp() -> ModelProto:
    """Relu(x @ W1) @ W2 + b at IR 11, planned for an n300 (1x2: W1 by
    columns, W2 by rows), a T3K (2 stages of 4) and a Galaxy (W1 over 4
    columns by rows and 8 rows by columns; x in 4 column groups of 8)."""
    rng = np.random.default_rng(0)
    w1, w2, b = (rng.standard_normal(s).astype(np.float32) for s in [(H, F), (F, H), (H,)])
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "W2"], ["y0"], name="fc2"),
             helper.make_node("Add", ["y0", "b"], ["y"], name="bias")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [B, H])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [B, H])],
                              [numpy_helper.from_array(a, n) for a, n in [(w1, "W1"), (w2, "W2"), (b, "b")]])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=11)
    for name, count in [("n300", 2), ("t3k", 8), ("galaxy", 32)]:
        c = model.configuration.add()
        c.name, c.num_devices = name, count
    fc1, relu, fc2, add = model.graph.node  # make_graph copies the nodes: annotate the model's
    _spec(fc1, "n300", "W1", [(1, 2)], [0, 1])
    _spec(fc1, "n300", "h", [(1, 2)], [0, 1])
    _spec(fc2, "n300", "r", [(1, 2)], [0, 1])
    _spec(fc2, "n300", "W2", [(0, 2)], [0, 1])
    for node, stage in [(fc1, 0), (relu, 0), (fc2, 1), (add, 1)]:
        node.device_configurations.add(configuration_id="t3k", pipeline_stage=stage)
    spec = _spec(fc1, "galaxy", "W1", [(0, 4), (1, 8)], [r * 4 + c for c in range(4) for r in range(8)])
    x = _spec(fc1, "galaxy", "x", [(1, 4)], [-1, -2, -3, -4])
    for c in range(4):
        x.index_to_device_group_map.add(key=-1 - c, value=[r * 4 + c for r in range(8)])
    assert spec.tensor_name == "W1"
    return model


def _spec(node, configuration: str, tensor: str, axes: list[tuple[int, int]], devices: list[int]):
    config = next((c for c in node.device_configurations if c.configuration_id == configuration), None)
    if config is None:
        config = node.device_configurations.add(configuration_id=configuration)
    spec = config.sharding_spec.add(tensor_name=tensor, device=devices)
    for axis, shards in axes:
        spec.sharded_dim.add(axis=axis).simple_sharding.add(num_shards=shards)
    return spec


def _node(model: ModelProto, name: str):
    return next(n for n in model.graph.node if n.name == name)


def _first_spec(model: ModelProto, node: str, configuration: str = "n300"):
    return next(c for c in _node(model, node).device_configurations if c.configuration_id == configuration) \
        .sharding_spec[0]


def test_the_valid_file_passes_onnx_and_ours_and_runs_unchanged():
    import onnxruntime as ort

    model = annotated_mlp()
    onnx.checker.check_model(model, full_check=True)
    assert check_sharding(model) == []
    plain = annotated_mlp()
    for n in plain.graph.node:
        del n.device_configurations[:]
    del plain.configuration[:]
    x = np.random.default_rng(1).standard_normal((B, H)).astype(np.float32)

    def run(m: ModelProto) -> np.ndarray:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return np.asarray(session.run(None, {"x": x})[0])

    assert np.array_equal(run(model), run(plain))


def _unnamed_configuration(m):
    _node(m, "relu").device_configurations.add(configuration_id="bogus")


def _configuration_twice(m):
    m.configuration.add(name="n300", num_devices=4)


def _not_a_tensor(m):
    _first_spec(m, "fc1").tensor_name = "not_a_tensor"


def _axis_past_rank(m):
    _first_spec(m, "fc1").sharded_dim[0].axis = 7


def _axis_twice(m):
    spec = _first_spec(m, "fc1")
    spec.sharded_dim.add(axis=-1).simple_sharding.add(num_shards=1)


def _three_shards_on_two(m):
    _first_spec(m, "fc1").sharded_dim[0].simple_sharding[0].num_shards = 3


def _wrong_dim_value(m):
    _first_spec(m, "fc1").sharded_dim[0].simple_sharding[0].dim_value = F + 1


def _device_past_count(m):
    _first_spec(m, "fc1").device[1] = 2


def _group_past_count(m):
    spec = next(s for c in _node(m, "fc1").device_configurations if c.configuration_id == "galaxy"
                for s in c.sharding_spec if s.tensor_name == "x")
    spec.index_to_device_group_map[0].value.append(32)


def _add_operands_differ(m):
    _spec(_node(m, "bias"), "n300", "y0", [(1, 2)], [0, 1])


def _reduction_differs(m):
    _first_spec(m, "fc2").sharded_dim[0].simple_sharding[0].num_shards = 1
    _first_spec(m, "fc2").device.pop()


def _stage_goes_back(m):
    next(c for c in _node(m, "bias").device_configurations if c.configuration_id == "t3k").pipeline_stage = 0


MUTATIONS: list[tuple[Callable[[ModelProto], None], str]] = [
    (_unnamed_configuration, "configuration-named"),
    (_configuration_twice, "configuration-named"),
    (_not_a_tensor, "tensor-of-node"),
    (_axis_past_rank, "axis-in-range"),
    (_axis_twice, "axis-in-range"),
    (_three_shards_on_two, "shards-cover-devices"),
    (_wrong_dim_value, "shards-cover-devices"),
    (_device_past_count, "groups-defined"),
    (_group_past_count, "groups-defined"),
    (_add_operands_differ, "operands-alike"),
    (_reduction_differs, "reduction-alike"),
    (_stage_goes_back, "stages-ordered"),
]


def test_every_rule_has_a_mutation():
    assert {rule for _, rule in MUTATIONS} == set(RULES)


@pytest.mark.parametrize("mutate, rule", MUTATIONS, ids=[m.__name__.strip("_") for m, _ in MUTATIONS])
def test_a_mutation_is_refused_naming_its_rule(mutate, rule):
    model = annotated_mlp()
    mutate(model)
    problems = check_sharding(model)
    assert rule in {p.rule for p in problems}, [str(p) for p in problems]


@pytest.mark.parametrize("mutate", [_unnamed_configuration, _not_a_tensor, _axis_past_rank, _three_shards_on_two])
def test_onnx_itself_accepts_what_is_refused(mutate):
    """The audit's measurement, kept: onnx's full check passes them all."""
    model = annotated_mlp()
    mutate(model)
    onnx.checker.check_model(model, full_check=True)


def test_forge_opt_check_sharding(tmp_path, capsys):
    model = annotated_mlp()
    onnx.save(model, str(tmp_path / "ok.onnx"))
    assert forge_opt(["--check-sharding", str(tmp_path / "ok.onnx")]) == 0
    out = capsys.readouterr().out
    assert "3 configurations (n300: 2 devices, t3k: 8, galaxy: 32)" in out and "valid" in out
    _axis_past_rank(model)
    onnx.save(model, str(tmp_path / "bad.onnx"))
    assert forge_opt(["--check-sharding", str(tmp_path / "bad.onnx")]) == 1
    err = capsys.readouterr().err
    assert "node 'fc1' (MatMul), configuration 'n300', tensor 'W1': axis 7 of a tensor of rank 2" in err
