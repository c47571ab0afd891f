"""`graph_infos.json` is read and written only as `plan/graph_infos.py`'s
records: what they write is what the schema users validate against
accepts, reads back as the same records, and no other module reads the
file's keys by hand."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest
from test_split_control_flow import wake_word_style

from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan import graph_infos
from forge_opt.plan.graph_infos import Collective, Device, Layer, Plan, Send, TensorInfo
from forge_opt.plan.records import key as json_key
from forge_opt.split.api import split_model, tensor_parallel

ROOT = Path(__file__).resolve().parents[1]  # the checkout: the schema is not installed
SCHEMA = json.loads((ROOT / "docs" / "graph_infos.schema.json").read_text())
MODELS = ROOT / "tests" / "data" / "models"
LLAMA_DIMS = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}


def _written(folder: Path) -> dict:
    return json.loads((folder / "graph_infos.json").read_text())


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, tuple[Plan, dict]]:
    """A split of the detector example (device and CPU sub-models), one of
    a model whose If runs on the host, a tensor-parallel plan of GPT-2 and a
    decoder cut into 2 pipeline stages."""
    tmp = tmp_path_factory.mktemp("plans")
    out = {}
    for name, make in {
        "split": lambda f: split_model(ROOT / "examples" / "detector.onnxtxt", f)[1],
        "if": lambda f: split_model(wake_word_style(), f)[1],
        "tp": lambda f: tensor_parallel(MODELS / "gpt2_opset17.onnx", f, 2),
        "stages": lambda f: split_model(MODELS / "llm_llama.onnx", f, stages=2, dims=LLAMA_DIMS)[1],
    }.items():
        out[name] = make(tmp / name), _written(tmp / name)
    return out


@pytest.mark.parametrize("name", ["split", "if", "tp", "stages"])
def test_what_the_records_write_the_schema_accepts_and_reads_back_the_same(plans, name):
    plan, written = plans[name]
    jsonschema.validate(written, SCHEMA)
    assert written == plan.to_json()
    assert Plan.from_json(written, "graph_infos.json") == plan


def _properties(*path: str) -> set[str]:
    node = SCHEMA
    for key in path:
        node = node["properties"][key] if key != "items" else node["items"]
    return set(node["properties"])


@pytest.mark.parametrize(
    "record, schema_path",
    [
        (TensorInfo, ("tensors",)),
        (Collective, ("collectives", "items")),
        (Device, ("devices", "items")),
        (Send, ("sends", "items")),
    ],
)
def test_each_record_has_the_fields_the_schema_names(record, schema_path):
    node = SCHEMA["properties"][schema_path[0]]
    node = node["items"] if len(schema_path) > 1 else node["additionalProperties"]
    assert {json_key(f) for f in dataclasses.fields(record)} == set(node["properties"])


def test_the_layers_the_schema_names_are_fields_of_the_record():
    assert set(SCHEMA["properties"]["layers"]["items"]["properties"]) <= {f.name for f in dataclasses.fields(Layer)}


def test_the_plan_record_has_a_field_for_every_top_level_key():
    written_elsewhere = {"graph_num", "platform", "dynamic"}  # derived when written
    assert set(SCHEMA["properties"]) - written_elsewhere == {f.name for f in dataclasses.fields(Plan)}


@pytest.fixture(scope="module")
def llama_plan(tmp_path_factory) -> dict:
    """A decoder's plan for 2 devices: its KV cache split along the heads."""
    folder = tmp_path_factory.mktemp("llama") / "tp"
    tensor_parallel(MODELS / "llm_llama.onnx", folder, 2, dims=LLAMA_DIMS)
    return _written(folder)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda i: i["collectives"][0].update(op="broadcast"), "collectives[0]: op 'broadcast' is none of"),
        (lambda i: i["collectives"][0].update(bytes="many"), "collectives[0]: 'bytes' is 'many', not int"),
        (lambda i: i["collectives"][0].pop("input"), "collectives[0]: the field 'input' is missing"),
        (lambda i: i["devices"].pop(), "'devices' must list the grid's 2 devices, by rank"),
        (lambda i: i["devices"][0].update(colour="red"), "devices[0]: unknown field 'colour'"),
        (lambda i: i["tensors"]["past_key_values.0.key"].update(split_axis=7),
         "tensor 'past_key_values.0.key' has split_axis 7, not an axis of its shape"),
        (lambda i: i.update(grid={"shape": [2, 1, 1]}), "'grid' must be {\"shape\": [P]}"),
        (lambda i: i.update(grid={"name": "grid", "shape": [1, 2]}),
         "collectives[0]: on the mesh [1, 2] a collective names its mesh_axis"),
        (lambda i: i["collectives"][0].update(reduction="min"), "collectives[0]: reduction 'min': an all_reduce sums"),
        (lambda i: i["collectives"][0].update(mesh_axis=1, group=2),
         "collectives[0]: names a mesh axis, but the grid is a line"),
        (lambda i: i["outputs"][0].update(tensor="nowhere"), "which no graph makes and no input is"),
        (lambda i: i["outputs"][0].update(tensor=3), "outputs[0]: 'tensor' is 3, not str"),
        (lambda i: i["layers"][0].update(packed="3"), "layers[0]: 'packed' is '3', not int"),
    ],
)
def test_a_hand_edited_plan_is_named_by_the_reader(llama_plan, edit, message):
    data = json.loads(json.dumps(llama_plan))
    edit(data)
    with pytest.raises(ForgeOptError, match=r"graph_infos\.json: ") as error:
        Plan.from_json(data, "tp/graph_infos.json")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: b["else"].pop("folder"), "branches.else: the field 'folder' is missing"),
        (lambda b: b["then"].update(outputs="b"), "branches.then: 'outputs' is 'b', not a list"),
        (lambda b: b.update(results=[1]), "branches: 'results' is 1, not str"),
        (lambda b: b.update(colour="red"), "branches: unknown field 'colour'"),
    ],
)
def test_a_nested_record_is_read_from_its_fields(plans, edit, message):
    """A run-time If's branches are read as their records' fields type
    them, the error naming the entry inside the graph."""
    data = json.loads(json.dumps(plans["if"][1]))
    n, entry = next((n, g) for n, g in enumerate(data["graphs"]) if "branches" in g)
    edit(entry["branches"])
    with pytest.raises(ForgeOptError) as error:
        Plan.from_json(data, "split/graph_infos.json")
    assert f"split/graph_infos.json: graphs[{n}].{message}" in str(error.value)


