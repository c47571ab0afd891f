"""A tensor-parallel plan written into the model as ONNX's sharding
annotations (`--annotate`) and compiled back from them (`--plan-from-onnx`):
the same layers in the same cases, several configurations in one file,
and nothing written that onnx's full check or forge-opt's own
(`--check-sharding`) refuses."""

from __future__ import annotations

import onnx
import onnx.checker
import pytest
from test_llm_decoders import DECODE, model_path

from forge_opt.check.report import MATCH
from forge_opt.frontends.onnx.sharding import check_sharding
from forge_opt.plan.onnx_annotations import annotate, annotate_stages, plan_pins, stage_pins
from forge_opt.split.api import split_model
from forge_opt.split.parallel import tensor_parallel
from forge_opt.split.stages import stage_of_nodes
from forge_opt.tools.forge_check import main as forge_check
from forge_opt.transforms.compile_options import CompileOptions

#: the configurations one file carries, by device count and mesh
CONFIGURATIONS = {(2, ""): "n300", (4, ""): "p4", (8, ""): "t3k", (4, "2x2"): "p4-2x2"}


def _cases(plan) -> list[tuple[str, str, int]]:
    return [(layer.node, layer.case, layer.blocks) for layer in plan.layers]


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "mistral", "phi3"])
def test_each_decoders_plans_round_trip_through_one_annotated_file(name, tmp_path):
    model = onnx.load(str(model_path(name)))
    plans = {}
    for devices, mesh in CONFIGURATIONS:
        plans[devices, mesh] = tensor_parallel(model_path(name), tmp_path / f"tp{devices}{mesh}",
                                               CompileOptions(devices, mesh=mesh), dims=DECODE)
        done = annotate(model, plans[devices, mesh])
        assert done.configuration == CONFIGURATIONS[devices, mesh] and not done.skipped, done.skipped
        model = done.model
    path = tmp_path / "annotated.onnx"
    onnx.save(model, str(path))
    onnx.checker.check_model(str(path), full_check=True)
    assert [str(p) for p in check_sharding(model)] == []
    for (devices, mesh), configuration in CONFIGURATIONS.items():
        back = tensor_parallel(path, tmp_path / f"back{devices}{mesh}", CompileOptions(devices, mesh=mesh),
                               dims=DECODE, plan=f"{path}#{configuration}")
        assert _cases(back) == _cases(plans[devices, mesh]) and back.mesh == plans[devices, mesh].mesh
        # read from the annotations, not chosen again: every Linear is pinned (a tied head follows its table)
        assert {layer.reason for layer in back.layers if layer.kind == "linear" and not
                layer.reason.startswith("tied to")} == {"pinned by the plan"}


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2", "mistral", "phi3"])
def test_a_pipeline_round_trips_beside_the_tensor_parallel_plans(name, tmp_path):
    """Two stages as a fifth configuration of the file the P = 2, 4 and 8
    and 2x2 plans are in (each node its pipeline_stage): the file passes both
    checks, and the split cut from it has the same stages."""
    model = onnx.load(str(model_path(name)))
    for devices, mesh in CONFIGURATIONS:
        model = annotate(model, tensor_parallel(model_path(name), tmp_path / f"tp{devices}{mesh}",
                                                CompileOptions(devices, mesh=mesh), dims=DECODE)).model
    chosen, _ = split_model(model_path(name), tmp_path / "chosen", stages=2, dims=DECODE)
    done = annotate_stages(model, stage_of_nodes(chosen.graphs), 2)
    assert done.configuration == "n300-s2" and len(done.model.configuration) == 5
    path = tmp_path / "annotated.onnx"
    onnx.save(done.model, str(path))
    onnx.checker.check_model(str(path), full_check=True)
    assert [str(p) for p in check_sharding(done.model)] == []
    back, _ = split_model(path, tmp_path / "back", stages=2, dims=DECODE,
                          stage_of=stage_pins(onnx.load(str(path)), "n300-s2"))
    assert [[n.name for n in g.nodes] for g in back.graphs] == [[n.name for n in g.nodes] for g in chosen.graphs]
    assert back.cut is not None and back.cut.how == "as the annotations place them"


def test_a_row_layer_splits_its_input_alike_and_a_replicated_one_nothing(tmp_path):
    plan = tensor_parallel(model_path("gpt2"), tmp_path / "tp", 2, dims=DECODE)
    model = annotate(onnx.load(str(model_path("gpt2"))), plan).model
    rows = [layer.node for layer in plan.layers if layer.case == "row"]
    node = next(n for n in model.graph.node if n.name == rows[0])
    specs = {s.tensor_name: [d.axis for d in s.sharded_dim] for s in node.device_configurations[0].sharding_spec}
    assert set(specs) == {node.input[0], node.input[1]}
    assert plan_pins(model)["layers"][rows[0]] == {"axis": 0}


