"""llama3_70b_galaxy's 2-D layout (`--mesh RxC --mesh-layout galaxy`): the
residual stream split by hidden over the mesh's columns, each Linear's
weight a block over both axes, each collective over one; the Optimum
decoders and the 32-query, 8-KV-head Llama against onnxruntime, in process,
under MPI and decoding, beside the line's layout on the same mesh."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import jsonschema
import numpy as np
import onnx
import onnx.checker
import pytest
from model_helpers import export_feeds
from test_mesh import DECODE, DIM_FLAGS, GALAXY_PER_LAYER, MODELS, model_path, needs_mpiexec, weight_bytes

from forge_opt.check.decode import check_decode
from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.sharding import check_sharding
from forge_opt.plan.folder import read_split
from forge_opt.plan.graph_infos import COLUMN, GALAXY_LAYOUT, ROW, VOCAB
from forge_opt.plan.onnx_annotations import annotate
from forge_opt.split.api import tensor_parallel
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble, run_parallel
from forge_opt.targets.devices import parallel_report
from forge_opt.targets.devices.mesh_report import per_layer
from forge_opt.tools.forge_check import main as forge_check
from forge_opt.tools.forge_split import main as forge_split
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.tp.plan_file import read_plan

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "graph_infos.schema.json").read_text())


def _galaxy(mesh: str) -> CompileOptions:
    rows, cols = map(int, mesh.split("x"))
    return CompileOptions(rows * cols, mesh=mesh, mesh_layout=GALAXY_LAYOUT)


@pytest.mark.parametrize("name, mesh", [("llama", "2x2"), ("qwen2", "2x2"), ("mistral", "2x2"),
                                        ("llama_gqa32", "2x4"), ("llama_gqa32", "8x4")])
def test_a_decode_step_matches_onnxruntime_in_galaxys_layout(tmp_path, name, mesh):
    rows, cols = map(int, mesh.split("x"))
    report = check_parallel(model_path(name), rows * cols, export_feeds(model_path(name), DECODE), mesh=mesh,
                            mesh_layout=GALAXY_LAYOUT)
    assert report.status == MATCH, report.error
    if mesh == "8x4":  # a row's one KV head: the columns cannot make their own heads, and the report says why
        assert "(1 KV head a row, which 4 columns do not divide: " in report.summary, report.summary
    plan = tensor_parallel(model_path(name), tmp_path / "tp", _galaxy(mesh), dims=DECODE)
    assert plan.mesh == [rows, cols] and plan.mesh_layout == GALAXY_LAYOUT
    layers = per_layer(plan)
    assert sorted(layers) == [(0,), (1,)] and max(layers.values()) <= GALAXY_PER_LAYER, layers
    assert all(c.mesh_axis in (0, 1) and c.line is None for c in plan.collectives)  # made on one axis each
    share = max(d.parameter_bytes for d in plan.devices) / weight_bytes(name)
    assert share <= 1 / (rows * cols) + 0.01, f"{share:.4f} of the weights on one device"


def test_each_weight_is_a_block_over_both_axes(tmp_path):
    """Galaxy's placement, read off the plan: the projections reading the
    residual stream (Q, K, V, gate, up, the head) take their input's rows
    over the columns and their outputs over the rows, [H/C, F/R]; those
    writing it (O, down) the transpose; the table its hidden over the
    columns and its vocabulary over the rows. The 8 KV heads are one a row
    of 8x4, and so is the cache."""
    plan = tensor_parallel(model_path("llama_gqa32"), tmp_path / "tp", _galaxy("8x4"), dims=DECODE)
    cases = {layer.node.rsplit("/", 2)[-2]: (layer.column_case, layer.case) for layer in plan.layers}
    for reads in ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "lm_head"):
        assert cases[reads] == (ROW, COLUMN), reads
    for writes in ("o_proj", "down_proj"):
        assert cases[writes] == (COLUMN, ROW), writes
    assert cases["embed_tokens"] == (COLUMN, VOCAB)
    past = plan.tensors["past_key_values.0.key"]
    assert (past.split_axis, past.split_blocks) == (1, 8) and past.shape[1] == 1
    report = parallel_report(plan)
    assert "Galaxy's layout: the residual stream split by hidden over the 4 columns" in report
    assert "11 row x column, 4 column x row" in report
    line = plan.line_plan  # the 1-d plan on the 32 devices, priced beside Galaxy's
    assert line is not None and f"line of 32 (its plan)     32 {line.collectives:>11} {line.ring_steps:>10}" in report


def test_galaxys_layout_sends_less_than_the_line_laid_on_the_mesh(tmp_path):
    """On 8x4 the columns all-reduce slices of the stream and its norms'
    statistics, so each device sends about half the bytes the line's
    program sends, and stores less (its KV projections are blocks too)."""
    galaxy = tensor_parallel(model_path("llama_gqa32"), tmp_path / "g", _galaxy("8x4"), dims=DECODE)
    line = tensor_parallel(model_path("llama_gqa32"), tmp_path / "l", CompileOptions(32, mesh="8x4"), dims=DECODE)

    def sent(plan) -> int:
        return sum(c.ring_bytes_per_device for c in plan.collectives)

    assert sent(galaxy) < 0.6 * sent(line)
    assert galaxy.line_plan is not None and sent(galaxy) < 0.6 * galaxy.line_plan.ring_bytes_per_device
    assert line.line_plan is None  # (the line's own row is its collectives priced on the line)
    assert max(d.parameter_bytes for d in galaxy.devices) < max(d.parameter_bytes for d in line.devices)


def test_the_gated_mlp_reduce_scatters_over_the_columns_as_galaxys_does(tmp_path):
    """Galaxy's FF1/FF3: W1's and W3's partial sums reduce-scattered over
    the columns, SiLU·mul on each column's slice, one all-gather for W2
    (`scatter-all-reduces`), where two all-reduces would send a third
    more; W2's sum all-reduced over the rows."""
    plan = tensor_parallel(model_path("llama_gqa32"), tmp_path / "tp", _galaxy("8x4"), dims=DECODE)
    mlp = Counter((c.op, c.mesh_axis) for c in plan.collectives if "/mlp/" in c.input)
    assert mlp == {("reduce_scatter", 1): 4, ("all_gather", 1): 2}, mlp  # 2 layers
    gathered = [c for c in plan.collectives if c.op == "all_gather" and "/mlp/" in c.input]
    assert all(c.group == 4 and c.axis == 2 for c in gathered)


