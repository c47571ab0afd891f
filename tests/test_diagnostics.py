"""A corpus of bad inputs, each with the one-line diagnostic forge-opt must
give (non-zero exit, no traceback), and valid edge cases that must compile
and match onnxruntime."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, check_model
from forge_opt.tools.forge_opt import run

HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'

TEXT_CORPUS = {
    "split-sizes-do-not-sum": (
        "g (float[10] x) => (float[4] a, float[4] b) <int64[2] s = {4, 4}> { [sp] a, b = Split (x, s) }",
        "node 'sp' (onnx.Split): split sizes [4, 4] do not sum to dimension 0 of size 10",
    ),
    "split-count-does-not-divide": (
        "g (float[10] x) => (float[3] a, float[3] b, float[3] c) { [sp] a, b, c = Split (x) }",
        "node 'sp' (onnx.Split): dimension 0 of size 10 does not divide into 3 equal parts",
    ),
    "axis-out-of-range": (
        "g (float[4, 4] x) => (float[4, 4] y) { [sm] y = Softmax <axis = 5> (x) }",
        "node 'sm' (onnx.Softmax): axis 5 is out of range for rank 2",
    ),
    "dynamic-dimension": (
        "g (float[N, 4] x) => (float[N, 4] y) { [r] y = Relu (x) }",
        "the model's inputs have unknown sizes, which Forge cannot take: 'x' [N, 4]; choose them with --dim N=N",
    ),
    "string-tensors": (
        "g (string[2] x) => (string[2] y) { [id] y = StringNormalizer (x) }",
        "graph output 'y' holds strings, which Forge has no tensors for",
    ),
    "other-domain": (
        'g (float[4] x) => (float[4] y) { [fg] y = com.microsoft.FastGelu (x) }',
        "node 'fg' (onnx.Custom): FastGelu is an op of domain 'com.microsoft', which Forge cannot run",
    ),
    "other-domain-unknown-type": (
        # its result type is unknown, so the Reshape after it cannot compile: the op is named, not the Reshape
        'g (float[2, 4] x) => (float[8] y) <int64[1] s = {8}> { [fg] f = com.microsoft.FastGelu (x)\n'
        ' [rs] y = Reshape (f, s) }',
        "node 'fg' (onnx.Custom): FastGelu is an op of domain 'com.microsoft', which Forge cannot run",
    ),
    "unknown-op": (
        "g (float[4] x) => (float[4] y) { [f] y = Frobnicate (x) }",
        "node 'f' (Frobnicate): unknown op 'Frobnicate' in the default ONNX domain",
    ),
    "undefined-value": (
        "g (float[4] x) => (float[4] y) { [r] y = Relu (z) }",
        "node 'r' (Relu): input 'z' is not produced by any node, graph input or initializer",
    ),
    "non-constant-shape": (
        "g (float[2, 6] x, int64[2] s) => (float[3, 4] y) { [rs] y = Reshape (x, s) }",
        "node 'rs' (onnx.Reshape): the 'shape' input must be a compile-time constant",
    ),
}


def _forge_opt(path, capsys, *extra):
    code = run([str(path), "-p", "onnx-to-forge", "-t", "forge-python", *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(TEXT_CORPUS))
def test_text_corpus(name, tmp_path, capsys):
    body, message = TEXT_CORPUS[name]
    if "com.microsoft" in body:
        header = '<ir_version: 8, opset_import: ["" : 18, "com.microsoft" : 1]>\n'
    else:
        header = HEADER
    path = tmp_path / f"{name}.onnxtxt"
    path.write_text(header + body + "\n")
    code, err = _forge_opt(path, capsys)
    assert code != 0
    assert err.startswith("forge-opt: error: ") and message in err, err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "not an ONNX model"),
        (bytes(range(256)) * 4, "not a readable ONNX model"),
    ],
    ids=["empty-file", "random-bytes"],
)
def test_unreadable_files(content, message, tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    code, err = _forge_opt(path, capsys)
    assert code != 0 and message in err and "Traceback" not in err, err


def test_missing_files(tmp_path, capsys):
    code, err = _forge_opt(tmp_path / "absent.onnx", capsys)
    assert code == 1 and err == f"forge-opt: error: {tmp_path / 'absent.onnx'}: no such file\n"
    model = tmp_path / "m.onnxtxt"
    model.write_text(HEADER + "g (float[2] x) => (float[2] y) { [r] y = Relu (x) }\n")
    out = tmp_path / "absent" / "model.py"
    code, err = _forge_opt(model, capsys, "-o", str(out))
    assert code == 1 and err == f"forge-opt: error: {out}: the folder {out.parent} does not exist\n"


def test_complex_tensors(tmp_path, capsys):
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="id")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.COMPLEX64, [2])],
    )
    path = tmp_path / "complex.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString())
    code, err = _forge_opt(path, capsys)
    assert code != 0 and "element type COMPLEX64 is not supported" in err, err


def test_debug_flag_shows_the_traceback(tmp_path, capsys):
    path = tmp_path / "bad.onnx"
    path.write_bytes(b"")
    code, err = _forge_opt(path, capsys, "--debug")
    assert code != 0 and "Traceback" in err


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "edge", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


EDGE_CASES = {
    "empty-graph": _model([], [_vi("x", [3])], [_vi("x", [3])]),
    "zero-size-pieces": _model(
        [helper.make_node("Split", ["x", "s"], ["a", "b", "c"], axis=0)],
        [_vi("x", [5, 2])],
        [_vi("a", [0, 2]), _vi("b", [5, 2]), _vi("c", [0, 2])],
        [numpy_helper.from_array(np.asarray([0, 5, 0], np.int64), "s")],
    ),
    "negative-axes": _model(
        [helper.make_node("Softmax", ["x"], ["y"], axis=-2), helper.make_node("Concat", ["y", "x"], ["z"], axis=-1)],
        [_vi("x", [2, 3, 4])],
        [_vi("z", [2, 3, 8])],
    ),
}


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_valid_edge_cases_compile_and_match(name):
    report = check_model(EDGE_CASES[name], rtol=1e-6, atol=1e-6)
    assert report.status == MATCH, report.format() + report.error


def test_opset_too_old(tmp_path, capsys):
    path = tmp_path / "old.onnxtxt"
    path.write_text('<ir_version: 8, opset_import: ["" : 0]>\ng (float[2] x) => (float[2] y) { [r] y = Relu (x) }\n')
    code, err = _forge_opt(path, capsys)
    assert code != 0 and "opset 0 is not valid" in err and "Traceback" not in err, err


def test_huge_constant_is_never_materialised(tmp_path, capsys):
    """A 40 GB ConstantOfShape compiles at once: folding refuses it and it
    becomes torch.full at load time."""
    path = tmp_path / "huge.onnxtxt"
    path.write_text(
        HEADER
        + "g (float[100000, 100000] x) => (float[100000, 100000] y) <int64[2] s = {100000, 100000}> {"
        + " [fill] f = ConstantOfShape <value = float[1] {0.5}> (s) [add] y = Add (x, f) }\n"
    )
    out = tmp_path / "huge.py"
    code = run([str(path), "-p", "onnx-to-forge", "-t", "forge-python", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert 'torch.full((100000, 100000), 0.5, dtype=torch.float32)' in out.read_text()
