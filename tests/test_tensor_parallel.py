"""Tensor parallelism (`tensor-parallel`, `tp-partition`, the per-device
plan and its runner): each of Paddle's three cases alone, the Megatron
pairing on the GPT-2 and BERT exports, the MPI run, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.api import tensor_parallel
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import run_parallel
from forge_opt.targets.devices.program import ring_bytes
from forge_opt.tools import forge_opt as forge_opt_tool

MODELS = Path(__file__).parent / "data" / "models"
RNG = np.random.default_rng(0)


def f32(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def embedding_model(rows: int, width: int = 8, count: int = 12) -> onnx.ModelProto:
    return make_model(
        [helper.make_node("Gather", ["table", "idx"], ["y"], name="embed")],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [count])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [count, width])],
        [numpy_helper.from_array(f32(rows, width), "table")],
    )


def linear_model(layers: int = 1, width: int = 16) -> onnx.ModelProto:
    """`layers` Linear+bias layers with a Relu between."""
    nodes, inits, x = [], [], "x"
    for n in range(layers):
        nodes += [
            helper.make_node("MatMul", [x, f"w{n}"], [f"m{n}"], name=f"fc{n}"),
            helper.make_node("Add", [f"m{n}", f"b{n}"], [f"a{n}"], name=f"bias{n}"),
        ]
        inits += [numpy_helper.from_array(f32(width, width), f"w{n}"), numpy_helper.from_array(f32(width), f"b{n}")]
        x = f"a{n}"
        if n < layers - 1:
            nodes.append(helper.make_node("Relu", [x], [f"r{n}"], name=f"relu{n}"))
            x = f"r{n}"
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, width])],
        inits,
    )


def _plan(tmp_path: Path, layers: dict) -> str:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"layers": layers}))
    return str(path)


def _ops(plan) -> list[str]:
    return [c.op for c in plan.collectives]


def _exact(report, tol: float = 1e-5) -> None:
    assert report.status == MATCH, report.format()
    assert all(o.max_abs_error <= tol for o in report.outputs), report.format()


@pytest.mark.parametrize("devices", [2, 4])
def test_vocab_parallel_embedding_at_every_boundary(devices):
    rows = 8
    n = rows // devices
    idx = np.array([0, n - 1, n, rows - 1, -1, -rows, 1, n + 1, rows - 2, 0, n, rows - 1], np.int64)
    report = check_parallel(embedding_model(rows), devices, {"idx": idx})
    _exact(report)
    assert "all_reduce" in report.summary and "all_gather" not in report.summary


def test_vocab_parallel_pads_a_vocabulary_the_devices_do_not_divide(tmp_path):
    """10 rows on 4 devices: padded to 12 (zero rows no index reaches), each
    device's table 3 rows (an index outside them is masked, not read)."""
    model = embedding_model(10)
    plan = tensor_parallel(model, tmp_path / "tp", 4)
    assert plan.layers[0].padded_rows == 2
    idx = np.array([0, 2, 3, 5, 6, 8, 9, -1, -10, 4, 7, 1], np.int64)
    got = run_parallel(tmp_path / "tp", {"idx": idx})
    table = numpy_helper.to_array(model.graph.initializer[0])
    for outputs in got:
        np.testing.assert_allclose(outputs["y"], table[idx], atol=1e-6)
    weights = onnx.load(str(tmp_path / "tp" / "dev3" / "weights.onnx"))
    (block,) = [numpy_helper.to_array(t) for t in weights.graph.initializer if t.name == "table.shard"]
    assert block.shape == (3, 8)  # rows 9, 10 (padding) and 11 (padding)
    np.testing.assert_array_equal(block[0], table[9])
    assert not block[1:].any()


@pytest.mark.parametrize("devices", [2, 4])
def test_column_parallel_linear_gathers_its_output(devices):
    report = check_parallel(linear_model(1), devices)
    _exact(report)
    assert "all_gather" in report.summary and "all_reduce" not in report.summary


