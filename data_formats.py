"""The data formats a Forge program may store and compute in, as one table,
and their values as the device holds them.

- `float32` and `bfloat16` (Forge's `Float32` and `Float16_b`) for a whole
  program (`data-format=`): parameters, inputs and every op's values.
- `bfp8_b` and `bfp4_b`, block floats, for the matmul weights only
  (`weight-format=`): tt-mlir's `experimental-weight-dtype` converts the B
  operand of a matmul that is computed from constants alone; tt-forge-fe's
  own lowering to TTIR has no block-float format (lower_to_mlir.cpp
  get_data_type asserts on anything but Float32, Float16_b, Float16,
  Int32, Int8, RawUInt8), so its pipeline option is how Forge reaches it.

A block float stores 16 consecutive elements of a face row (along the last
dim of the tensor as the device holds it) with one shared 8-bit exponent,
the largest of the 16, and per element a sign and a magnitude of 7 (bfp8)
or 3 (bfp4) bits whose leading one is explicit. `device_values` is
bit-exact with ttnn 0.81.1's host packing and unpacking (tt-metal's
tt_metal/impl/data_format/blockfloat_common.cpp as that release ships it;
checked against the library itself by `tests/test_ttnn_formats.py`):

- a float32 denormal is flushed to zero first (tt-metal at 034fc8c and
  before gave it a hidden one);
- the 24-bit significand, hidden one set, is shifted right by the block's
  exponent minus the element's, the bits shifted out dropped;
- the top bits are kept, rounded to nearest with ties to even on the bits
  below them (those left after the shift), and saturated;
- a magnitude of zero has no sign;
- unpacking rebuilds IEEE bits from the leading one: a NaN or inf makes its
  block's exponent 255 (NaN stays NaN, its finite neighbours become 0), and
  a value whose rebuilt exponent is 0 or less becomes +0.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from xdsl.utils.str_enum import StrEnum

from forge_opt.diagnostics import ForgeOptError


class FormatName(StrEnum):
    """A format as a user names it (`--data-format`, `--weight-format`);
    Forge's own `DataFormat` enum is the stand-in's, and `FORMATS` maps one to
    the other."""

    FLOAT32 = "float32"
    BFLOAT16 = "bfloat16"
    BFP8_B = "bfp8_b"
    BFP4_B = "bfp4_b"


@dataclass(frozen=True)
class Format:
    forge: str  # Forge's DataFormat member
    bytes_per_element: float  # as the device stores a 32x32 tile of it
    mantissa_bits: int = 0  # a block float's bits per magnitude (sign apart)
    mlir_weight_dtype: str = ""  # tt-mlir's `experimental-weight-dtype` value


#: bytes per element from a tile's size: 4,096 and 2,048 bytes; 1,024 + 64 exponents and 512 + 64
#: (tt-forge-fe forge/csrc/lower_to_forge/common.cpp; tt_transformers' _BYTES_PER_ELEM)
FORMATS = {
    FormatName.FLOAT32: Format("Float32", 4.0),
    FormatName.BFLOAT16: Format("Float16_b", 2.0),
    FormatName.BFP8_B: Format("Bfp8_b", 1088 / 1024, 7, "bfp_bf8"),
    FormatName.BFP4_B: Format("Bfp4_b", 576 / 1024, 3, "bfp_bf4"),
}

#: formats a whole program computes in; the others are for weights only
PROGRAM_FORMATS = (FormatName.FLOAT32, FormatName.BFLOAT16)
BLOCK_FORMATS = (FormatName.BFP8_B, FormatName.BFP4_B)
#: the numpy element type of each program format
NUMPY_TYPES = {FormatName.FLOAT32: np.dtype(np.float32), FormatName.BFLOAT16: np.dtype(ml_dtypes.bfloat16)}

#: the module attribute recording the block float a module's matmul weights are compiled for
WEIGHT_FORMAT_ATTR = "forge.weight_format"
#: the module attribute counting the constants a bfloat16 program holds saturated (`saturated`)
SATURATED_ATTR = "forge.saturated_constants"
#: the module attribute naming the weights (model initializers) `saturated` changed, which a module saturates as
#: it loads them
SATURATED_WEIGHTS_ATTR = "forge.saturated_weights"
#: bfloat16's largest finite value: a float32 beyond it rounds to an infinity
BFLOAT16_MAX = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)


def saturated(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Finite float32 `values` beyond bfloat16's range (a mask's fill,
    `torch.finfo(float32).min`) at bfloat16's finite extremes, as a fill a
    device should hold is written: rounded to an infinity it meets a 0 in a
    multiply (`(1 - mask) * min`) and makes NaN. With how many there were."""
    a = np.asarray(values)
    beyond = np.isfinite(a) & (np.abs(a) > BFLOAT16_MAX)
    count = int(beyond.sum())
    return (np.where(beyond, np.copysign(BFLOAT16_MAX, a), a).astype(a.dtype) if count else a), count

BLOCK = 16  # elements sharing one exponent: a face row


def parse(value: str, allowed, what: str) -> FormatName:
    """`value` as a format of `allowed`, or a one-line error naming them."""
    if value not in allowed:
        raise ForgeOptError(f"{what}={value}: give one of {', '.join(allowed)}")
    return FormatName(value)


