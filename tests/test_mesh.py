"""Tensor parallelism on an R×C mesh (`--mesh RxC`, `collectives-on-mesh`):
the Optimum decoders and a Llama-3-70B-shaped one (32 query heads over 8
KV heads) against onnxruntime, in process and under MPI, with the
collectives per mesh axis and each device's share of the weights."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import export_feeds

from forge_opt.check.decode import check_decode
from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.interpreters.shard import ThreadGroup, group_of, run_threads
from forge_opt.plan.folder import read_split
from forge_opt.plan.graph_infos import Collective
from forge_opt.split.api import split_model, tensor_parallel
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble, run_parallel
from forge_opt.targets.devices import parallel_report
from forge_opt.targets.devices.mesh_report import chains, line_collectives, per_layer
from forge_opt.tools.forge_check import main as forge_check
from forge_opt.tools.forge_split import main as forge_split
from forge_opt.transforms.compile_options import CompileOptions

MODELS = Path(__file__).parent / "data" / "models"
DECODE = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
GALAXY_PER_LAYER = 9  # collectives of a decoder layer in llama3_70b_galaxy at 8x4


def model_path(name: str) -> Path:
    return MODELS / f"llm_{name}.onnx"


#: DECODE's sizes as forge-check's and forge-split's flags
DIM_FLAGS = [a for k, v in DECODE.items() for a in ("--dim", f"{k}={v}")]


def _split_on_2x2(name: str, folder: Path) -> str:
    """`forge-split MODEL -o FOLDER --mesh 2x2 --convert` of the export
    `name`, which must succeed; the model's path."""
    model = str(model_path(name))
    with pytest.raises(SystemExit) as done:
        forge_split([model, "-o", str(folder), "--mesh", "2x2", "--convert", *DIM_FLAGS])
    assert done.value.code == 0
    return model


def weight_bytes(name: str) -> int:
    model = onnx.load(model_path(name))
    return sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer if np.prod(t.dims) > 1)


@pytest.mark.parametrize("name, mesh", [("llama", "2x2"), ("qwen2", "2x2"), ("mistral", "2x2"),
                                        ("llama_gqa32", "2x4"), ("llama_gqa32", "8x4")])
def test_a_decode_step_matches_onnxruntime_on_a_mesh(tmp_path, name, mesh):
    rows, cols = map(int, mesh.split("x"))
    report = check_parallel(model_path(name), rows * cols, export_feeds(model_path(name), DECODE), mesh=mesh)
    assert report.status == MATCH, report.error
    plan = tensor_parallel(model_path(name), tmp_path / "tp", CompileOptions(rows * cols, mesh=mesh), dims=DECODE)
    assert plan.mesh == [rows, cols]
    mesh_shape = [rows, cols]
    layers = per_layer(plan)
    assert sorted(layers) == [(0,), (1,)]
    assert max(layers.values()) <= GALAXY_PER_LAYER + 2, layers
    for c in plan.collectives:  # each over one axis, named with its group
        assert c.mesh_axis in (0, 1) and c.group == mesh_shape[c.mesh_axis]
    share = max(d.parameter_bytes for d in plan.devices) / weight_bytes(name)
    assert share <= 1 / (rows * cols) + 0.10, f"{share:.3f} of the weights on one device"


