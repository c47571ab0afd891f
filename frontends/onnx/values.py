"""ONNX's types, constants and attributes as builtin attributes: element
and tensor types; a tensor's bytes as an elements attribute over them
(external data memory-mapped, never read unless something reads it); a
node's attributes."""

from __future__ import annotations

import functools
import mmap
import os
import weakref
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, ModelProto, TensorProto, TypeProto, numpy_helper
from xdsl.dialects.builtin import (
    ArrayAttr,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnrankedTensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects.onnx_base import OptType, SeqType, StringType
from forge_opt.dialects.tir_shapes import DYNAMIC
from forge_opt.frontends.onnx.weights import WeightMap

# -- types --------------------------------------------------------------------


def element_type(elem: int, what: str) -> Attribute:
    if elem == TensorProto.STRING:
        return StringType()
    t = dtypes.mlir_type(elem)
    if t is None:
        raise ForgeOptError(f"{what}: element type {dtypes.onnx_name(elem)} is not supported")
    return t


def mlir_type(tp: TypeProto, what: str) -> Attribute:
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        tt = tp.tensor_type
        elem = element_type(tt.elem_type, what)
        if not tt.HasField("shape"):
            return UnrankedTensorType(elem)
        dims = [d.dim_value if d.HasField("dim_value") else DYNAMIC for d in tt.shape.dim]
        return dtypes.tensor_type(elem, dims)
    if kind == "sequence_type":
        return SeqType(mlir_type(tp.sequence_type.elem_type, what))  # pyright: ignore[reportCallIssue]
    if kind == "optional_type":
        return OptType(mlir_type(tp.optional_type.elem_type, what))  # pyright: ignore[reportCallIssue]
    raise ForgeOptError(f"{what}: values of kind {kind or 'unknown'} are not supported")


def tensor_type(t: TensorProto, what: str) -> TensorType:
    return dtypes.tensor_type(element_type(t.data_type, what), t.dims)


# -- constants ------------------------------------------------------------------


def tensor_attr(t: TensorProto, base: Path | None, what: str, weights: WeightMap | None = None) -> Attribute:
    """A builtin elements attribute over the tensor's bytes (never a list)."""
    ttype = tensor_type(t, what)
    if weights is not None and t.name in weights and not t.HasField("raw_data"):
        raw = weights.read(t.name)
    elif t.data_location == TensorProto.EXTERNAL:
        raw = external_bytes(t, base, what)
    elif t.HasField("raw_data"):
        raw = t.raw_data
    else:
        if t.data_type == TensorProto.STRING:
            raise ForgeOptError(f"{what}: string constants are not supported")
        raw = onnx.numpy_helper.to_array(t).astype(dtypes.numpy_dtype(ttype.element_type)).tobytes()
    np_dtype = _np_dtype(ttype.element_type, what)
    count = int(np.prod(t.dims, dtype=np.int64))
    if len(raw) != count * np_dtype.itemsize:
        raise ForgeOptError(
            f"{what}: holds {len(raw)} bytes, but {list(t.dims)} x {np_dtype} needs {count * np_dtype.itemsize}"
        )
    if t.data_type == TensorProto.BOOL:
        raw = np.frombuffer(raw, np.uint8).astype(bool).tobytes()
    # xDSL's annotations: a narrower TensorType than it checks, bytes where a buffer serves
    return DenseIntOrFPElementsAttr(ttype, BytesAttr(raw))  # pyright: ignore[reportArgumentType]


def _np_dtype(elem: Attribute, what: str) -> np.dtype:
    try:
        return dtypes.numpy_dtype(elem)
    except ValueError:
        raise ForgeOptError(f"{what}: constants of element type {elem} are not supported") from None


def external_bytes(t: TensorProto, base: Path | None, what: str) -> bytes:
    info = {e.key: e.value for e in t.external_data}
    location = info.get("location")
    if not location:
        raise ForgeOptError(f"{what}: external data without a location")
    if base is None:
        raise ForgeOptError(f"{what}: external data '{location}' needs the model's folder; import from a path")
    root = base.resolve()
    path = (root / location).resolve()
    if root not in path.parents:
        raise ForgeOptError(f"{what}: external data location '{location}' escapes the model's folder")
    if not path.is_file():
        raise ForgeOptError(f"{what}: external data file '{location}' does not exist")
    offset = int(info.get("offset", 0))
    length = info.get("length")
    st = path.stat()
    data = _mapped(path, st.st_ino, st.st_mtime_ns, st.st_size)
    end = len(data) if length is None else offset + int(length)
    if end > len(data):
        raise ForgeOptError(f"{what}: external data '{location}' ends at byte {len(data)}, before {end}")
    # a view of the mapped file: pages are read only if something reads them
    return memoryview(data)[offset:end]  # pyright: ignore[reportReturnType]  (a buffer serves as bytes)


def initializer_array(t: TensorProto, base: Path | None) -> np.ndarray:
    """An initializer's value: for external data a read-only view of the
    mapped file (never copied), else its own bytes."""
    if t.data_location != TensorProto.EXTERNAL:
        return numpy_helper.to_array(t)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
    return np.frombuffer(external_bytes(t, base, f"initializer '{t.name}'"), dtype).reshape(tuple(t.dims))


def with_external_data(model: ModelProto, base: Path | None) -> ModelProto:
    """`model` with its external weights read in from `base` (what Forge's
    `process_framework_parameters` is given: a model `onnx.load` read
    whole); `model` itself when it has none."""
    external = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    if not external:
        return model
    loaded = ModelProto()
    loaded.CopyFrom(model)
    for t in loaded.graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            t.raw_data = bytes(external_bytes(t, base, f"initializer '{t.name}'"))
            del t.external_data[:]
            t.data_location = TensorProto.DEFAULT
    return loaded


def as_loaded(model: ModelProto, base: Path | None):
    """`model` as `with_external_data` gives it, for reading initializers
    through `onnx.numpy_helper.to_array` (what an emitted module's
    `process_framework_parameters` does) without copying a byte: each
    external initializer's `raw_data` is a view of the mapped file. `model`
    itself when it has no external data."""
    if not any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer):
        return model
    return _LoadedModel(model, [
        _MappedTensor(t, external_bytes(t, base, f"initializer '{t.name}'"))
        if t.data_location == TensorProto.EXTERNAL else t
        for t in model.graph.initializer
    ])