def test_the_configuration_is_named_when_the_file_has_several(tmp_path):
    model = onnx.load(str(model_path("gpt2")))
    for devices in (2, 4):
        model = annotate(model, tensor_parallel(model_path("gpt2"), tmp_path / f"tp{devices}", devices,
                                                 dims=DECODE)).model
    with pytest.raises(Exception, match="carries 2 sharding configurations \\(n300, p4\\): name one"):
        plan_pins(model)
    with pytest.raises(Exception, match="no sharding configuration 'galaxy'"):
        plan_pins(model, "galaxy")


def test_forge_check_annotates_and_compiles_from_the_annotations(tmp_path, capsys):
    out = tmp_path / "gpt2_tp.onnx"
    dims = [a for k, v in DECODE.items() for a in ("--dim", f"{k}={v}")]
    for devices in ("2", "4"):  # the second run keeps the first's configuration
        with pytest.raises(SystemExit) as done:
            forge_check([str(model_path("gpt2")), "--devices", devices, *dims, "--annotate", str(out)])
        text = capsys.readouterr().out
        assert done.value.code == MATCH, text
    assert f"annotated: {out} (configuration p4, 11 layers, 2 configurations in the file)" in text
    with pytest.raises(SystemExit) as done:
        forge_check([str(out), "--devices", "2", *dims, "--plan-from-onnx", "--configuration", "n300"])
    text = capsys.readouterr().out
    assert done.value.code == MATCH, text
    with pytest.raises(SystemExit) as done:
        forge_check([str(out), "--devices", "2", *dims, "--plan-from-onnx"])
    assert done.value.code == 2 and "name one with --configuration" in capsys.readouterr().err


def test_annotate_never_writes_over_the_model(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("gpt2")), "--devices", "2", "--annotate", str(model_path("gpt2"))])
    assert done.value.code == 2 and "which the check reads" in capsys.readouterr().err


def test_a_plan_the_annotations_change_is_the_plan_compiled(tmp_path):
    """The annotations are read, not rederived: a column layer annotated
    replicated compiles replicated."""
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", 2, dims=DECODE)
    column = next(layer for layer in plan.layers if layer.case == "column")
    column.case = "replicated"
    path = tmp_path / "edited.onnx"
    onnx.save(annotate(onnx.load(str(model_path("llama"))), plan).model, str(path))
    back = tensor_parallel(path, tmp_path / "back", 2, dims=DECODE, plan=str(path))
    assert next(layer for layer in back.layers if layer.node == column.node).case == "replicated"


def test_a_model_path_may_hold_a_hash(tmp_path):
    plan = tensor_parallel(model_path("gpt2"), tmp_path / "tp", 2, dims=DECODE)
    path = tmp_path / "gpt2#tp.onnx"
    onnx.save(annotate(onnx.load(str(model_path("gpt2"))), plan).model, str(path))
    for given in (str(path), f"{path}#n300"):
        back = tensor_parallel(path, tmp_path / f"back{len(given)}", 2, dims=DECODE, plan=given)
        assert _cases(back) == _cases(plan)


def test_plan_from_onnx_goes_with_devices(capsys):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("gpt2")), "--plan-from-onnx"])
    assert done.value.code == 2 and "--plan-from-onnx compiles a tensor-parallel program" in capsys.readouterr().err


def test_a_layer_split_by_the_mesh_rows_is_sharded_over_row_groups(tmp_path):
    """On a 2x2 mesh, a K projection's 2 heads go one to a row: 2 shards,
    each on a device group of the row's 2 devices."""
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", CompileOptions(4, mesh="2x2"), dims=DECODE)
    k = next(layer for layer in plan.layers if layer.blocks)
    model = annotate(onnx.load(str(model_path("llama"))), plan).model
    node = next(n for n in model.graph.node if n.name == k.node)
    (spec,) = node.device_configurations[0].sharding_spec
    assert list(spec.device) == [-1, -2]
    assert {e.key: list(e.value) for e in spec.index_to_device_group_map} == {-1: [0, 1], -2: [2, 3]}
    assert [s.num_shards for d in spec.sharded_dim for s in d.simple_sharding] == [2]
    assert check_sharding(model) == []
