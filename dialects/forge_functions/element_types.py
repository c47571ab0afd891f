"""The element types Forge holds and computes in: its DataFormat for a
dtype, the dtype it computes a DataFormat in, and torch's promotion, which
Forge's goldens follow."""

from __future__ import annotations

import numpy as np

from forge_opt.dtypes import is_float

# torch dtypes Forge has a DataFormat for, and the one each becomes
# (forge/forge/tensor.py pytorch_dtype_to_forge_dataformat): bool and every
# integer type are held as Int32.
_FORMATS = {
    "float32": "Float32", "float16": "Float16", "bfloat16": "Float16_b",
    "int32": "Int32", "int64": "Int32", "int8": "Int32", "uint8": "Int32", "bool": "Int32",
}
# DataFormat -> the torch dtype Forge computes it in (forge_dataformat_to_pytorch_dtype).
_FORMAT_DTYPES = {"Float32": "float32", "Float16": "float16", "Float16_b": "bfloat16", "Int32": "int32"}


_FORMAT_OF: dict[np.dtype, str | None] = {}


def data_format(dtype: np.dtype) -> str | None:
    """Forge's DataFormat for a dtype, None where Forge has none (float64, int16, ...)."""
    try:
        return _FORMAT_OF[dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable stand-in for a dtype
        fmt = _FORMATS.get(np.dtype(dtype).name)
        if isinstance(dtype, np.dtype):
            _FORMAT_OF[dtype] = fmt  # dtype.name costs microseconds; every op asks
        return fmt


def format_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype Forge holds values of `dtype` in (bool and int64 become
    int32); `dtype` itself where Forge has no DataFormat (rules reject it)."""
    fmt = data_format(dtype)
    return np.dtype(dtype) if fmt is None else np.dtype(_FORMAT_DTYPES[fmt])


def promote(*dtypes: np.dtype) -> np.dtype:
    """torch's promotion of tensors with dimensions: the widest float if any
    operand is a float, else the widest integer; bool is the narrowest."""
    ds = [np.dtype(d) for d in dtypes]
    floats = [d for d in ds if is_float(d)]
    pool = floats or [d for d in ds if d.kind in "iu"] or ds
    return max(pool, key=lambda d: d.itemsize)