def test_each_column_makes_its_own_attention_heads_with_its_block_of_the_cache(tmp_path):
    """Galaxy's `llama_rs_create_heads` and `all_gather_concat`: at 2x4 the
    32/8-head decoder's Q, K and V sums are one reduce-scatter over the
    columns a layer, each device attends with its own KV head and its block
    of the cache (1/8 of it, not a row's 1/2), and one all-gather joins the
    heads for WO (`scatter-attention-heads`)."""
    plan = tensor_parallel(model_path("llama_gqa32"), tmp_path / "tp", _galaxy("2x4"), dims=DECODE)
    attention = Counter((c.op, c.mesh_axis) for c in plan.collectives if "/self_attn/" in c.input)
    assert attention == {("reduce_scatter", 1): 2, ("all_gather", 1): 2}, attention  # 2 layers
    cache = {n: t for n, t in plan.tensors.items() if "key_values" in n or n.startswith("present")}
    assert len(cache) == 8 and all(t.split_axis == 1 and t.split_blocks is None for t in cache.values())
    assert "KV cache: 4 inputs split over all 8 devices, each column making its own heads" in parallel_report(plan)


def test_eight_decode_steps_in_galaxys_layout_equal_onnxruntimes_tokens():
    """The heads and the static cache split over all 4 devices (each column its KV heads' block). (Under
    MPI too, by hand: 46 s, and MPI equals the simulation bit for bit below.)"""
    report = check_decode(model_path("llama_gqa32"), 8, export_feeds(model_path("llama_gqa32"), DECODE),
                          mesh="2x2", mesh_layout=GALAXY_LAYOUT)
    assert report.status == MATCH, report.error
    assert any("8/8 tokens equal to onnxruntime's (4 devices" in note for note in report.notes)


