"""Mutated models never crash forge-opt: each either compiles or gets a
one-line diagnostic (no Python exception type leaking out, no traceback)."""

import random

import pytest

from forge_opt.tools.forge_opt import run

SEED_MODELS = [
    "examples/split.onnxtxt",
    "tests/data/models/tiny_cnn_opset17.onnx",
    "tests/data/models/gpt2_opset17.onnx",
]

# Messages that mean forge-opt itself failed rather than judged the input.
_INTERNAL = (
    "TypeError", "KeyError", "AttributeError", "IndexError", "AssertionError", "NameError", "ZeroDivisionError",
    "RecursionError",
)


def _mutate(source: bytes, rng: random.Random) -> bytes:
    data = bytearray(source)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        pos = rng.randrange(len(data))
        if kind < 0.5:
            data[pos] = rng.randrange(256)
        elif kind < 0.75:
            del data[pos : pos + rng.randint(1, 8)]
        else:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(data)


def _binary_seed(path, tmp_path):
    from forge_opt.frontends.onnx import load_model

    model, _ = load_model(path)
    return model.SerializeToString()


@pytest.mark.parametrize("seed_model", SEED_MODELS)
def test_mutated_models_get_diagnostics(seed_model, tmp_path, capsys):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    original = _binary_seed(root / seed_model, tmp_path)
    rng = random.Random(1234)
    path, out = tmp_path / "m.onnx", tmp_path / "m.py"
    outcomes = {"compiled": 0, "diagnosed": 0}
    for _ in range(100):
        path.write_bytes(_mutate(original, rng))
        code = run([str(path), "-p", "onnx-to-forge", "-t", "forge-python", "-o", str(out)])
        err = capsys.readouterr().err
        if code == 0:
            outcomes["compiled"] += 1
            continue
        assert err.startswith("forge-opt: error:"), err
        assert "Traceback" not in err
        assert not any(f"error: {name}" in err for name in _INTERNAL), err
        outcomes["diagnosed"] += 1
    assert outcomes["diagnosed"] > 0