@pytest.mark.parametrize("devices", [2, 4])
def test_row_parallel_linear_splits_its_input_and_adds_the_bias_once(devices, tmp_path):
    plan = _plan(tmp_path, {"fc0": {"axis": 0}})
    written = tensor_parallel(linear_model(1), tmp_path / "tp", devices, plan=plan)
    assert written.layers[0].case == "row"
    assert _ops(written) == ["all_reduce"]  # and the bias after it
    _exact(check_parallel(linear_model(1), devices, plan=plan))


@pytest.mark.parametrize("devices", [2, 4])
def test_column_then_row_needs_one_all_reduce_and_no_gather(devices, tmp_path):
    plan = tensor_parallel(linear_model(2), tmp_path / "tp", devices)
    assert [layer.case for layer in plan.layers] == ["column", "row"]
    assert _ops(plan) == ["all_reduce"]
    _exact(check_parallel(linear_model(2), devices))


def test_gather_out_gathers_at_the_column_layer(tmp_path):
    plan = _plan(tmp_path, {"fc0": {"axis": 1, "gather_out": True}, "fc1": {"axis": None}})
    written = tensor_parallel(linear_model(2), tmp_path / "tp", 2, plan=plan)
    assert [layer.case for layer in written.layers] == ["column", "replicated"]
    assert _ops(written) == ["all_gather"]
    _exact(check_parallel(linear_model(2), 2, plan=plan))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_opset17", "bert_opset17"])
@pytest.mark.parametrize("devices", [2, 4])
def test_transformer_exports_pair_their_layers(name, devices, tmp_path):
    model = MODELS / f"{name}.onnx"
    plan = tensor_parallel(model, tmp_path / "tp", devices)
    blocks = 2
    ops = _ops(plan)
    # one all-reduce for the embedding, one per attention and one per MLP
    assert ops.count("all_reduce") == 1 + 2 * blocks
    # the only all-gather is GPT-2's LM head output, never between paired layers
    assert ops.count("all_gather") == (1 if name.startswith("gpt2") else 0)
    assert ops[-1] == "all_gather" or "all_gather" not in ops
    cases = [layer.case for layer in plan.layers]
    assert cases.count("row") == 2 * blocks
    report = check_parallel(model, devices)
    assert report.status == MATCH, report.format()
    assert min(o.pcc for o in report.outputs) >= 0.9999


@pytest.mark.slow
def test_gpt2_fused_qkv_is_packed_and_each_device_holds_one_block_of_each_weight(tmp_path):
    model = onnx.load(str(MODELS / "gpt2_opset17.onnx"))
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    devices = 4
    plan = tensor_parallel(MODELS / "gpt2_opset17.onnx", tmp_path / "tp", devices)
    assert [layer.packed for layer in plan.layers if "c_attn" in layer.node] == [3, 3]
    blocks: dict[str, int] = {}
    for rank in range(devices):
        weights = onnx.load(str(tmp_path / "tp" / f"dev{rank}" / "weights.onnx"))
        for t in weights.graph.initializer:
            if t.name.endswith(".shard"):
                blocks[t.name] = blocks.get(t.name, 0) + numpy_helper.to_array(t).nbytes
    sharded = {name.removesuffix(".shard"): size for name, size in blocks.items()}
    layer_weights = [n for n in sharded if n in original and original[n].ndim == 2]
    assert len(layer_weights) >= 8  # wte and each block's c_attn, c_proj, c_fc, c_proj
    for name in layer_weights:
        assert sharded[name] == original[name].nbytes, name  # P blocks of 1/P each


