"""llama3_70b_galaxy's 2-D layout (`--mesh RxC --mesh-layout galaxy`): the
residual stream split by hidden over the mesh's columns, each Linear's
weight a block over both axes, each collective over one; the Optimum
decoders and the 32-query, 8-KV-head Llama against onnxruntime, in process,
under MPI and decoding, beside the line's layout on the same mesh."""

from __future__ import annotations

import json

import numpy as np
import pytest
from model_helpers import export_feeds
from test_mesh import DECODE, DIM_FLAGS, GALAXY_PER_LAYER, MODELS, model_path, needs_mpiexec, weight_bytes

from forge_opt.check.decode import check_decode
from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan.folder import read_split
from forge_opt.plan.graph_infos import COLUMN, GALAXY_LAYOUT, ROW, VOCAB
from forge_opt.split.api import tensor_parallel
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble, run_parallel
from forge_opt.targets.devices import parallel_report
from forge_opt.targets.devices.mesh_report import per_layer
from forge_opt.tools.forge_check import main as forge_check
from forge_opt.tools.forge_split import main as forge_split
from forge_opt.transforms.compile_options import CompileOptions


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
    assert "11 row x column, 4 column x row" in report and "line of 32" not in report


def test_galaxys_layout_sends_less_than_the_line_laid_on_the_mesh(tmp_path):
    """On 8x4 the columns all-reduce slices of the stream and its norms'
    statistics, so each device sends about half the bytes the line's
    program sends, and stores less (its KV projections are blocks too)."""
    galaxy = tensor_parallel(model_path("llama_gqa32"), tmp_path / "g", _galaxy("8x4"), dims=DECODE)
    line = tensor_parallel(model_path("llama_gqa32"), tmp_path / "l", CompileOptions(32, mesh="8x4"), dims=DECODE)

    def sent(plan) -> int:
        return sum(c.ring_bytes_per_device for c in plan.collectives)

    assert sent(galaxy) < 0.6 * sent(line)
    assert max(d.parameter_bytes for d in galaxy.devices) < max(d.parameter_bytes for d in line.devices)


@pytest.mark.parametrize("mpi", [False, True])
def test_eight_decode_steps_in_galaxys_layout_equal_onnxruntimes_tokens(mpi):
    if mpi:
        needs_mpiexec()
    report = check_decode(model_path("llama"), 8, export_feeds(model_path("llama"), DECODE), mesh="2x2",
                          mesh_layout=GALAXY_LAYOUT, mpi=mpi)
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
    assert json.loads(next(folder.rglob("parallel/graph_infos.json")).read_text())["mesh_layout"] == GALAXY_LAYOUT
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(folder), "--check", "--model", str(model_path("mistral"))])
    assert done.value.code == 0


@pytest.mark.parametrize("flags, message", [
    (["--devices", "4", "--mesh-layout", "galaxy"], "--mesh-layout goes with --mesh"),
    (["--mesh", "2x2", "--mesh-layout", "galaxy", "--annotate", "out.onnx"],
     "splits each weight over both mesh axes, which forge-opt does not write as ONNX annotations yet"),
])
def test_what_the_layout_cannot_take_is_refused(tmp_path, monkeypatch, capsys, flags, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        forge_check([str(model_path("llama")), *flags, *DIM_FLAGS])
    assert done.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out.onnx").exists()


def test_a_layout_is_one_forge_opt_knows(tmp_path):
    with pytest.raises(ForgeOptError, match="mesh-layout=ring: give one of line, galaxy"):
        CompileOptions(4, mesh="2x2", mesh_layout="ring")
    tensor_parallel(model_path("llama"), tmp_path / "tp", _galaxy("2x2"), dims=DECODE)
    infos = tmp_path / "tp" / "graph_infos.json"
    data = json.loads(infos.read_text())
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