def test_under_mpi_galaxys_layout_equals_the_simulated_run_bit_for_bit(tmp_path):
    needs_mpiexec()
    feeds = export_feeds(model_path("qwen2"), DECODE)
    plan = tensor_parallel(model_path("qwen2"), tmp_path / "tp", _galaxy("2x2"), dims=DECODE)
    mpi, _ = assemble(plan, run_mpi(tmp_path / "tp", feeds, 4))
    simulated, _ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    for n in simulated:
        np.testing.assert_array_equal(mpi[n], simulated[n], err_msg=n)


def test_forge_check_and_forge_split_take_the_layout(tmp_path, capsys):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("mistral")), "--mesh", "2x2", "--mesh-layout", "galaxy", *DIM_FLAGS])
    said = capsys.readouterr()
    assert done.value.code == 0 and "Galaxy's layout" in said.out + said.err
    folder = tmp_path / "split"
    with pytest.raises(SystemExit) as done:
        forge_split([str(model_path("mistral")), "-o", str(folder), "--mesh", "2x2", "--mesh-layout", "galaxy",
                     "--convert", *DIM_FLAGS])
    assert done.value.code == 0 and "2x2 mesh in Galaxy's layout" in capsys.readouterr().out
    assert read_split(folder)[0].mesh_layout == GALAXY_LAYOUT
    jsonschema.validate(json.loads((folder / "graph_infos.json").read_text()), SCHEMA)
    assert json.loads(next(folder.rglob("parallel/graph_infos.json")).read_text())["mesh_layout"] == GALAXY_LAYOUT
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(folder), "--check", "--model", str(model_path("mistral"))])
    assert done.value.code == 0


def test_the_layout_goes_with_a_mesh(capsys):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama")), "--devices", "4", "--mesh-layout", "galaxy", *DIM_FLAGS])
    assert done.value.code == 2 and "--mesh-layout goes with --mesh" in capsys.readouterr().err


@pytest.mark.parametrize("name, mesh", [("llama", "2x2"), ("qwen2", "2x2"), ("mistral", "2x2"), ("phi3", "2x2"),
                                        ("gpt2", "2x2"), ("llama_gqa32", "2x4"), ("llama_gqa32", "8x4")])
def test_galaxys_plan_round_trips_through_onnx_annotations_beside_the_lines(tmp_path, name, mesh):
    """The plan as a configuration of its own (`p4-2x2-2d`): each weight
    spec'd on two axes, C shards for the columns and R for the rows, or on
    device groups where one axis keeps it whole; in one file with the
    line's plans at P and on the same mesh. onnx's full check and forge-opt's
    pass it, and the plan compiled back from it has every layer's two cases,
    pinned."""
    rows, cols = map(int, mesh.split("x"))
    model = onnx.load(str(model_path(name)))
    for options in (CompileOptions(rows * cols), CompileOptions(rows * cols, mesh=mesh)):
        model = annotate(model, tensor_parallel(model_path(name), tmp_path / "line", options, dims=DECODE,
                                                force=True)).model
    plan = tensor_parallel(model_path(name), tmp_path / "galaxy", _galaxy(mesh), dims=DECODE)
    done = annotate(model, plan)
    assert done.configuration.endswith(f"-{mesh}-2d") and not done.skipped and len(done.model.configuration) == 3
    path = tmp_path / "annotated.onnx"
    onnx.save(done.model, str(path))
    onnx.checker.check_model(str(path), full_check=True)
    assert [str(p) for p in check_sharding(done.model)] == []
    back = tensor_parallel(path, tmp_path / "back", _galaxy(mesh), dims=DECODE,
                           plan=f"{path}#{done.configuration}")
    assert [(x.node, x.column_case, x.case) for x in back.layers] == \
        [(x.node, x.column_case, x.case) for x in plan.layers]
    assert all("pinned by the plan" in x.reason for x in back.layers if x.kind == "linear")


