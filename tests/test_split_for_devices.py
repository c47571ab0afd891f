"""AutoSplit with tensor-parallel device sub-models (`forge-split --devices P`,
`forge-check --fallback --devices P`), simulated and under MPI."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_tensor_parallel import RNG, f32, needs_mpiexec

from forge_opt.diagnostics import ForgeOptError


def _model_with_a_cpu_op() -> onnx.ModelProto:
    """Two Linear pairs around an op of another domain, which Forge lacks
    and onnxruntime runs (com.microsoft FastGelu)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["a"], name="fc0"),
        helper.make_node("Relu", ["a"], ["b"], name="relu0"),
        helper.make_node("MatMul", ["b", "w1"], ["c"], name="fc1"),
        helper.make_node("FastGelu", ["c"], ["d"], name="fast_gelu", domain="com.microsoft"),
        helper.make_node("MatMul", ["d", "w2"], ["e"], name="fc2"),
        helper.make_node("Relu", ["e"], ["f"], name="relu1"),
        helper.make_node("MatMul", ["f", "w3"], ["y"], name="fc3"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [numpy_helper.from_array(f32(16, 32), "w0"), numpy_helper.from_array(f32(32, 16), "w1"),
         numpy_helper.from_array(f32(16, 32), "w2"), numpy_helper.from_array(f32(32, 16), "w3")],
        value_info=[helper.make_tensor_value_info("d", TensorProto.FLOAT, [4, 16])],  # as an exporter records it
    )
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_autosplit_with_tensor_parallel_device_sub_models(tmp_path):
    """The op Forge lacks runs in a CPU sub-model; each device sub-model is
    its own tensor-parallel plan, run by the one host runner."""
    from forge_opt.plan.folder import read_split
    from forge_opt.split.api import convert, run_split, split_model

    model = _model_with_a_cpu_op()
    _, plan = split_model(model, tmp_path / "split", devices=2)
    assert [g.device for g in plan.graphs] == ["tt", "cpu", "tt"] and plan.parallel == 2
    convert(tmp_path / "split")
    for g in read_split(tmp_path / "split")[1]:
        if g.device == "tt":
            assert g.context_dir is not None
            sub = read_split(g.context_dir / "parallel")[0]
            assert [c.op for c in sub.collectives] == ["all_reduce"]
            assert [layer.case for layer in sub.layers] == ["column", "row"]
    x = {"x": RNG.standard_normal((4, 16)).astype(np.float32)}
    from forge_opt.execution.oracle import onnxruntime_outputs

    got = run_split(tmp_path / "split", x)["y"]
    np.testing.assert_allclose(got, onnxruntime_outputs(model, None, x)[0], rtol=1e-4, atol=1e-4)


def test_forge_check_devices_with_fallback(tmp_path, capsys):
    from forge_opt.tools.forge_check import main as forge_check

    path = tmp_path / "m.onnx"
    onnx.save(_model_with_a_cpu_op(), str(path))
    with pytest.raises(SystemExit) as done:
        forge_check([str(path), "--devices", "2", "--fallback"])
    assert done.value.code == 0
    out = capsys.readouterr()
    assert "split into 3 sub-models (tt, cpu, tt); each device sub-model tensor-parallel on 2 devices" in out.err
    assert out.out.strip().endswith("match")
    needs_mpiexec()
    with pytest.raises(SystemExit) as done:
        forge_check([str(path), "--devices", "2", "--fallback", "--mpi"])
    assert done.value.code == 0
    out = capsys.readouterr()
    assert "each device sub-model tensor-parallel on 2 devices (MPI, --timeout 600 s)" in out.err
    assert out.out.strip().endswith("match")



def test_a_split_for_several_devices_under_mpi(tmp_path, capsys):
    """`forge-split run --mpi`: one process per device walks the split; the
    CPU sub-model runs once, on process 0, and every process returns the
    same outputs, those of the simulated run. The user's folder gains no file."""
    from forge_opt.split.api import convert, run_split, split_model
    from forge_opt.split.mpi import run_split_mpi
    from forge_opt.tools.forge_split import main as forge_split

    needs_mpiexec()
    model = _model_with_a_cpu_op()
    folder = tmp_path / "split"
    split_model(model, folder, devices=2)
    convert(folder)
    files = sorted(folder.rglob("*"))
    x = {"x": RNG.standard_normal((4, 16)).astype(np.float32)}
    np.testing.assert_array_equal(run_split_mpi(folder, x)["y"], run_split(folder, x)["y"])
    assert sorted(folder.rglob("*")) == files
    onnx.save(model, str(tmp_path / "m.onnx"))
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(folder), "--mpi", "--check", "--model", str(tmp_path / "m.onnx")])
    assert done.value.code == 0 and capsys.readouterr().out.strip().endswith("match")


