"""Load an ONNX file without parsing its weights.

`onnx.load` copies every initializer's bytes into protobuf and again into
Python when `raw_data` is read: for a weight-heavy model that is most of the
import. Here the file is memory-mapped and its protobuf wire format walked
just deep enough (ModelProto.graph -> GraphProto.initializer ->
TensorProto.raw_data) to leave large `raw_data` fields out of the message
that protobuf parses; each constant's elements attribute is a view of its
bytes in the map.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from onnx import ModelProto

_MODEL_GRAPH = 7  # ModelProto.graph
_GRAPH_INITIALIZER = 5  # GraphProto.initializer
_TENSOR_NAME = 8  # TensorProto.name
_TENSOR_RAW_DATA = 9  # TensorProto.raw_data
_LENGTH_DELIMITED = 2

#: raw_data up to this size stays in the parsed message (shape inference
#: reads small constants; copying them is free).
KEEP_INLINE_BYTES = 1 << 16


class WeightMap:
    """Where each large initializer's bytes are in the mapped file."""

    def __init__(self, data: mmap.mmap | bytes, spans: dict[str, tuple[int, int]]):
        self._data = data
        self.spans = spans

    def __contains__(self, name: str) -> bool:
        return name in self.spans

    def read(self, name: str) -> memoryview:
        """A read-only view of the initializer's bytes in the mapped file:
        no copy, and pages are read only when something looks at them."""
        start, length = self.spans[name]
        return memoryview(self._data)[start : start + length]


def _varint(buf, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf, start: int, end: int):
    """(field number, wire type, field start, payload start, payload end)."""
    pos = start
    while pos < end:
        field_start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(buf, pos)
            yield number, wire, field_start, field_start, pos
            continue
        if wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == _LENGTH_DELIMITED:
            length, payload = _varint(buf, pos)
            pos = payload + length
            yield number, wire, field_start, payload, pos
            continue
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, field_start, field_start, pos


def _tensor(buf, start: int, end: int, spans: dict) -> bytes:
    """The TensorProto without a large raw_data; its span recorded by name."""
    out = bytearray()
    name, raw = None, None
    for number, wire, field_start, payload, field_end in _fields(buf, start, end):
        if number == _TENSOR_NAME and wire == _LENGTH_DELIMITED:
            name = bytes(buf[payload:field_end]).decode("utf-8")
        if number == _TENSOR_RAW_DATA and wire == _LENGTH_DELIMITED and field_end - payload > KEEP_INLINE_BYTES:
            raw = (payload, field_end - payload)
            continue
        out += buf[field_start:field_end]
    if raw is not None and name is not None:
        spans[name] = raw
    elif raw is not None:  # an unnamed tensor cannot be found again: keep it
        return bytes(buf[start:end])
    return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LENGTH_DELIMITED) + _encode_varint(len(payload)) + payload


def _graph(buf, start: int, end: int, spans: dict) -> bytes:
    out = bytearray()
    for number, wire, field_start, payload, field_end in _fields(buf, start, end):
        if number == _GRAPH_INITIALIZER and wire == _LENGTH_DELIMITED:
            out += _length_delimited(number, _tensor(buf, payload, field_end, spans))
        else:
            out += buf[field_start:field_end]
    return bytes(out)


def load_without_weights(path: Path) -> tuple[ModelProto, WeightMap]:
    """The model with large initializer bytes left in the file, and where
    they are. Raises ValueError (or protobuf's DecodeError) on a bad file."""
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if path.stat().st_size else b""
    view = memoryview(data)
    spans: dict[str, tuple[int, int]] = {}
    out = bytearray()
    for number, wire, field_start, payload, field_end in _fields(view, 0, len(view)):
        if number == _MODEL_GRAPH and wire == _LENGTH_DELIMITED:
            out += _length_delimited(number, _graph(view, payload, field_end, spans))
        else:
            out += view[field_start:field_end]
    model = ModelProto()
    model.ParseFromString(bytes(out))
    del view
    return model, WeightMap(data, spans)


def overwritten_input(output: str | os.PathLike, model: str | os.PathLike) -> str | None:
    """The file of the model `output` would replace, if any: the model
    itself or one of its external data files, by any path or hard link
    (what a compiler reads is never what it writes). The model is read
    without its weights' bytes."""
    try:
        if not os.path.isfile(output) or not os.path.isfile(model):
            return None
        if os.path.samefile(output, model):
            return str(model)
        if Path(model).suffix != ".onnx":
            return None
        proto, _ = load_without_weights(Path(model))
    except Exception:  # an unreadable file, or protobuf's errors (no common base): a model that does not parse
        return None  # names no data files, and its reader says why
    folder = Path(model).resolve().parent
    for t in proto.graph.initializer:
        for entry in t.external_data:
            data = folder / entry.value
            if entry.key == "location" and data.is_file() and os.path.samefile(output, data):
                return str(data)
    return None