@pytest.mark.parametrize("name, mesh, rows", [("llama_gqa32", "8x4", 8), ("llama", "2x2", 2)])
def test_kv_heads_the_devices_do_not_divide_are_split_by_the_rows(tmp_path, name, mesh, rows):
    """8 KV heads on 32 devices (2 on 4): each row holds its KV heads, whole
    along the row, so a device stores 1/R of K, V and the cache, where the
    line of R·C devices stores them whole; no collective is added."""
    r, c = map(int, mesh.split("x"))
    plan = tensor_parallel(model_path(name), tmp_path / "tp", CompileOptions(r * c, mesh=mesh), dims=DECODE)
    by_rows = [layer for layer in plan.layers if layer.blocks]
    assert len(by_rows) == 4 and {layer.blocks for layer in by_rows} == {rows}  # k_proj and v_proj of 2 layers
    assert all(layer.node.endswith(("k_proj/MatMul", "v_proj/MatMul")) for layer in by_rows)
    past = plan.tensors["past_key_values.0.key"]
    assert (past.split_axis, past.split_blocks) == (1, rows)
    assert plan.whole_shape("past_key_values.0.key")[1] == past.shape[1] * rows
    line = tensor_parallel(model_path(name), tmp_path / "line", CompileOptions(r * c), dims=DECODE)
    assert line.tensors["past_key_values.0.key"].split_axis is None  # the line keeps the cache whole
    assert len(line_collectives(plan.collectives)) == len(line.collectives)
    assert max(d.parameter_bytes for d in plan.devices) < max(d.parameter_bytes for d in line.devices)
    assert f"{len(by_rows)} layers' heads, {rows} blocks, one a row" in parallel_report(plan)


def test_a_rows_block_the_rows_devices_disagree_on_is_named(tmp_path):
    """Devices 0 and 1 share row 0's block of the cache: joined from device
    0's, and where device 1's differs the output is named, not passed."""
    feeds = export_feeds(model_path("llama"), DECODE)
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", CompileOptions(4, mesh="2x2"), dims=DECODE)
    per_device = run_parallel(tmp_path / "tp", feeds)
    whole, differ = assemble(plan, per_device)
    assert differ == [] and whole["present.0.key"].shape[1] == 2
    per_device[1]["present.0.key"] = per_device[1]["present.0.key"] + 1
    assert assemble(plan, per_device)[1] == ["present.0.key"]


def test_require_sharded_holds_on_the_mesh_where_the_line_of_as_many_devices_fails(capsys):
    """32 devices in a line leave the 8 KV heads' projections whole
    (--require-sharded names them); on 8x4 the rows share them."""
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama_gqa32")), "--devices", "32", "--require-sharded", *DIM_FLAGS])
    assert done.value.code == 2 and "k_proj/MatMul' (tir.matmul): its 8 heads do not divide by 32" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama_gqa32")), "--mesh", "8x4", "--require-sharded", *DIM_FLAGS])
    assert done.value.code == 0


@pytest.mark.parametrize("name, by_rows", [("gqa_interleave", True), ("gqa_attention_op23", True),
                                           ("gqa_tile", False)])
def test_kv_heads_go_by_rows_only_where_they_stay_split(tmp_path, name, by_rows):
    """The three PyTorch exports of a 4-over-2-head attention on 2x2: where
    query head j reads KV head j // 2 (`repeat_interleave`, ONNX Attention)
    each row holds its KV head; where it reads j mod 2 (`repeat`, a Tile),
    every device needs both, so K and V stay whole rather than be gathered.
    Either way the one all-reduce (3 collectives on the mesh) is all."""
    model = MODELS / f"{name}.onnx"
    assert check_parallel(model, 4, mesh="2x2").status == MATCH
    plan = tensor_parallel(model, tmp_path / "tp", CompileOptions(4, mesh="2x2"))
    assert [layer.blocks for layer in plan.layers] == ([0, 2, 2, 0] if by_rows else [0, 0, 0, 0])
    assert len(plan.collectives) == 3


def test_the_report_groups_mesh_collectives_by_the_line_collective_they_came_from():
    """An all-reduce made two (no dim divides by C) and an all-gather of its
    result made two are two line collectives (reading chains off the order
    alone would join three); one made over one axis (a rows-split value
    gathered) is one of its own."""
    def made(op: str, x: str, y: str, line: int | None) -> Collective:
        return Collective(0, op, x, y, 64, 32, mesh_axis=0, group=2, line=line)
    mesh = [made("all_reduce", "x", "a", 0), made("all_reduce", "a", "b", 0), made("all_gather", "b", "c", 1),
            made("all_gather", "c", "d", 1), made("all_gather", "d", "e", None)]
    assert [len(chain) for chain in chains(mesh)] == [2, 2, 1]
    assert [kind for kind, _ in line_collectives(mesh)] == ["all_reduce", "all_gather", "all_gather"]