def test_ring_formula_in_the_plan(tmp_path):
    import jsonschema

    plan = tensor_parallel(linear_model(2), tmp_path / "tp", 4)
    schema = json.loads((Path(__file__).resolve().parent.parent / "docs" / "graph_infos.schema.json").read_text())
    # a tensor-parallel plan is one the project's own schema accepts
    jsonschema.validate(json.loads((tmp_path / "tp" / "graph_infos.json").read_text()), schema)
    (step,) = plan.collectives
    assert step.bytes == 4 * 16 * 4  # the [4, 16] float32 sum
    assert step.ring_bytes_per_device == 2 * step.bytes * 3 // 4
    assert ring_bytes("all_gather", 8192, 4) == 6144


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_opset17", "bert_opset17"])
def test_mpi_run_matches_the_simulation_bit_for_bit(name, tmp_path):
    if shutil.which("mpiexec") is None and not (Path(sys.executable).parent / "mpiexec").exists():
        pytest.skip("mpiexec not installed (the distributed extra)")
    folder = tmp_path / "tp"
    tensor_parallel(MODELS / f"{name}.onnx", folder, 2)
    ids = np.random.default_rng(1).integers(0, 128, (1, 16)).astype(np.int64)
    simulated = run_parallel(folder, {"input_ids": ids})
    over_mpi = run_mpi(folder, {"input_ids": ids}, 2)
    for sim, real in zip(simulated, over_mpi):
        assert sim.keys() == real.keys()
        for name in sim:
            np.testing.assert_array_equal(sim[name], real[name])


def test_a_dimension_the_devices_do_not_divide_stays_replicated_and_says_so():
    """Issue 39: a Linear whose columns or rows the devices do not divide (a
    3-class head at P=2, a 64-wide projection at P=3) was an error; it stays
    replicated with its reason, and --require-sharded makes that an error."""
    report = check_parallel(MODELS / "bert_opset17.onnx", 3)
    assert report.status == MATCH, report.format()
    assert ("warning: /model/encoder/layer.1/attention/output/dense/MatMul stays replicated on every device: its "
            "output columns (64) do not divide by 3 devices") in report.summary
    strict = check_parallel(MODELS / "bert_opset17.onnx", 3, require_sharded=True)
    assert strict.status == 2 and "output columns (64) do not divide by 3 devices" in strict.error


def test_a_pinned_case_the_devices_do_not_divide_is_an_error(tmp_path):
    pins = _plan(tmp_path, {"/model/encoder/layer.0/attention/output/dense/MatMul": {"axis": 1}})
    report = check_parallel(MODELS / "bert_opset17.onnx", 3, plan=pins)
    assert report.status == 2
    assert "a column-parallel Linear needs its output columns (64) to divide by the 3 devices" in report.error


def test_a_fused_projection_whose_heads_the_devices_do_not_divide_stays_replicated():
    """GPT-2's c_attn at P=8: 4 heads in each of Q, K and V. It stays whole
    on every device (it was an error naming the head reshape), with its
    reason; --require-sharded makes that an error."""
    report = check_parallel(MODELS / "gpt2_opset17.onnx", 8)
    assert report.status == MATCH, report.format()
    assert "c_attn/Gemm stays replicated on every device: the heads of each of its 3 parts do not divide by 8 " \
        "devices" in report.summary
    strict = check_parallel(MODELS / "gpt2_opset17.onnx", 8, require_sharded=True)
    assert strict.status == 2 and "the heads of each of its 3 parts do not divide by 8 devices" in strict.error


def test_plan_errors_name_the_node(tmp_path):
    missing = _plan(tmp_path, {"nope": {"axis": 1}})
    with pytest.raises(ForgeOptError, match="the node 'nope', which the model does not have"):
        tensor_parallel(linear_model(1), tmp_path / "a", 2, plan=missing)
    not_a_layer = _plan(tmp_path, {"relu0": {"axis": 1}})
    with pytest.raises(ForgeOptError, match=r"relu0.*neither a Linear"):
        tensor_parallel(linear_model(2), tmp_path / "b", 2, plan=not_a_layer)
    wrong_case = _plan(tmp_path, {"embed": {"axis": 1}})
    with pytest.raises(ForgeOptError, match="axis 1 on the Embedding"):
        tensor_parallel(embedding_model(8), tmp_path / "c", 2, plan=wrong_case)
    bad = _plan(tmp_path, {"fc0": {"axis": 2}})
    with pytest.raises(ForgeOptError, match="'axis' must be 0, 1 or null"):
        tensor_parallel(linear_model(1), tmp_path / "d", 2, plan=bad)