def test_a_fault_in_a_split_under_mpi_ends_every_process(tmp_path):
    """A device sub-model's module that raises on device 1 ends the job,
    device 0 waiting in its collective included, and names the device."""
    import time

    from forge_opt.split.api import convert, split_model
    from forge_opt.split.mpi import run_split_mpi

    needs_mpiexec()
    folder = tmp_path / "split"
    split_model(_model_with_a_cpu_op(), folder, devices=2)
    convert(folder)
    module = next(folder.rglob("parallel/dev1/segment_0.py"))
    head = "    def forward(self, x):\n"
    assert head in module.read_text()
    module.write_text(module.read_text().replace(head, f"{head}        raise RuntimeError('injected')\n"))
    start = time.monotonic()
    with pytest.raises(ForgeOptError, match=r"(?s)the MPI run failed.*tp_run \(device 1\): error: .*injected"):
        run_split_mpi(folder, {"x": RNG.standard_normal((4, 16)).astype(np.float32)})
    assert time.monotonic() - start < 10


def test_a_split_for_one_device_has_nothing_for_mpi(tmp_path, capsys):
    """`forge-split run --mpi` on a split for one device, or with a CPU
    mode: a one-line error and exit 2, as a user sees it."""
    from forge_opt.split.api import split_model
    from forge_opt.tools.forge_split import main as forge_split

    split_model(_model_with_a_cpu_op(), tmp_path / "split")
    for extra, message in (([], "a split for one device has nothing to run under MPI"),
                           (["--mode", "cpu"], "--mpi runs the converted modules on the devices")):
        with pytest.raises(SystemExit) as done:
            forge_split(["run", str(tmp_path / "split"), "--mpi", *extra])
        assert done.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err


def test_mpi_processes_that_disagree_are_a_mismatch(monkeypatch):
    """forge-check --devices 2 --fallback --mpi: when one process returns
    other outputs than another, the verdict is a mismatch naming them."""
    from forge_opt.check import split as check
    from forge_opt.check.report import MISMATCH
    from forge_opt.split.runner import run_split

    def two_processes(folder, feeds, devices, timeout):
        outputs = run_split(folder, feeds)
        return [outputs, {name: value + 1 for name, value in outputs.items()}]

    monkeypatch.setattr(check, "run_mpi", two_processes)
    report = check.check_fallback(_model_with_a_cpu_op(), devices=2, mpi=True)
    assert report.status == MISMATCH
    assert "the MPI processes' outputs differ (y)" in report.error


def test_a_split_for_several_devices_not_converted_asks_for_convert(tmp_path):
    from forge_opt.split.api import run_split, split_model

    split_model(_model_with_a_cpu_op(), tmp_path / "split", devices=2)
    with pytest.raises(ForgeOptError, match=r"not converted for 2 devices.*run forge-split convert"):
        run_split(tmp_path / "split", {"x": np.zeros((4, 16), np.float32)})


def test_forge_split_devices(tmp_path, capsys):
    from forge_opt.tools.forge_split import main as forge_split

    path = tmp_path / "m.onnx"
    onnx.save(_model_with_a_cpu_op(), str(path))
    folder = tmp_path / "split"

    def run(*argv) -> int:
        with pytest.raises(SystemExit) as done:
            forge_split([str(a) for a in argv])
        return done.value.code  # pyright: ignore[reportReturnType]

    assert run(path, "-o", folder, "--devices", "2", "--convert") == 0
    out = capsys.readouterr().out
    assert "each device sub-model is converted tensor-parallel for 2 devices" in out
    assert "graph_ir_0/parallel/graph_infos.json" in out
    assert run("run", folder, "--check", "--model", path) == 0
    assert capsys.readouterr().out.strip().endswith("match")