def test_the_report_has_a_table_per_mesh_axis_beside_the_line(tmp_path):
    plan = tensor_parallel(model_path("llama_gqa32"), tmp_path / "tp", CompileOptions(8, mesh="2x4"), dims=DECODE)
    report = parallel_report(plan)
    rows = next(line for line in report.splitlines() if line.startswith("rows (axis 0)"))
    columns = next(line for line in report.splitlines() if line.startswith("columns (axis 1)"))
    line = next(line for line in report.splitlines() if line.startswith("line of 8"))
    assert rows.split()[3] == "2" and columns.split()[3] == "4"  # the group sizes
    # the mesh sends what the line sends, in fewer ring steps
    mesh_steps = int(rows.split()[5]) + int(columns.split()[5])
    assert mesh_steps < int(line.split()[5])


def needs_mpiexec() -> None:
    if shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral"])
def test_under_mpi_a_mesh_equals_the_simulated_run_bit_for_bit(tmp_path, name):
    needs_mpiexec()
    feeds = export_feeds(model_path(name), DECODE)
    plan = tensor_parallel(model_path(name), tmp_path / "tp", CompileOptions(4, mesh="2x2"), dims=DECODE)
    mpi, _ = assemble(plan, run_mpi(tmp_path / "tp", feeds, 4))
    simulated, _ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    for n in simulated:
        np.testing.assert_array_equal(mpi[n], simulated[n], err_msg=n)


@pytest.mark.parametrize("mpi", [False, True])
def test_eight_decode_steps_on_a_2x2_mesh_equal_onnxruntimes_tokens(mpi):
    if mpi:
        needs_mpiexec()
    report = check_decode(model_path("llama"), 8, export_feeds(model_path("llama"), DECODE), mesh="2x2", mpi=mpi)
    assert report.status == MATCH, report.error
    assert any("8/8 tokens equal to onnxruntime's (4 devices" in note for note in report.notes)


def test_forge_check_takes_a_mesh_and_prints_its_axes(capsys):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama")), "--mesh", "1x2", *DIM_FLAGS])
    assert done.value.code == 0
    said = capsys.readouterr()
    assert "mesh 1x2" in said.err + said.out and "line of 2" in said.err + said.out


@pytest.mark.parametrize("flags, message", [
    (["--mesh", "2"], "mesh '2': give rows x columns"),
    (["--mesh", "1x1"], "mesh '1x1' has one device"),
    (["--mesh", "2x2", "--devices", "8"], "devices=8 with mesh=2x2: the mesh has 4 devices"),
    (["--mesh", "2x2", "--fallback"], "--mesh does not combine with"),
])
def test_a_mesh_the_check_cannot_take_is_refused(capsys, flags, message):
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama")), *flags])
    assert done.value.code == 2
    assert message in capsys.readouterr().err


def test_a_mesh_and_device_memory_do_not_combine():
    with pytest.raises(ForgeOptError, match="mesh=2x2 with device-memory"):
        CompileOptions(mesh="2x2", device_memory="1GB")


def test_the_groups_of_a_mesh_are_its_rows_and_columns():
    assert group_of([2, 4], [1], 5) == [4, 5, 6, 7]  # device 5: row 1
    assert group_of([2, 4], [0], 5) == [1, 5]  # column 1
    assert group_of([2, 4], [0, 1], 5) == list(range(8))
    assert group_of([8], [0], 3) == list(range(8))


def test_a_device_failing_releases_the_others_waiting_in_a_row():
    def work(member):
        if member.rank == 3:
            raise ValueError("device 3 failed")
        return member.along([2, 2], [1]).all_reduce(np.ones(2))

    done: list[BaseException] = []
    runner = threading.Thread(target=lambda: _catch(done, lambda: run_threads(4, work)))
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive(), "a device waits for ever"
    assert isinstance(done[0], ValueError)


def _catch(into: list[BaseException], call) -> None:
    try:
        call()
    except BaseException as e:
        into.append(e)