def test_forge_opt_writes_the_plan_folder_and_keeps_other_files(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(linear_model(2), str(model))
    out = tmp_path / "out"
    args = [str(model), "-p", "onnx-to-forge{devices=2}", "-t", "forge-python", "-o", f"{out}/"]
    assert forge_opt_tool.run(args) == 0
    assert (out / "graph_infos.json").is_file() and (out / "dev1" / "segment_0.py").is_file()
    assert "all_reduce" in capsys.readouterr().out
    assert forge_opt_tool.run(args) == 0  # over its own plan
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert forge_opt_tool.run([*args[:-1], f"{other}/"]) == 1
    assert "holds no plan of ours" in capsys.readouterr().err
    assert (other / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("devices", [2, 4])
def test_both_stages_run_on_the_interpreters(devices):
    """The annotated program computes what the original does (`shard.shard`
    is the identity; the tied LM head, read as the table's rows, sums its
    products in another order); the per-device program, on P simulated
    devices, gives every device that value."""
    from forge_opt.frontends.onnx import import_model, load_model
    from forge_opt.interpreters.run import run_devices, run_module
    from forge_opt.transforms.pipelines import run_pipeline

    model, base = load_model(MODELS / "gpt2_opset17.onnx")
    module = import_model(model, base)
    run_pipeline(module, "onnx-to-tir")
    ids = np.random.default_rng(2).integers(0, 128, (1, 16)).astype(np.int64)
    (want,) = run_module(module, [ids])
    run_pipeline(module, f"tensor-parallel{{devices={devices}}}")
    (annotated,) = run_module(module, [ids])
    np.testing.assert_allclose(annotated, want, rtol=1e-6, atol=1e-7)
    run_pipeline(module, "tp-partition")
    for (got,) in run_devices(module, [ids], devices):
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_forge_split_run_runs_a_tensor_parallel_plan(tmp_path, capsys):
    from forge_opt.tools.forge_split import main as forge_split

    model = tmp_path / "m.onnx"
    onnx.save(linear_model(2), str(model))
    tensor_parallel(model, tmp_path / "tp", 2)
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(tmp_path / "tp"), "--check", "--model", str(model)])
    assert done.value.code == 0
    assert "match" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        forge_split(["run", str(tmp_path / "tp"), "--mode", "cpu"])
    assert done.value.code == 2
    assert "no CPU mode" in capsys.readouterr().err


def test_forge_check_device_flags_as_a_user_gives_them(tmp_path, capsys):
    from forge_opt.tools.forge_check import main as forge_check

    model = tmp_path / "m.onnx"
    onnx.save(linear_model(2), str(model))
    with pytest.raises(SystemExit) as done:
        forge_check([str(model), "--devices", "2"])
    assert done.value.code == 0
    out = capsys.readouterr()
    assert "match" in out.out and "all_reduce" in out.err
    with pytest.raises(SystemExit) as done:
        forge_check([str(model), "--mpi"])
    assert done.value.code == 2
    assert "--mpi does not combine with a check on one device (--devices P checks several)" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        forge_check([str(model), "--devices", "2", "--bisect"])
    assert done.value.code == 2
    assert "--bisect does not combine with --devices 2" in capsys.readouterr().err


def test_tp_run_names_a_bad_inputs_file(tmp_path):

    tensor_parallel(linear_model(1), tmp_path / "tp", 2)
    done = subprocess.run(
        [sys.executable, "-m", "forge_opt.tools.tp_run", str(tmp_path / "tp"), "--inputs", str(tmp_path / "none.npz")],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode != 0
    assert "none.npz" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "fault, message",
    [
        ("raise", "tp_run (device 1): error: RuntimeError: injected on device 1"),
        ("kill", "device 1 (process"),  # a rank killed by a signal: MPI ends the job; named by its process id
        ("weights", "tp_run (device 1): error:"),  # a corrupt weights file
        # audit 12 and 27: a module that exits, cleanly or at once, ends the job too, named
        ("exit", "tp_run (device 1): error: the run called sys.exit(0) before it completed"),
        ("_exit", "tp_run (device 1): error: the run called os._exit(0) before it completed"),
    ],
)
def test_a_fault_on_one_device_ends_the_mpi_run_quickly(tmp_path, fault, message):
    """Device 1 fails after device 0 has entered its all-reduce: every rank
    stops within seconds (MPI_Abort), the device is named, exit non-zero."""
    import time

    needs_mpiexec()
    folder = tmp_path / "tp"
    tensor_parallel(linear_model(2), folder, 2)
    module = folder / "dev1" / "segment_0.py"
    if fault == "weights":
        (folder / "dev1" / "weights.bin").write_bytes(b"\0" * 8)
    else:
        inject = {"raise": "raise RuntimeError('injected on device 1')",
                  "kill": "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
                  "exit": "import sys; sys.exit(0)", "_exit": "import os; os._exit(0)"}[fault]
        head = "    def forward(self, x):\n"
        source = module.read_text().replace(head, f"{head}        {inject}\n")
        module.write_text(source)
    x = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    start = time.monotonic()
    with pytest.raises(ForgeOptError, match="the MPI run failed") as failed:
        run_mpi(folder, x, 2)
    assert time.monotonic() - start < 10
    assert message in str(failed.value)