def test_a_weight_block_over_both_axes_is_spec_d_column_first(tmp_path):
    """W1 of 2x2: [H/2 over the columns, F/2 over the rows]: shard (c, r)
    on device r·2 + c; its input split alike over the columns, on groups of
    a column's devices; W2 the transpose."""
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", _galaxy("2x2"), dims=DECODE)
    model = annotate(onnx.load(str(model_path("llama"))), plan).model
    nodes = {n.name: n for n in model.graph.node}
    gate = nodes["/model/layers.0/mlp/gate_proj/MatMul"]
    x, weight = (next(s for s in gate.device_configurations[0].sharding_spec if s.tensor_name == t)
                 for t in gate.input)
    assert list(weight.device) == [0, 2, 1, 3]
    assert [(d.axis, d.simple_sharding[0].num_shards) for d in weight.sharded_dim] == [(-2, 2), (-1, 2)]
    assert list(x.device) == [-1, -2] and [d.axis for d in x.sharded_dim] == [-1]
    assert {e.key: list(e.value) for e in x.index_to_device_group_map} == {-1: [0, 2], -2: [1, 3]}
    down = nodes["/model/layers.0/mlp/down_proj/MatMul"].device_configurations[0].sharding_spec
    assert [(d.axis, d.simple_sharding[0].num_shards) for d in down[0].sharded_dim] == [(-1, 2), (-2, 2)]


def test_galaxys_annotations_compile_back_only_in_its_layout(tmp_path, capsys):
    """forge-check writes the configuration and compiles from it; the same
    pins read by the line's layout, or a spec Galaxy's layout never makes,
    are refused with what is wrong."""
    out = tmp_path / "annotated.onnx"
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama")), "--mesh", "2x2", "--mesh-layout", "galaxy", "--annotate", str(out),
                     *DIM_FLAGS])
    assert done.value.code == 0 and "configuration p4-2x2-2d" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        forge_check([str(out), "--mesh", "2x2", "--mesh-layout", "galaxy", "--plan-from-onnx", *DIM_FLAGS])
    assert done.value.code == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        forge_check([str(out), "--mesh", "2x2", "--plan-from-onnx", *DIM_FLAGS])
    assert done.value.code == 2 and "pins layers per mesh axis (column_axis): compile it in Galaxy's layout" in \
        capsys.readouterr().err
    model = onnx.load(str(out))
    node = next(n for n in model.graph.node if n.name == "/model/layers.0/mlp/up_proj/MatMul")
    spec = next(s for s in node.device_configurations[0].sharding_spec if len(s.sharded_dim) == 2)
    spec.device[:] = [0, 1, 2, 3]  # row-major: not the blocks the devices hold
    onnx.save(model, str(out))
    with pytest.raises(SystemExit) as done:
        forge_check([str(out), "--mesh", "2x2", "--mesh-layout", "galaxy", "--plan-from-onnx", *DIM_FLAGS])
    assert done.value.code == 2 and "'/model/layers.0/mlp/up_proj/MatMul' (MatMul): its sharding in the " \
        "configuration 'p4-2x2-2d' is none Galaxy's layout makes" in capsys.readouterr().err


def test_require_sharded_asks_each_layer_to_be_split_over_one_axis_at_least(tmp_path):
    """A layer kept whole on one axis but split on the other is shared:
    Cohere's K and V, a head a column and whole down the rows, pass. One
    whole on both axes (3 output columns, on neither axis' 2 devices) is
    the error, with both passes' reasons."""
    tensor_parallel(MODELS / "fam_cohere.onnx", tmp_path / "cohere", _galaxy("2x2"), dims=DECODE,
                    require_sharded=True)
    h = onnx.helper
    graph = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], name="head")], "head",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])],
                         [onnx.numpy_helper.from_array(np.ones((4, 3), np.float32), "w")])
    reasons = r"columns: its output columns \(3\) do not divide by 2 devices; rows: its output columns"
    with pytest.raises(ForgeOptError, match=r"1 layer of at least min-size 0 .*node 'head' \(tir.matmul\): " + reasons):
        tensor_parallel(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "head",
                        _galaxy("2x2"), require_sharded=True)