def test_a_group_made_after_a_failure_does_not_wait():
    group = ThreadGroup(2)
    group.abort()
    row = group.of([0, 1])
    assert row.barrier.broken


def test_forge_split_converts_each_device_sub_model_for_the_mesh(tmp_path, capsys):
    folder = tmp_path / "split"
    model = _split_on_2x2("mistral", folder)
    assert "converted tensor-parallel for 4 devices on a 2x2 mesh" in capsys.readouterr().out
    inner = read_split(next(folder.rglob("parallel")))[0]
    assert inner.mesh == [2, 2] and read_split(folder)[0].mesh == [2, 2]
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(folder), "--check", "--model", model])
    assert done.value.code == 0


def test_a_split_plans_mesh_must_hold_its_devices(tmp_path):
    split_model(model_path("llama"), tmp_path / "split", mesh="2x2", dims=DECODE)
    infos = tmp_path / "split" / "graph_infos.json"
    data = json.loads(infos.read_text())
    data["mesh"] = [2, 3]
    infos.write_text(json.dumps(data))
    with pytest.raises(ForgeOptError, match=r"mesh is \[2, 3\], not \[R, C\] of the 4 devices"):
        read_split(tmp_path / "split")


def test_each_pipeline_stage_on_a_mesh(capsys):
    """`--stages 2 --mesh 1x2`: each stage tensor-parallel on its own mesh
    (4 devices in all), against onnxruntime."""
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("qwen2")), "--stages", "2", "--mesh", "1x2", *DIM_FLAGS])
    said = capsys.readouterr()
    assert done.value.code == 0, said.err
    assert "each stage tensor-parallel on a 1x2 mesh of 2 devices (2 x 2 = 4 devices)" in said.out + said.err


@pytest.mark.parametrize("name", ["bert_opset17", "cnn_resnet18"])
def test_an_encoder_and_a_cnn_take_a_mesh(name):
    """Their weights over all 4 devices, as on a line; the report says so."""
    report = check_parallel(MODELS / f"{name}.onnx", 4, mesh="2x2")
    assert report.status == MATCH, report.error
    assert "the weights split over all 4 as on a line" in report.summary


def test_xla_runs_a_mesh_program_with_a_replica_group_per_row_and_column():
    report = check_parallel(model_path("llama"), 4, export_feeds(model_path("llama"), DECODE), mesh="2x2",
                            executor="xla")
    assert report.status == MATCH, report.error
    assert any("executed by XLA" in note for note in report.notes)


def test_a_plan_whose_collectives_run_over_the_wrong_axis_is_never_a_match(tmp_path, capsys):
    """A 2x2 plan's all-reduces edited to run along the other mesh axis (the
    groups are as large, so the plan still reads) sum the wrong devices'
    parts: `run --check` ends in a mismatch naming the outputs (the KV
    cache, split by rows, included), never a match."""
    folder = tmp_path / "split"
    model = _split_on_2x2("llama", folder)
    infos = next(folder.rglob("parallel")) / "graph_infos.json"
    data = json.loads(infos.read_text())
    for c in data["collectives"]:
        if c["op"] == "all_reduce":
            c["mesh_axis"] = 1 - c["mesh_axis"]
    infos.write_text(json.dumps(data))
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(folder), "--check", "--model", model])
    said = capsys.readouterr()
    assert done.value.code == 1 and "match" not in said.out.split()
    assert all(f"{name}: " in said.out for name in ("logits", "present.0.key", "present.1.value")), said.out


@pytest.mark.parametrize("flags, message", [
    (["--mesh", "4"], "mesh '4': give rows x columns"),
    (["--mesh", "2x2", "--devices", "2"], "--devices 2 with --mesh 2x2: the mesh has 4 devices"),
])
def test_forge_split_refuses_a_mesh_it_cannot_take(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as done:
        forge_split([str(model_path("llama")), "-o", str(tmp_path / "split"), *flags])
    assert done.value.code == 2
    assert message in capsys.readouterr().err