def _inject(folder: Path, code: str) -> None:
    module = folder / "dev1" / "segment_0.py"
    head = "    def forward(self, x):\n"
    module.write_text(module.read_text().replace(head, f"{head}        {code}\n"))


def test_a_device_that_keeps_the_others_waiting_ends_the_run_within_its_timeout(tmp_path):
    """Audit H1: device 1 sleeping before the all-reduce device 0 waits in
    kept the job 600 s and named nothing."""
    import time

    needs_mpiexec()
    folder = tmp_path / "tp"
    tensor_parallel(linear_model(2), folder, 2)
    _inject(folder, "import time; time.sleep(300)")
    x = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}
    start = time.monotonic()
    with pytest.raises(ForgeOptError, match="device 1 did not reach collective 1 within --timeout 3 s, where device "
                                            "0 waited"):
        run_mpi(folder, x, 2, timeout=3)
    assert time.monotonic() - start < 3 + 10


def test_tp_run_under_plain_mpiexec_fails_when_a_device_exits_early(tmp_path):
    """Audit M1 (earlier F27): os._exit(0) in one rank gave exit 0 and no word."""
    needs_mpiexec()
    folder = tmp_path / "tp"
    tensor_parallel(linear_model(2), folder, 2)
    _inject(folder, "import os; os._exit(0)")
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    assert mpiexec is not None
    done = subprocess.run([mpiexec, "-n", "2", sys.executable, "-m", "forge_opt.tools.tp_run", str(folder),
                           "--inputs", str(tmp_path / "x.npz")], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "tp_run (device 1): error: the run called os._exit(0)" in done.stderr


def _gemm_model(trans_a: int, trans_b: int, alpha: float, beta: float) -> onnx.ModelProto:
    """Two Gemm layers with a Relu between, as PyTorch's nn.Linear on 2-d
    input exports them (transB=1), or with the other attributes set."""
    nodes = [
        helper.make_node("Gemm", ["x", "w0", "b0"], ["h"], name="fc0", transA=trans_a, transB=trans_b,
                         alpha=alpha, beta=beta),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("Gemm", ["r", "w1", "b1"], ["y"], name="fc1", transB=trans_b, alpha=alpha, beta=beta),
    ]
    return make_model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 4] if trans_a else [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
        [numpy_helper.from_array(f32(16, 16), "w0"), numpy_helper.from_array(f32(16), "b0"),
         numpy_helper.from_array(f32(16, 16), "w1"), numpy_helper.from_array(f32(16), "b1")],
    )


@pytest.mark.parametrize("trans_a, trans_b, alpha, beta", [(0, 1, 1.0, 1.0), (0, 1, 0.5, 2.0), (1, 0, 1.0, 1.0),
                                                           (1, 1, 0.5, 0.0)])
def test_every_gemm_is_a_linear(trans_a, trans_b, alpha, beta):
    report = check_parallel(_gemm_model(trans_a, trans_b, alpha, beta), 2)
    assert report.status == MATCH, report.error
    assert "layers: 1 column, 1 row" in report.summary and "1 collective " in report.summary


def needs_mpiexec() -> None:
    if shutil.which("mpiexec", path=str(Path(sys.executable).parent)) is None and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed (pip install '.[distributed]')")


