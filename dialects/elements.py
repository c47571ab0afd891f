"""Elements attributes and numpy arrays, both ways, without Python lists."""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, TensorType
from xdsl.ir import Attribute

from forge_opt import dtypes


def fill_value(attr: Attribute | None) -> int | float:
    """The number a `fill` property holds."""
    if not isinstance(attr, FloatAttr | IntegerAttr):
        raise ValueError(f"not a number: {attr}")
    return attr.value.data


def attr_to_array(attr: Attribute | None) -> np.ndarray:
    """A read-only view of an elements attribute's bytes."""
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        raise ValueError(f"not a constant tensor: {attr}")
    dtype = dtypes.numpy_dtype(attr.get_element_type())
    return np.frombuffer(attr.data.data, dtype).reshape(attr.get_shape())


def array_to_attr(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    """An elements attribute over a numpy array's bytes."""
    array = np.asarray(array)
    elem = dtypes.mlir_type_of_numpy(array.dtype)
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    # xDSL's annotation asks for a TensorType of a narrower element type than it checks
    return DenseIntOrFPElementsAttr(TensorType(elem, array.shape), BytesAttr(data))  # pyright: ignore[reportArgumentType]


def array_view_attr(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    """An elements attribute over the array's own bytes, not a copy, as the
    importer's attributes are views of the mapped model; the array is made
    read-only, so the bytes cannot change under the attribute. It cannot be
    hashed (an array is not): for a parameter's value, which no pass keys
    on (`merge-equal-ops` never compares weights). An array not contiguous
    or not little-endian is copied, as `array_to_attr` does."""
    if not array.flags.c_contiguous or array.dtype.byteorder == ">":
        return array_to_attr(array)
    array.setflags(write=False)
    elem = dtypes.mlir_type_of_numpy(array.dtype)
    data = array.reshape(-1).view(np.uint8).data
    return DenseIntOrFPElementsAttr(TensorType(elem, array.shape), BytesAttr(data))  # pyright: ignore[reportArgumentType]
