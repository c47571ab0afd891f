"""The second executor and the real compiler: `forge-check --executor xla`
(the StableHLO form on XLA CPU, one device and several) judged as the
stand-in is, `--tt-mlir` and `python -m forge_opt.tools.tt_mlir` (tt-mlir of
jax-tt-plugin, a mock Blackhole p150), and `docs/executors.md`, whose
executor columns this re-derives."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forge_opt.check import MATCH, MISMATCH, NOT_COMPILED, check_model
from forge_opt.check.split import check_parallel
from forge_opt.dialects.forge_functions import BY_NAME
from forge_opt.execution import tt_mlir

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "data" / "models"
DECODE = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}


def _tool(name: str, *args, cwd=None):
    exe = Path(sys.executable).parent / name
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_forge_check_on_xla_matches_and_says_so():
    done = _tool("forge-check", MODELS / "tiny_cnn_opset17.onnx", "--executor", "xla")
    assert done.returncode == MATCH, done.stdout + done.stderr
    assert "executed by XLA CPU (jaxlib" in done.stdout


def test_an_unknown_executor_is_an_error_naming_the_choices():
    done = _tool("forge-check", MODELS / "tiny_cnn_opset17.onnx", "--executor", "gpu")
    assert done.returncode == NOT_COMPILED
    assert "--executor gpu: give one of standin, xla" in done.stderr


def test_a_split_runs_its_device_sub_models_on_xla():
    """NMS stays on the CPU; the device sub-model is compiled again and
    run as StableHLO."""
    done = _tool("forge-check", ROOT / "examples" / "detector.onnxtxt", "--fallback", "--executor", "xla")
    assert done.returncode == MATCH, done.stdout + done.stderr
    assert "executed by XLA CPU (jaxlib" in done.stdout and "each device sub-model" in done.stdout
    done = _tool("forge-check", ROOT / "examples" / "detector.onnxtxt", "--fallback", "--executor", "xla",
                 "--devices", "2")
    assert done.returncode == NOT_COMPILED and "leave out --devices" in done.stderr


def test_xla_and_tt_mlir_refuse_mpi_before_compiling():
    """The P devices' one SPMD program is not the MPI runner's per-device modules."""
    for flag in (("--executor", "xla"), ("--tt-mlir",)):
        done = _tool("forge-check", MODELS / "tiny_cnn_opset17.onnx", "--devices", "2", "--mpi", *flag)
        assert done.returncode == NOT_COMPILED
        assert "take the P devices' one SPMD program: leave out --mpi" in done.stderr


def test_a_decode_loop_names_the_executor_it_does_not_take():
    done = _tool("forge-check", MODELS / "tiny_cnn_opset17.onnx", "--executor", "xla", "--decode", "2")
    assert done.returncode == NOT_COMPILED
    assert "--executor does not combine with --decode" in done.stderr


def test_a_wrong_golden_is_caught_by_the_other_executor(monkeypatch):
    """The stand-in runs the goldens, XLA the StableHLO forms: a golden
    broken in the stand-in is a mismatch there and not on XLA."""
    relu = BY_NAME["Relu"]
    monkeypatch.setattr(relu, "kernel", lambda x: np.maximum(x, 0.01).astype(x.dtype))
    model = str(MODELS / "tiny_cnn_opset17.onnx")
    assert check_model(model).status == MISMATCH
    assert check_model(model, executor="xla").status == MATCH


def test_a_wrong_stablehlo_form_is_a_mismatch_on_xla(monkeypatch):
    """The other way round: a form that computes the wrong thing is caught
    by the same verdict, and the stand-in still matches."""
    from forge_opt.dialects.forge_functions.stablehlo_forms import FORMS

    monkeypatch.setitem(FORMS, "Relu", lambda h, call, args, out: h.unary("abs", args[0]))
    model = str(MODELS / "tiny_cnn_opset17.onnx")
    assert check_model(model, executor="xla").status == MISMATCH
    assert check_model(model).status == MATCH


def test_block_float_weights_are_what_the_device_holds_on_both_executors():
    """bfp4_b matmul weights: the StableHLO program's constants hold
    `device_values`, as the stand-in converts the operand: both give the
    same PCC to the float32 oracle."""
    model = str(MODELS / "gpt2_opset17.onnx")
    standin, xla = (check_model(model, weight_format="bfp4_b", executor=e) for e in ("standin", "xla"))
    assert standin.status == xla.status == MATCH
    assert abs(standin.outputs[0].pcc - xla.outputs[0].pcc) < 1e-6, (standin.outputs[0].pcc, xla.outputs[0].pcc)
    float32 = check_model(model, executor="xla")
    assert float32.outputs[0].pcc - xla.outputs[0].pcc > 1e-4  # the weights were converted


def test_a_decoder_with_its_kv_cache_split_runs_on_two_xla_devices():
    """The past and present KV caches are split by heads: @main takes and
    returns them whole, each device its block."""
    report = check_parallel(MODELS / "llm_llama.onnx", 2, dims=DECODE, executor="xla")
    assert report.status == MATCH, report.format()
    assert "on 2 devices" in report.format()


def test_the_mock_chips_are_laid_out_as_the_programs_mesh():
    """A line of P chips links each to the next; an R x C mesh each to its
    right and lower neighbour, two ethernet links a pair, on channels no
    chip uses twice."""
    assert tt_mlir.program_mesh('sdy.mesh @mesh = <["r"=8, "c"=4]>') == [8, 4]
    assert tt_mlir.program_mesh('sdy.mesh @mesh = <["d"=2]>') == [2]
    assert tt_mlir.program_mesh("module {\n}\n") == [1]
    for mesh, pairs in {(4,): {(0, 1), (1, 2), (2, 3)}, (2, 2): {(0, 1), (2, 3), (0, 2), (1, 3)},
                        (2, 3): {(0, 1), (1, 2), (3, 4), (4, 5), (0, 3), (1, 4), (2, 5)}}.items():
        links = re.findall(r"\{chip: (\d+), chan: (\d+)\}, \{chip: (\d+), chan: (\d+)\}", tt_mlir.descriptor(mesh))
        assert {(int(a), int(b)) for a, _, b, _ in links} == pairs and len(links) == 2 * len(pairs)
        used = [end for a, ca, b, cb in links for end in ((a, ca), (b, cb))]
        assert len(used) == len(set(used))
    assert "device_topology { dims: [ 8, 4 ] }" in tt_mlir.mesh_graph([8, 4])


@pytest.mark.skipif(not tt_mlir.available(), reason="jax-tt-plugin (the tenstorrent extra) is not installed")
class TestTTMLIR:
    def test_forge_check_tt_mlir_keeps_the_dumps_beside_emit(self, tmp_path):
        emit = tmp_path / "cnn.py"
        done = _tool("forge-check", MODELS / "tiny_cnn_opset17.onnx", "--tt-mlir", "--emit", emit)
        assert done.returncode == MATCH, done.stdout + done.stderr
        assert "tt-mlir (jax-tt-plugin 0.1.3, mock Blackhole p150): compiled to TTNN" in done.stdout
        dumps = {p.name.split("_")[0] for p in (tmp_path / "cnn_tt_mlir").rglob("*.mlir")}
        assert {"ttir", "ttnn"} <= dumps

    def test_a_two_device_program_compiles_to_ttnn_all_reduces_on_two_mock_chips(self, tmp_path):
        from forge_opt.api import compile_onnx
        from forge_opt.execution.tt_mlir import compile_stablehlo
        from forge_opt.targets.stablehlo import stablehlo_text

        module = compile_onnx(str(ROOT / "lit_tests" / "targets" / "stablehlo_llama_mlp_block.onnxtxt"),
                              pipeline="onnx-to-forge{devices=2}")
        result = compile_stablehlo(stablehlo_text(module), tmp_path)
        assert result.compiled, result.line()
        assert "mock Blackhole p150 x2): compiled to TTNN" in result.line()
        ttnn = next(p for p in result.dumps if p.name.startswith("ttnn"))
        assert "ttnn.all_reduce" in ttnn.read_text() and "meshShape = 1x2" in ttnn.read_text()

    @pytest.mark.slow
    @pytest.mark.parametrize("mesh", ["2x2", "2x4", "8x4"])
    def test_a_decoder_on_a_mesh_compiles_to_ttnn_collectives_on_each_mesh_axis(self, mesh, tmp_path):
        """32 query and 8 KV heads: at 2x2 the KV heads go by rows, at 8x4
        (Galaxy) each row holds one; tt-mlir opens the program's mesh on
        that many mock chips and lowers each collective to one mesh axis."""
        from forge_opt.api import compile_onnx
        from forge_opt.execution.tt_mlir import compile_stablehlo
        from forge_opt.targets.stablehlo import stablehlo_text

        rows, cols = map(int, mesh.split("x"))
        module = compile_onnx(str(MODELS / "llm_llama_gqa32.onnx"), dims=DECODE,
                              pipeline=f"onnx-to-forge{{devices={rows * cols} mesh={mesh}}}")
        result = compile_stablehlo(stablehlo_text(module), tmp_path)
        assert result.compiled, result.line()
        assert f"mock Blackhole p150 {mesh} mesh): compiled to TTNN" in result.line()
        ttnn = next(p for p in result.dumps if p.name.startswith("ttnn")).read_text()
        assert f"mesh_shape {mesh}" in ttnn
        assert "cluster_axis = 0" in ttnn and "cluster_axis = 1" in ttnn  # a collective down a column, one on a row

    @pytest.mark.slow
    def test_galaxys_layout_compiles_to_ttnn_reduce_scatters_on_the_columns(self, tmp_path):
        """Galaxy's layout at 8x4: the MLP's reduce-scatters and all-gathers
        (`scatter-all-reduces`) lower to TTNN's, on cluster axis 1 (the 4
        columns), as llama3_70b_galaxy runs them."""
        from forge_opt.api import compile_onnx
        from forge_opt.execution.tt_mlir import compile_stablehlo
        from forge_opt.targets.stablehlo import stablehlo_text

        module = compile_onnx(str(MODELS / "llm_llama_gqa32.onnx"), dims=DECODE,
                              pipeline="onnx-to-forge{devices=32 mesh=8x4 mesh-layout=galaxy}")
        result = compile_stablehlo(stablehlo_text(module), tmp_path)
        assert result.compiled, result.line()
        ttnn = next(p for p in result.dumps if p.name.startswith("ttnn")).read_text()
        scatters = [line for line in ttnn.splitlines() if '"ttnn.reduce_scatter"' in line]
        assert len(scatters) == 4 and all("cluster_axis = 1 " in line for line in scatters)  # 2 a layer

    def test_the_tool_names_tt_mlirs_first_diagnostic(self, tmp_path):
        """tt-mlir 0.1.3 cannot lower a real FFT: exit 1 with its message."""
        program = tmp_path / "rfft.mlir"
        program.write_text(
            'module {\n  func.func @main(%x: tensor<4x64xf32>) -> tensor<4x33xcomplex<f32>> {\n'
            '    %y = "stablehlo.fft"(%x) <{fft_type = #stablehlo<fft_type RFFT>, fft_length = array<i64: 64>}> : '
            '(tensor<4x64xf32>) -> tensor<4x33xcomplex<f32>>\n    func.return %y : tensor<4x33xcomplex<f32>>\n  }\n}\n')
        done = subprocess.run([sys.executable, "-m", "forge_opt.tools.tt_mlir", str(program)], capture_output=True,
                              text=True)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "did not compile" in done.stdout and "complex<f32>" in done.stdout
        assert (tmp_path / "rfft_tt_mlir").is_dir()

    def test_the_program_file_is_replaced_not_written_through_a_link(self, tmp_path):
        from forge_opt.execution.tt_mlir import compile_stablehlo

        outside = tmp_path / "outside.txt"
        outside.write_text("keep")
        dumps = tmp_path / "dumps"
        dumps.mkdir()
        (dumps / "program.stablehlo.mlir").symlink_to(outside)
        compile_stablehlo("module {\n}\n", dumps)
        assert outside.read_text() == "keep"
        assert not (dumps / "program.stablehlo.mlir").is_symlink()

    def test_the_tool_refuses_a_missing_program(self, tmp_path):
        done = subprocess.run([sys.executable, "-m", "forge_opt.tools.tt_mlir", str(tmp_path / "none.mlir")],
                              capture_output=True, text=True)
        assert done.returncode == 2 and "none.mlir: No such file" in done.stderr


@pytest.mark.slow
def test_the_executors_table_is_current():
    """docs/executors.md: every model and example on the stand-in, on XLA
    and on 2 XLA devices, as the page says (its tt-mlir column is written by
    a full run of the generator)."""
    from forge_opt.tools import gen_executors

    done = subprocess.run([sys.executable, "-m", "forge_opt.tools.gen_executors", "--check", "--no-tt-mlir"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert gen_executors.PAGE.as_posix() == "docs/executors.md"