def test_a_collective_of_a_weights_blocks_is_computed_when_compiled(tmp_path):
    """A weight split by the plan but read whole (a softmax across it): the
    partition gathers its blocks, which no device computes; the writer
    computes the gather itself (a parameter of each device) instead of
    failing on a collective of constants (it raised a KeyError)."""
    from xdsl.parser import Parser

    from forge_opt.split.runner import assemble
    from forge_opt.targets.devices import write_parallel
    from forge_opt.transforms.pipelines import lowering_passes, run_passes
    from forge_opt.transforms.tp.partition import TPPartitionPass
    from forge_opt.universe import make_context

    text = """
shard.grid @tp(shape = 2)
func.func @g(%x: tensor<4x8xf32> {onnx.name = "x"}) -> (tensor<4x8xf32> {onnx.name = "y"}) {
  %w = tir.constant {value = dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]]> : tensor<1x8xf32>,
                     weight_name = "w"} : tensor<1x8xf32>
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %cols : tensor<1x8xf32>
  %p = tir.softmax %ws {axis = 1 : i64} : tensor<1x8xf32> -> tensor<1x8xf32>
  %y = tir.binary add %x, %p : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""
    module = Parser(make_context(), text).parse_module()
    TPPartitionPass().apply(make_context(), module)
    assert "shard.all_gather" in str(module)
    with pytest.raises(ForgeOptError, match=r"'tir.constant': forge-python writes a program of Forge calls"):
        write_parallel(module, tmp_path / "tp")
    run_passes(lowering_passes(), make_context(), module)
    plan = write_parallel(module, tmp_path / "tp")
    assert not plan.collectives
    x = RNG.standard_normal((4, 8)).astype(np.float32)
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", {"x": x}))
    w = np.arange(1, 9, dtype=np.float32)[None]
    softmax = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
    assert not differ
    np.testing.assert_allclose(got["y"], x + softmax, rtol=1e-6)


def test_a_linear_whose_output_is_reshaped_to_a_scalar_splits():
    """Issue 52: an audio quality net's score, a MatMul to [1, 1] reshaped to
    a scalar, was an IndexError in fused_parts (the last dim of a rank-0
    shape)."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="fc1"), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["s"], name="score"),
             helper.make_node("Reshape", ["s", "shape"], ["y"], name="to_scalar")]
    model = make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                       [numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "w1"),
                        numpy_helper.from_array(rng.standard_normal((128, 1)).astype(np.float32), "w2"),
                        numpy_helper.from_array(np.array([], np.int64), "shape")])
    report = check_parallel(model, devices=2)
    assert report.status == MATCH, report.error or report.format()


@pytest.mark.parametrize("tool, args, says", [
    ("forge-check", ["--timeout", "5"], "--timeout bounds how long MPI processes wait for each other: it goes with "
                                        "--mpi"),
    ("forge-check", ["--devices", "2", "--mpi", "--timeout", "0"], "--timeout 0.0: give a number of seconds above 0"),
    ("forge-split", ["--timeout", "5"], "--timeout bounds how long MPI processes wait for each other: it goes with "
                                        "--mpi"),
])
def test_timeout_is_a_flag_of_mpi_runs(tmp_path, tool, args, says, capsys):
    """`--timeout S` as a user gives it: with --mpi, above 0."""
    from forge_opt.tools.forge_check import main as forge_check
    from forge_opt.tools.forge_split import main as forge_split

    model = tmp_path / "m.onnx"
    onnx.save(linear_model(2), str(model))
    if tool == "forge-split":
        tensor_parallel(model, tmp_path / "tp", 2)
        np.savez(tmp_path / "x.npz", x=np.zeros((4, 16), np.float32))
        argv = ["run", str(tmp_path / "tp"), "--inputs", str(tmp_path / "x.npz"), *args]
    else:
        if "--mpi" in args:
            needs_mpiexec()
        argv = [str(model), *args]
    with pytest.raises(SystemExit) as done:
        (forge_split if tool == "forge-split" else forge_check)(argv)
    assert done.value.code == 2
    assert says in capsys.readouterr().err