def _pack(values: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each element's sign and magnitude, and each block's shared exponent:
    shapes (rows, blocks, 16), (rows, blocks, 16) and (rows, blocks, 1).
    A float32 denormal packs as zero, as ttnn 0.81.1's packer flushes it."""
    x = np.asarray(values, dtype=np.float32)
    rows = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    pad = -rows.shape[1] % BLOCK
    if pad:
        rows = np.pad(rows, ((0, 0), (0, pad)))
    bits = np.ascontiguousarray(rows).view(np.uint32).reshape(rows.shape[0], -1, BLOCK)
    exponent = (bits >> 23) & 0xFF
    shared = exponent.max(axis=-1, keepdims=True)
    normal = exponent != 0  # zeros and denormals pack as 0
    # the shift drops what falls below the 24 bits (a shift of 24 to 31 leaves 0, as the C++'s)
    np.subtract(shared, exponent, out=exponent)
    np.minimum(exponent, 31, out=exponent)
    magnitude = (bits & 0x7FFFFF) | 0x800000
    magnitude >>= exponent
    below = 24 - width
    rest = magnitude & ((1 << below) - 1)
    magnitude >>= below
    tie = 1 << (below - 1)
    magnitude += (rest > tie) | ((rest == tie) & (magnitude & 1 == 1))
    np.minimum(magnitude, (1 << width) - 1, out=magnitude)
    magnitude *= normal
    sign = (bits >> 31) * (magnitude != 0)  # a magnitude of 0 has no sign
    return sign, magnitude, shared


def block_float_codes(values: np.ndarray, fmt: FormatName) -> tuple[np.ndarray, np.ndarray]:
    """The packing of `values` (float32, or exactly in float32) in `fmt`:
    per element its sign-magnitude code, per block of 16 along the last dim
    (zero-padded, as a tile pads) the shared exponent. Shapes:
    (rows, blocks, 16) and (rows, blocks, 1)."""
    width = FORMATS[fmt].mantissa_bits
    sign, magnitude, shared = _pack(values, width)
    return ((sign << width) | magnitude).astype(np.uint8), shared.astype(np.uint8)


def _values(sign: np.ndarray, magnitude: np.ndarray, shared: np.ndarray, width: int) -> np.ndarray:
    """The float32 values ttnn's unpacker rebuilds: the magnitude's leading
    one becomes the hidden bit and the exponent drops by its distance from
    the top, so a shared exponent of 255 gives inf or NaN (payload kept as
    far as the bits go), and a rebuilt exponent of 0 or below gives +0."""
    m = magnitude.astype(np.uint32)
    top = np.zeros(m.shape, np.uint32)  # the position of the leading one
    for b in range(1, width):
        top[(m >> b) != 0] = b
    exponent = shared.astype(np.int32) - (width - 1) + top.astype(np.int32)
    bits = (m << (23 - top)) & 0x7FFFFF
    bits |= np.clip(exponent, 0, 255).astype(np.uint32) << 23
    bits |= sign.astype(np.uint32) << 31
    bits[(m == 0) | (exponent <= 0)] = 0
    return bits.view(np.float32)


def block_float_values(codes: np.ndarray, shared: np.ndarray, fmt: FormatName) -> np.ndarray:
    """The values codes and exponents mean, as ttnn unpacks them."""
    width = FORMATS[fmt].mantissa_bits
    return _values(codes >> width, codes & ((1 << width) - 1), shared, width)


def _bfloat16(values: np.ndarray) -> np.ndarray:
    """Round to nearest even; every NaN becomes 0x7FC0 (ttnn's and torch's
    conversion; ml_dtypes alone keeps a NaN's sign and payload)."""
    with np.errstate(invalid="ignore"):  # numpy warns of a NaN it casts to an ml_dtypes type
        out = np.asarray(values).astype(ml_dtypes.bfloat16)
    nan = np.isnan(out)
    if nan.any():
        out[nan] = np.uint16(0x7FC0).view(ml_dtypes.bfloat16)
    return out


#: elements converted at a time: the packing's temporaries stay a few tens of MB for any weight
_CHUNK = 1 << 22


def device_values(values: np.ndarray, fmt: FormatName | str) -> np.ndarray:
    """`values` as a Tenstorrent device holds them in `fmt` (`bfloat16`,
    `bfp8_b` or `bfp4_b`), bit for bit as ttnn 0.81.1 packs them on the host
    and unpacks them (`tests/data/ttnn/fixture.npz`). A block float is read
    in tiles of 32x32 whose faces are 16x16, so its blocks are 16
    consecutive elements along the last dim, zero-padded; the result keeps
    the input's shape. bfloat16 comes back as bfloat16; a block float in the
    input's float type (its values have at most 7 significant bits)."""
    fmt = FormatName(fmt)
    if fmt == FormatName.BFLOAT16:
        return _bfloat16(values)
    if fmt not in BLOCK_FORMATS:
        raise ForgeOptError(f"device_values: format {fmt} is not one of bfloat16, {', '.join(BLOCK_FORMATS)}")
    a = np.asarray(values)
    if a.dtype.kind != "f" and a.dtype != ml_dtypes.bfloat16:
        a = a.astype(np.float32)
    last = a.shape[-1] if a.ndim else 1
    rows = a.reshape(-1, last)
    out = np.empty(rows.shape, a.dtype)
    step = max(1, _CHUNK // max(last, 1))
    width = FORMATS[fmt].mantissa_bits
    for start in range(0, rows.shape[0], step):
        flat = _values(*_pack(rows[start:start + step], width), width).reshape(-1, rows.shape[1] + -last % BLOCK)
        out[start:start + step] = flat[:, :last]
    return out.reshape(a.shape)
