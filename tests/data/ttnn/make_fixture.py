"""Write `fixture.npz`: edge-case float32 inputs and ttnn's round trip of each
through bfloat16, bfp8_b and bfp4_b, as bit patterns (NaN payloads kept).

Run in a Python 3.12 venv (ttnn ships cp310 and cp312 wheels only):

    python3.12 -m venv /tmp/ttnn312
    /tmp/ttnn312/bin/pip install ttnn==0.81.1 numpy
    /tmp/ttnn312/bin/python tests/data/ttnn/make_fixture.py

ttnn needs no device to pack host tensors, but a block float's tile size is
computed through the HAL, which needs a cluster: the mock n150 descriptor
beside this script stands in for one (TT_METAL_MOCK_CLUSTER_DESC_PATH).
"""

# pyright: reportAttributeAccessIssue=false
# (ttnn has wheels for Python 3.10 and 3.12 only: the project's 3.11 venv type-checks without it)

from __future__ import annotations

import os
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
os.environ.setdefault("TT_METAL_MOCK_CLUSTER_DESC_PATH", str(HERE / "mock_n150.yaml"))

import ttnn  # noqa: E402  (reads the descriptor's path at import)

TTNN_VERSION = "0.81.1"
FORMATS = {"bfloat16": ttnn.bfloat16, "bfp8_b": ttnn.bfloat8_b, "bfp4_b": ttnn.bfloat4_b}


def bits(*patterns: int) -> np.ndarray:
    return np.array(patterns, dtype=np.uint32).view(np.float32)


#: the values a packer gets wrong first: zeros, denormals, the normal range's ends, inf, NaN payloads
SPECIALS = np.concatenate([
    bits(0x00000000, 0x80000000),                                  # +0, -0
    bits(0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000, 0x00008000),  # denormals
    bits(0x00800000, 0x80800000, 0x00800001, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F000000),  # normal extremes
    bits(0x7F800000, 0xFF800000),                                  # +-inf
    bits(0x7FC00000, 0xFFC00000, 0x7FFFFFFF, 0x7F800001, 0x7F800100, 0x7FA00000, 0xFFFFFFFF),  # NaNs
])


def bfloat16_ties(rng: np.random.Generator, n: int) -> np.ndarray:
    """Values exactly halfway between two bfloat16s, and one ulp either side."""
    high = rng.integers(0x0080, 0x7F7F, n, dtype=np.uint32) << 16
    sign = rng.integers(0, 2, n, dtype=np.uint32) << 31
    tie = high | sign | 0x8000
    return np.concatenate([tie, tie - 1, tie + 1]).view(np.float32)


def block_float_ties(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Rows of small integers times a power of two: many elements fall exactly
    halfway between two codes of a block's shared exponent."""
    ints = rng.integers(-255, 256, (rows, 32)).astype(np.float32)
    scale = np.ldexp(np.float32(1), rng.integers(-12, 4, (rows, 1))).astype(np.float32)
    return ints * scale


def exponent_extremes(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Blocks whose largest exponent is near 1 or near 254, with smaller
    neighbours whose rebuilt exponent falls off either end."""
    out = np.empty((rows, 32), np.uint32)
    for r in range(rows):
        top = int(rng.choice([1, 2, 3, 8, 250, 253, 254]))
        exponents = np.clip(top - rng.integers(0, 12, 32), 0, 254).astype(np.uint32)
        exponents[rng.integers(0, 32)] = top
        mantissas = rng.integers(0, 1 << 23, 32, dtype=np.uint32)
        signs = rng.integers(0, 2, 32, dtype=np.uint32)
        out[r] = (signs << 31) | (exponents << 23) | mantissas
    return out.view(np.float32)


def mixed_rows(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Ordinary values with a special one dropped in here and there, so a
    face row holds a NaN, an inf or a denormal beside finite neighbours."""
    x = (rng.standard_normal((rows, 32)) * np.exp2(rng.integers(-20, 20, (rows, 1)))).astype(np.float32)
    where = rng.random((rows, 32)) < 0.05
    x[where] = rng.choice(SPECIALS, int(where.sum()))
    x[rng.integers(0, rows, rows // 8)] = 0.0  # whole zero blocks
    return x


def cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(53)
    specials = np.resize(SPECIALS, (4, 32))
    return {
        "specials": specials,
        "bfloat16_ties": bfloat16_ties(rng, 1024).reshape(-1, 32),
        "block_ties": block_float_ties(rng, 256),
        "exponent_extremes": exponent_extremes(rng, 128),
        "mixed": mixed_rows(rng, 256),
        # shapes that are no multiple of a tile: ttnn pads with zeros
        "rank1_7": rng.standard_normal(7).astype(np.float32),
        "odd_3x5": rng.standard_normal((3, 5)).astype(np.float32),
        "odd_33x17": (rng.standard_normal((33, 17)) * 1e3).astype(np.float32),
        "odd_2x3x40": mixed_rows(rng, 6)[:, :20].repeat(2, axis=1).reshape(2, 3, 40),
        "scalar_like_1x1": np.array([[3.14159]], np.float32),
    }


def round_trip(x: np.ndarray, data_type) -> np.ndarray:
    t = ttnn.Tensor(tensor=np.ascontiguousarray(x, np.float32), data_type=data_type, layout=ttnn.TILE_LAYOUT)
    back = np.asarray(ttnn.to_dtype(t, ttnn.float32).to_numpy(), np.float32)
    assert back.shape == x.shape, (back.shape, x.shape)
    return back


def main() -> None:
    assert version("ttnn") == TTNN_VERSION, f"ttnn {version('ttnn')}; the fixture is of {TTNN_VERSION}"
    out: dict[str, Any] = {"ttnn_version": np.array(TTNN_VERSION)}
    for name, x in cases().items():
        out[f"input/{name}"] = x.view(np.uint32)
        for fmt, data_type in FORMATS.items():
            out[f"{fmt}/{name}"] = round_trip(x, data_type).view(np.uint32)
    path = HERE / "fixture.npz"
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **out)
    os.replace(tmp, path)
    print(f"wrote {path}: {sum(v.size for k, v in out.items() if k.startswith('input/'))} values per format")


if __name__ == "__main__":
    main()
