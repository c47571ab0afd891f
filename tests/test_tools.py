"""forge-check and the Forge stand-in: exit codes, verdicts, and calls the
real Forge would reject."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from forge_opt.check import MATCH, MISMATCH, NOT_COMPILED, check_model
from forge_opt.dialects.forge_functions import BY_NAME as FORGE_FUNCTIONS
from forge_opt.interpreters.forge_standin import ForgeCallError, Index, Tensor, standin_modules

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "split.onnxtxt"

UNLOWERED = """<ir_version: 8, opset_import: ["" : 18]>
g (float[3, 3] x) => (float[3, 3] y) {
  [unpool1] y = MaxUnpool <kernel_shape = [1]> (x, x)
}
"""


def _kernel(function: str):
    """Forge's golden of a function, as a test that breaks it wraps it."""
    kernel = FORGE_FUNCTIONS[function].kernel
    assert kernel is not None
    return kernel


def _forge_check(*args):
    exe = Path(sys.executable).parent / "forge-check"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)


def test_forge_check_match_exits_0():
    proc = _forge_check(EXAMPLE)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("match")


def test_forge_check_unlowered_op_exits_2(tmp_path):
    model = tmp_path / "det.onnxtxt"
    model.write_text(UNLOWERED)
    proc = _forge_check(model)
    assert proc.returncode == 2
    assert "node 'unpool1' (onnx.MaxUnpool): cannot be lowered to Forge" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_forge_check_says_which_oracle_it_used(tmp_path):
    """An IR version newer than onnxruntime reads: ONNX's reference
    implementation computes the expected outputs, and the report says so."""
    model = tmp_path / "ir99.onnxtxt"
    relu = UNLOWERED.replace("MaxUnpool <kernel_shape = [1]> (x, x)", "Relu (x)")
    model.write_text(relu.replace("ir_version: 8", "ir_version: 99"))
    proc = _forge_check(model)
    assert proc.returncode == 0, proc.stderr
    assert "oracle: onnx.reference (onnxruntime cannot run the model: " in proc.stdout
    assert "Unsupported model IR version: 99" in proc.stdout


def test_forge_check_inputs_file(tmp_path):
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.savez(tmp_path / "in.npz", x=x)
    proc = _forge_check(EXAMPLE, "--inputs", tmp_path / "in.npz", "--rtol", "0", "--atol", "0")
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_broken_lowering_is_a_mismatch(monkeypatch):
    real = _kernel("Index")

    def off_by_one(x, dim, start, stop=None, stride=1):
        return real(np.roll(x, 1, axis=dim), dim, start, stop, stride)

    monkeypatch.setattr(FORGE_FUNCTIONS["Index"], "kernel", off_by_one)
    report = check_model(str(EXAMPLE))
    assert report.status == MISMATCH
    assert not all(o.ok for o in report.outputs)


def test_unlowered_op_does_not_compile():
    from forge_opt.frontends.onnx import parse_text

    report = check_model(parse_text(UNLOWERED))
    assert report.status == NOT_COMPILED
    assert "unpool1" in report.error


def test_example_matches():
    assert check_model(str(EXAMPLE)).status == MATCH


def test_standin_index_follows_forge():
    x = Tensor(np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(Index("i", x, dim=-1, start=2, stop=5).value(), [2, 3, 4])
    np.testing.assert_array_equal(Index("i", x, -1, 3).value(), [3])  # stop=None is start+1
    np.testing.assert_array_equal(Index("i", x, -1, 8, -1).value(), [8])  # negative stop adds the size
    with pytest.raises(ForgeCallError, match="start 10 must be < 10"):
        Index("i", x, dim=-1, start=10, stop=10)
    with pytest.raises(ForgeCallError, match="stop 11 must be <= 10"):
        Index("i", x, dim=-1, start=0, stop=11)
    with pytest.raises(ForgeCallError, match="name"):
        Index(x, x, dim=-1, start=0, stop=1)
    with pytest.raises(TypeError):
        Index("i", x, axis=-1, start=0, stop=1)  # Forge's keyword is dim


def test_standin_is_only_visible_while_running():
    assert "forge" not in sys.modules
    with standin_modules():
        import forge  # pyright: ignore[reportMissingImports]  (the stand-in, while it runs)

        assert forge.op.Index is Index
    assert "forge" not in sys.modules


def test_bisect_names_the_first_bad_node(monkeypatch, tmp_path):
    model = tmp_path / "chain.onnxtxt"
    model.write_text(
        """<ir_version: 8, opset_import: ["" : 18]>
chain (float[2, 8] x) => (float[2, 8] y) {
  [first] a = Relu (x)
  [second] b = Sigmoid (a)
  [third] y = Exp (b)
}
"""
    )
    assert check_model(str(model), bisect=True).status == MATCH
    real = _kernel("Sigmoid")
    monkeypatch.setattr(FORGE_FUNCTIONS["Sigmoid"], "kernel", lambda x: real(x) + 0.5)
    report = check_model(str(model), bisect=True)
    assert report.status == MISMATCH
    assert report.divergence is not None
    assert report.divergence.node == "second"
    assert report.divergence.op_type == "Sigmoid"
    assert "first divergence: node 'second' (Sigmoid), output 'b'" in report.format()


def test_dot_renders_with_graphviz(tmp_path):
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    exe = Path(sys.executable).parent / "forge-opt"
    text = subprocess.run(
        [str(exe), str(EXAMPLE), "-p", "onnx-to-forge", "-t", "dot"], capture_output=True, text=True, check=True
    ).stdout
    svg = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True, check=True).stdout
    assert "<svg" in svg and "forge.index" in svg


def test_bisect_finds_values_by_the_importers_naming_rule(monkeypatch):
    """PyTorch's names (`/m/Sigmoid_output_0`) are found, and two values one
    SSA name would carry (`b` and `b_1`) are not compared against each
    other's results: the blame goes to the node that is wrong."""
    from onnx import TensorProto, helper

    def chain(names):
        nodes = [helper.make_node(op, [a], [b], name=f"/m/{op}") for op, a, b in zip(("Relu", "Sigmoid", "Exp"),
                                                                                       ["x", *names], [*names, "y"])]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)

    real = _kernel("Sigmoid")
    monkeypatch.setattr(FORGE_FUNCTIONS["Sigmoid"], "kernel", lambda x: real(x) + 0.5)
    report = check_model(chain(["/m/Relu_output_0", "/m/Sigmoid_output_0"]), bisect=True)
    assert report.divergence is not None and report.divergence.node == "/m/Sigmoid"
    monkeypatch.setattr(FORGE_FUNCTIONS["Sigmoid"], "kernel", real)
    real_exp = _kernel("Exp")
    monkeypatch.setattr(FORGE_FUNCTIONS["Exp"], "kernel", lambda x: real_exp(x) * 2)
    report = check_model(chain(["b", "b_1"]), bisect=True)
    assert report.divergence is not None and report.divergence.node == "/m/Exp"


def test_one_naming_rule():
    from forge_opt.frontends.onnx.names import ambiguous, ssa_name

    assert ssa_name("hidden") == "hidden" and ssa_name("b_1") == "b"
    assert ssa_name("/model/layer.0/MatMul_output_0") == "model_layer_0_MatMul_output"
    assert ssa_name("123") is None and ssa_name("0_x") == "x"
    assert ambiguous(["b", "b_1", "c"]) == {"b"}
