"""Block floats bit for bit as tt-metal packs them on the host: the
vectorized packing of `data_formats` against a scalar port of tt-metal's
`get_max_exp` and `convert_u32_to_bfp` (tt_metal/impl/data_format/
blockfloat_common.cpp, as ttnn 0.81.1 ships it: denormals flushed), on
blocks with spread exponents, zeros of both signs, exact ties and
saturation. `test_ttnn_formats.py` checks the same against ttnn itself."""

from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from forge_opt.data_formats import FORMATS, FormatName, block_float_codes, block_float_values, device_values

RNG = np.random.default_rng(7)


def _u32(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def _max_exp(block: list[int]) -> int:
    return max((u & 0x7F800000) >> 23 for u in block)


def _to_bfp(u: int, shared: int, width: int) -> int:
    """convert_u32_to_bfp<Bfp*_b, truncate=false>, one element, line by line."""
    if u & 0x7F800000 == 0:  # a zero or a denormal (flushed)
        return 0
    mantissa = (u & 0x007FFFFF) | (1 << 23)
    exp = (u & 0x7F800000) >> 23
    sign = u >> 31
    if shared > exp:
        diff = shared - exp
        while diff > 31:
            mantissa >>= 31
            diff -= 31
        mantissa >>= diff
    shift = 24 - width
    round_value = mantissa & ((1 << shift) - 1)
    mantissa >>= shift
    guard = mantissa & 1
    tie = 1 << (shift - 1)
    if round_value > tie or (round_value == tie and guard == 1):
        mantissa += 1
    mantissa = min(mantissa, (1 << width) - 1)
    if mantissa == 0:
        sign = 0
    return (sign << width) | mantissa


def _reference(row: np.ndarray, width: int) -> tuple[list[int], int]:
    block = [_u32(float(v)) for v in row]
    shared = _max_exp(block)
    return [_to_bfp(u, shared, width) for u in block], shared


def _blocks() -> np.ndarray:
    """Rows of 16: spread exponents, zeros of both signs, ties, a block
    whose largest element rounds past the top (saturation), denormals."""
    rows = [
        RNG.standard_normal(16) * np.exp2(RNG.integers(-30, 30, 16)),  # exponents 60 apart
        RNG.standard_normal(16),
        np.array([0.0, -0.0] * 8),
        np.array([1.0, -0.0, 0.0, 3.0] * 4),
        np.array([1.9999999] * 8 + [1e-30] * 8),  # rounds up to 2.0: saturates at the largest code
        np.array([1.0 + 2.0 ** -7, 1.0 + 3 * 2.0 ** -7, 1.0 + 2.0 ** -3, 1.0 + 3 * 2.0 ** -3] * 4),  # ties
        np.array([8.0] + [0.5 + 2.0 ** -k for k in range(2, 17)]),  # ties after the block's shift
        np.array([1e-39, -1e-40] * 8),  # denormals: flushed to zero
    ]
    rows += [RNG.standard_normal(16) * 10.0 ** RNG.uniform(-8, 8) for _ in range(200)]
    return np.array(rows, dtype=np.float32)


@pytest.mark.parametrize("fmt", [FormatName.BFP8_B, FormatName.BFP4_B])
def test_codes_and_exponents_equal_tt_metals_packing_bit_for_bit(fmt):
    width = FORMATS[fmt].mantissa_bits
    rows = _blocks()
    codes, shared = block_float_codes(rows, fmt)
    for i, row in enumerate(rows):
        want_codes, want_shared = _reference(row, width)
        assert codes[i, 0].tolist() == want_codes, (i, row)
        assert int(shared[i, 0, 0]) == want_shared


@pytest.mark.parametrize("fmt", [FormatName.BFP8_B, FormatName.BFP4_B])
def test_values_decode_as_tt_metal_unpacks_them(fmt):
    """m * 2^(e - 127 - (bits - 1)), signed, where that is a normal float32
    (else +0): what convert_bfp_to_u32 gives for a finite block."""
    width = FORMATS[fmt].mantissa_bits
    rows = _blocks()[:8]
    codes, shared = block_float_codes(rows, fmt)
    values = block_float_values(codes, shared, fmt)
    for i, row in enumerate(rows):
        want_codes, want_shared = _reference(row, width)
        for got, code in zip(values[i, 0], want_codes):
            sign, magnitude = code >> width, code & ((1 << width) - 1)
            want = (-1) ** sign * magnitude * 2.0 ** (want_shared - 127 - (width - 1))
            assert got == (want if abs(want) >= 2.0 ** -126 else 0.0)


def test_a_saturated_block_keeps_its_largest_code():
    codes, shared = block_float_codes(np.array([1.9999999] + [0.25] * 15, np.float32), FormatName.BFP8_B)
    assert codes[0, 0, 0] == 0x7F and shared[0, 0, 0] == 127  # 127/64: 1.984375, not 2.0
    assert device_values(np.array([1.9999999] + [0.25] * 15, np.float32), FormatName.BFP8_B)[0] == 1.984375


def test_blocks_run_along_the_last_dim_and_a_partial_block_is_padded():
    """An outlier costs its own face row only, and a row of 20 is a block of
    16 and one of 4 (padded with zeros, which change no exponent)."""
    w = np.full((3, 20), 0.3, np.float32)
    w[1, 2] = 1000.0
    q = device_values(w, FormatName.BFP4_B)
    assert q.shape == w.shape and q.dtype == np.float32
    assert np.all(q[1, :16] != np.float32(0.3)) and np.all(q[1, 16:] == q[0, 16:])  # the outlier's block alone
    assert np.all(q[1, 16:] == device_values(np.full(4, 0.3, np.float32), FormatName.BFP4_B))
    assert np.all(q[1, :16][np.arange(16) != 2] == 0)  # 0.3 is 12 bits below 1000: nothing left of it in bfp4


def test_block_floats_of_bfloat16_weights_are_bfloat16_exactly():
    w = (RNG.standard_normal((4, 64))).astype(ml_dtypes.bfloat16)
    q = device_values(w, FormatName.BFP8_B)
    assert q.dtype == w.dtype
    assert np.array_equal(q.astype(np.float32), device_values(w.astype(np.float32), FormatName.BFP8_B))


def test_bytes_per_element_are_a_tiles_bytes():
    assert FORMATS[FormatName.BFP8_B].bytes_per_element * 1024 == 1088
    assert FORMATS[FormatName.BFP4_B].bytes_per_element * 1024 == 576