class _MappedTensor:
    """An external initializer as `onnx.load` leaves it (data inline, no
    external fields), its `raw_data` a read-only view of the mapped file."""

    data_location = TensorProto.DEFAULT
    external_data = ()

    def __init__(self, tensor: TensorProto, raw: bytes):
        self._tensor = tensor
        self.raw_data = raw

    def HasField(self, field: str) -> bool:  # protobuf's name
        return field == "raw_data" or (field not in ("data_location", "segment") and self._tensor.HasField(field))

    def __getattr__(self, name: str):
        return getattr(self._tensor, name)


class _LoadedModel:
    """A ModelProto whose graph's initializers are `_MappedTensor`s."""

    def __init__(self, model: ModelProto, initializers: list):
        self._model = model
        self.graph = _LoadedGraph(model.graph, initializers)

    def __getattr__(self, name: str):
        return getattr(self._model, name)


class _LoadedGraph:
    def __init__(self, graph, initializers: list):
        self._graph = graph
        self.initializer = initializers

    def __getattr__(self, name: str):
        return getattr(self._graph, name)


@functools.lru_cache(maxsize=64)
def _mapped(path: Path, inode: int, mtime_ns: int, size: int) -> mmap.mmap | bytes:
    """An external data file, memory-mapped once (read-only) per version of
    it (its inode, time and size are part of the key: a file rewritten in
    place is mapped anew)."""
    if size == 0:
        return b""
    with open(path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        fd = os.dup(f.fileno())  # the file mapped, even if the path is replaced later
    weakref.finalize(mapped, os.close, fd)
    _MAPPINGS[mapped] = fd
    return mapped


#: each mapped weight file, with a descriptor of the file it maps
_MAPPINGS: weakref.WeakKeyDictionary[mmap.mmap, int] = weakref.WeakKeyDictionary()


def _offset_in(mapped: mmap.mmap, view: np.ndarray) -> int:
    return view.__array_interface__["data"][0] - np.frombuffer(mapped, np.uint8).__array_interface__["data"][0]


def mapped_span(view: np.ndarray) -> tuple[int, int] | None:
    """The file descriptor and offset of the bytes of `view`, a contiguous
    array over a mapped weight file; None for any other array. A writer
    can then have the kernel copy them (`os.copy_file_range`), never
    reading them into this process."""
    if not view.flags.c_contiguous:
        return None
    for mapped, fd in list(_MAPPINGS.items()):
        if not mapped.closed:
            start = _offset_in(mapped, view)
            if start >= 0 and start + view.nbytes <= len(mapped):
                return fd, start
    return None


def release_mapped_pages(view: np.ndarray | None = None) -> None:
    """Drop the pages of the mapped weight files from this process (they
    stay in the file and the page cache, and are read again if touched):
    all of them, or those under `view`, a contiguous array over one. A pass
    over many weights, as the per-device plan writer makes, then holds
    only what it is working on."""
    if not hasattr(mmap, "MADV_DONTNEED"):
        return
    for mapped in list(_MAPPINGS):
        if mapped.closed:
            continue
        if view is None:
            mapped.madvise(mmap.MADV_DONTNEED)
            continue
        start = _offset_in(mapped, view)
        if 0 <= start < len(mapped):
            first = start - start % mmap.PAGESIZE
            mapped.madvise(mmap.MADV_DONTNEED, first, min(start + view.nbytes, len(mapped)) - first)
            return


# -- attributes -----------------------------------------------------------------


def attribute_value(a: AttributeProto, base: Path | None, what: str) -> Attribute:
    t = a.type
    if t == AttributeProto.INT:
        return IntegerAttr(a.i, i64)
    if t == AttributeProto.FLOAT:
        return FloatAttr(a.f, f32)
    if t == AttributeProto.STRING:
        return StringAttr(a.s.decode("utf-8", errors="replace"))
    if t == AttributeProto.INTS:
        return DenseArrayBase.from_list(i64, list(a.ints))
    if t == AttributeProto.FLOATS:
        return DenseArrayBase.from_list(f32, list(a.floats))
    if t == AttributeProto.STRINGS:
        return ArrayAttr([StringAttr(s.decode("utf-8", errors="replace")) for s in a.strings])
    if t == AttributeProto.TENSOR:
        return tensor_attr(a.t, base, f"{what}, attribute '{a.name}'")
    if t == AttributeProto.TYPE_PROTO:
        return mlir_type(a.tp, f"{what}, attribute '{a.name}'")
    kind = AttributeProto.AttributeType.Name(t)
    raise ForgeOptError(f"{what}: attribute '{a.name}' of kind {kind} is not supported")