def test_a_layout_is_one_forge_opt_knows(tmp_path):
    with pytest.raises(ForgeOptError, match="mesh-layout=ring: give one of line, galaxy"):
        CompileOptions(4, mesh="2x2", mesh_layout="ring")
    tensor_parallel(model_path("llama"), tmp_path / "tp", _galaxy("2x2"), dims=DECODE)
    infos = tmp_path / "tp" / "graph_infos.json"
    data = json.loads(infos.read_text())
    jsonschema.validate(data, SCHEMA)
    infos.write_text(json.dumps({**data, "mesh_layout": "ring"}))
    with pytest.raises(ForgeOptError, match="mesh_layout is 'ring': one of line, galaxy, with a mesh"):
        read_split(tmp_path / "tp")


def test_each_row_runs_its_own_slice_of_an_activation(tmp_path):
    """K and V pinned column-parallel on both axes split Cohere's one head a
    device by its dims over the rows, and a segment then differs between
    rows only in where it slices the rotary's cos: the writer compared
    devices 0 and 1, both in row 0, found them alike and gave row 1 its
    module (a mismatch); it compares device 0 with the last device now."""
    pins = tmp_path / "pins.json"
    pins.write_text(json.dumps({"layers": {f"/model/layers.0/self_attn/{p}_proj/MatMul": {"axis": 1}
                                           for p in ("k", "v")}}))
    model = MODELS / "fam_cohere.onnx"
    report = check_parallel(model, 4, export_feeds(model, DECODE), mesh="2x2", mesh_layout=GALAXY_LAYOUT,
                            plan=str(pins))
    assert report.status == MATCH, report.format()


@pytest.mark.parametrize("name, stream", [("bert_opset17", True), ("cnn_resnet18", False)])
def test_an_encoder_and_a_cnn_take_galaxys_layout(name, stream):
    """BERT's stream, split by hidden at its Embedding, is gathered for its
    first LayerNormalization; a CNN has no stream: each axis pairs its layers
    as a line of its devices, each weight a block over both, and the report
    claims a stream split by hidden only where an Embedding splits one."""
    report = check_parallel(MODELS / f"{name}.onnx", 4, mesh="2x2", mesh_layout=GALAXY_LAYOUT)
    assert report.status == MATCH, report.error
    header = next(line for line in report.summary.splitlines() if line.startswith("mesh 2x2"))
    assert "Galaxy's layout: " in header and ("residual stream split by hidden" in header) == stream


@pytest.mark.parametrize("entry, message", [
    ({"axis": 1, "column_axis": 2}, "'column_axis' must be 0, 1 or null"),
    ({"axis": 1, "column_axis": True}, "'column_axis' must be 0, 1 or null"),
    ({"column_axis": 0}, "'axis' must be 0, 1 or null"),
    ("column", "'axis' must be 0, 1 or null"),
])
def test_a_plan_files_pins_per_axis_are_checked(tmp_path, entry, message):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"layers": {"fc": entry}}))
    with pytest.raises(ForgeOptError, match=message):
        read_plan(str(plan))


def test_xla_runs_galaxys_layout():
    """A second executor for the same program: XLA, from its StableHLO form."""
    report = check_parallel(model_path("llama"), 4, export_feeds(model_path("llama"), DECODE), mesh="2x2",
                            mesh_layout=GALAXY_LAYOUT, executor="xla")
    assert report.status == MATCH, report.error
    assert any("executed by XLA" in note for note in report.notes)