def test_a_pipelines_sends_are_every_activation_a_later_stage_reads(plans):
    plan, written = plans["stages"]
    reads = {x for x in plan.graphs[1].inputs if x in plan.graphs[0].outputs}
    assert reads and {s.tensor for s in plan.sends} == reads
    assert all(s.source == 0 and s.to == [1] for s in plan.sends)
    assert {s["tensor"] for s in written["sends"]} == reads and all(s["from"] == 0 for s in written["sends"])


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda i: i.pop("sends"), "a pipeline's plan lists the activations its stages send ('sends')"),
        (lambda i: i["sends"].pop(0), "sends: stage 1 reads '{x}' from stage 0, but no send carries it"),
        (lambda i: i["sends"].append({**i["sends"][0], "from": 1}),
         "sends: '{x}' is sent from stage 1 to stage 1, which does not read it from there"),
        (lambda i: i["sends"][0].update(source=0), "sends[0]: unknown field 'source'"),
        (lambda i: [g.pop("stage") for g in i["graphs"]], "'sends' are a pipeline's, but the graphs have no stages"),
    ],
)
def test_a_pipelines_sends_edited_by_hand_are_named(plans, edit, message):
    """The runner sends what the plan lists: one missing would leave a
    stage without its input, one too many would send what nobody reads."""
    data = json.loads(json.dumps(plans["stages"][1]))
    x = data["sends"][0]["tensor"]
    edit(data)
    with pytest.raises(ForgeOptError) as error:
        Plan.from_json(data, "s/graph_infos.json")
    assert message.format(x=x) in str(error.value)


def test_a_split_tensors_whole_shape_counts_every_device(plans):
    plan = plans["tp"][0]
    split = [name for name, t in plan.tensors.items() if t.split_axis is not None]
    for name in split:
        t = plan.tensors[name]
        assert plan.whole_shape(name)[t.split_axis] == t.shape[t.split_axis] * 2
    assert all(plan.whole_shape(n) == plan.tensors[n].shape for n in plan.tensors if n not in split)
    assert np.all([d.rank for d in plan.devices] == [0, 1])


# the keys of graph_infos.json that only the records module reads
_KEYS = {"graphs", "tensors", "graph_num", "model_info", "model_path", "module_path", "context_dir", "collectives",
         "devices", "layers", "grid", "split_axis", "branches", "loop", "after_graph", "ring_bytes_per_device"}


def test_no_module_but_the_records_reads_the_files_keys():
    """A key read by hand (`infos["graphs"][n]["model_info"]`) is a second
    reader, which the records' checks do not cover."""
    found = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in {".venv", "build", "tests"} or rel == Path("plan", Path(graph_infos.__file__).name):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in _KEYS:
                found.append(f"{rel}:{node.lineno} [{node.slice.value!r}]")
    assert not found
