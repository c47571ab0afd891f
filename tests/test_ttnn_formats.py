"""`device_values` against ttnn 0.81.1, the real library: its round trips of
edge cases (denormals, NaN payloads, inf, ties, exponent extremes, zero
blocks, shapes no multiple of a tile) as `tests/data/ttnn/make_fixture.py`
wrote them, bit for bit; and ttnn itself where it imports (it has wheels for
Python 3.10 and 3.12 only)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from forge_opt import device_values
from forge_opt.data_formats import FormatName

FIXTURE = Path(__file__).parent / "data" / "ttnn" / "fixture.npz"
FORMATS = ("bfloat16", "bfp8_b", "bfp4_b")


def _cases() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


CASES = _cases()
NAMES = sorted(k.split("/", 1)[1] for k in CASES if k.startswith("input/"))


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, np.float32).view(np.uint32)


def test_the_fixture_is_of_ttnn_0_81_1_and_covers_the_edge_cases():
    assert str(CASES["ttnn_version"]) == "0.81.1"
    inputs = np.concatenate([CASES[f"input/{n}"].ravel() for n in NAMES])
    exponent, mantissa = (inputs >> 23) & 0xFF, inputs & 0x7FFFFF
    assert ((exponent == 0) & (mantissa != 0)).any(), "denormals"
    assert ((exponent == 255) & (mantissa != 0)).any() and ((exponent == 255) & (mantissa == 0)).any(), "NaN, inf"
    assert any(CASES[f"input/{n}"].shape[-1] % 32 for n in NAMES), "a shape no multiple of a tile"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", NAMES)
def test_device_values_equal_ttnn_bit_for_bit(fmt, name):
    x = CASES[f"input/{name}"].view(np.float32)
    want = CASES[f"{fmt}/{name}"]
    got = _bits(device_values(x, fmt))
    assert got.shape == want.shape
    differ = np.argwhere(got != want)
    assert not differ.size, [(tuple(int(i) for i in at), hex(x.view(np.uint32)[tuple(at)]), hex(got[tuple(at)]),
                              hex(want[tuple(at)])) for at in differ[:5]]


def test_device_values_refuses_a_format_the_device_does_not_pack():
    with pytest.raises(Exception, match="device_values: format float32 is not one of"):
        device_values(np.zeros(4, np.float32), FormatName.FLOAT32)


def test_device_values_keeps_the_shape_and_a_narrow_input_type():
    x = np.linspace(-3, 3, 2 * 3 * 40, dtype=np.float32).reshape(2, 3, 40)
    assert device_values(x, "bfp8_b").shape == x.shape
    assert device_values(x.astype("bfloat16"), "bfp4_b").dtype == np.dtype("bfloat16")
    assert device_values(x, "bfloat16").dtype == np.dtype("bfloat16")


def test_device_values_equal_ttnn_itself_where_it_imports():
    os.environ.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH", str(FIXTURE.parent / "mock_n150.yaml"))
    ttnn = pytest.importorskip("ttnn", reason="ttnn 0.81.1 has wheels for Python 3.10 and 3.12 only")
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((40, 70)) * np.exp2(rng.integers(-30, 30, (40, 1)))).astype(np.float32)
    for fmt, data_type in zip(FORMATS, (ttnn.bfloat16, ttnn.bfloat8_b, ttnn.bfloat4_b)):
        t = ttnn.Tensor(tensor=x, data_type=data_type, layout=ttnn.TILE_LAYOUT)
        assert np.array_equal(_bits(ttnn.to_dtype(t, ttnn.float32).to_numpy()), _bits(device_values(x, fmt)))
