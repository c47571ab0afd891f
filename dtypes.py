"""Element types: ONNX data types, their MLIR types and their numpy dtypes;
and tensor types, made once each."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import ml_dtypes
import numpy as np
from onnx import TensorProto
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    BFloat16Type,
    Float4E2M1FNType,
    Float8E4M3FNType,
    Float8E4M3FNUZType,
    Float8E5M2FNUZType,
    Float8E5M2Type,
    Float8E8M0FNUType,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
)
from xdsl.ir import Attribute

from forge_opt.diagnostics import ForgeOptError

_U = Signedness.UNSIGNED


class UnsupportedElementType(ForgeOptError, ValueError):
    """An element type numpy (and so forge-opt's evaluation) cannot hold."""

# ONNX data type -> (MLIR element type, numpy dtype). numpy has no 16-bit
# brain float, 8-bit or 4-bit float or 4-bit and 2-bit integer: ml_dtypes
# (JAX's and TensorFlow's) gives them, with numpy's casts and ufuncs.
_TABLE: dict[int, tuple[Attribute, np.dtype | None]] = {
    TensorProto.FLOAT: (Float32Type(), np.dtype("<f4")),
    TensorProto.DOUBLE: (Float64Type(), np.dtype("<f8")),
    TensorProto.FLOAT16: (Float16Type(), np.dtype("<f2")),
    TensorProto.BFLOAT16: (BFloat16Type(), np.dtype(ml_dtypes.bfloat16)),
    TensorProto.INT8: (IntegerType(8), np.dtype("i1")),
    TensorProto.INT16: (IntegerType(16), np.dtype("<i2")),
    TensorProto.INT32: (IntegerType(32), np.dtype("<i4")),
    TensorProto.INT64: (IntegerType(64), np.dtype("<i8")),
    TensorProto.UINT8: (IntegerType(8, _U), np.dtype("u1")),
    TensorProto.UINT16: (IntegerType(16, _U), np.dtype("<u2")),
    TensorProto.UINT32: (IntegerType(32, _U), np.dtype("<u4")),
    TensorProto.UINT64: (IntegerType(64, _U), np.dtype("<u8")),
    TensorProto.BOOL: (IntegerType(1), np.dtype("bool")),
    TensorProto.FLOAT8E4M3FN: (Float8E4M3FNType(), np.dtype(ml_dtypes.float8_e4m3fn)),
    TensorProto.FLOAT8E4M3FNUZ: (Float8E4M3FNUZType(), np.dtype(ml_dtypes.float8_e4m3fnuz)),
    TensorProto.FLOAT8E5M2: (Float8E5M2Type(), np.dtype(ml_dtypes.float8_e5m2)),
    TensorProto.FLOAT8E5M2FNUZ: (Float8E5M2FNUZType(), np.dtype(ml_dtypes.float8_e5m2fnuz)),
    TensorProto.FLOAT8E8M0: (Float8E8M0FNUType(), np.dtype(ml_dtypes.float8_e8m0fnu)),
    TensorProto.FLOAT4E2M1: (Float4E2M1FNType(), np.dtype(ml_dtypes.float4_e2m1fn)),
    TensorProto.INT4: (IntegerType(4), np.dtype(ml_dtypes.int4)),
    TensorProto.UINT4: (IntegerType(4, _U), np.dtype(ml_dtypes.uint4)),
    TensorProto.INT2: (IntegerType(2), np.dtype(ml_dtypes.int2)),
    TensorProto.UINT2: (IntegerType(2, _U), np.dtype(ml_dtypes.uint2)),
}

_BY_MLIR: dict[Attribute, int] = {mlir: onnx_t for onnx_t, (mlir, _) in _TABLE.items()}


_NARROW_FLOATS = frozenset(
    np.dtype(t) for t in (
        ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
        ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn,
    )
)


_HELD = frozenset(d.newbyteorder("=") for _, d in _TABLE.values() if d is not None)


def holds(dtype) -> bool:
    """Whether values of a numpy dtype have an element type here (numbers
    and ml_dtypes' narrow ones; not strings, objects or complex)."""
    return np.dtype(dtype).newbyteorder("=") in _HELD


def is_float(dtype) -> bool:
    """numpy's floats and ml_dtypes' (whose numpy kind is 'V')."""
    d = np.dtype(dtype)
    return d.kind == "f" or d in _NARROW_FLOATS


def is_narrow_float(dtype) -> bool:
    """A float numpy cannot compute in itself: ml_dtypes' bfloat16, float8, float4."""
    return np.dtype(dtype) in _NARROW_FLOATS


def onnx_name(onnx_type: int) -> str:
    return TensorProto.DataType.Name(onnx_type) if onnx_type in TensorProto.DataType.values() else str(onnx_type)


def mlir_type(onnx_type: int) -> Attribute | None:
    """The MLIR element type of an ONNX data type, None if we have none."""
    entry = _TABLE.get(onnx_type)
    return entry[0] if entry else None


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """The numpy dtype that holds values of an MLIR element type."""
    onnx_t = _BY_MLIR.get(element_type)
    dtype = None if onnx_t is None else _TABLE[onnx_t][1]
    if dtype is None:
        raise UnsupportedElementType(f"element type {element_type} is not supported")
    return dtype


class UnrankedType(TypeError):
    """A value whose rank ONNX could not infer (an op of another domain
    made it) where a ranked tensor is needed; lowerings report it as an
    error of their node."""


def tensor(t: Attribute) -> TensorType:
    """`t` as the ranked tensor type every value of ours has past import."""
    if type(t) is TensorType or isinstance(t, TensorType):  # the first test is the cheap one
        return t
    raise UnrankedType(f"a value of unknown rank ({t})")


def tensor_nbytes(t: Attribute) -> int:
    """The bytes a value of tensor type `t` holds."""
    t = tensor(t)
    return math.prod(t.get_shape()) * np.dtype(numpy_dtype(t.element_type)).itemsize


def onnx_type(element_type: Attribute) -> int:
    """The ONNX data type of an MLIR element type."""
    return _BY_MLIR[element_type]


def mlir_type_of_numpy(dtype: np.dtype) -> Attribute:
    return _mlir_type_of_numpy(np.dtype(dtype))


@lru_cache(maxsize=64)
def _mlir_type_of_numpy(dtype: np.dtype) -> Attribute:
    for mlir, np_dtype in _TABLE.values():
        if np_dtype is not None and np_dtype == np.dtype(dtype).newbyteorder("<"):
            return mlir
    raise UnsupportedElementType(f"numpy dtype {dtype} is not supported")


def tensor_type(element_type: Attribute, shape: Sequence[int]) -> TensorType:
    """`TensorType(element_type, shape)`. Building and verifying one costs
    about 20 µs, and a graph has few distinct types, so each is made once.
    Any negative size is an unknown one, `DYNAMIC_INDEX` (printed `?`)."""
    return _tensor_type(element_type, tuple(d if d >= 0 else DYNAMIC_INDEX for d in shape))


@lru_cache(maxsize=4096)
def _tensor_type(element_type: Attribute, shape: tuple[int, ...]) -> TensorType:
    return TensorType(element_type, shape)
