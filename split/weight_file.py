"""A device's parameters on disk, written as they are made: each block is
appended to `weights.bin` and `weights.onnx` indexes them as ONNX
external data, so that no device's weights are ever in memory at once.

A block of a model weight is read from the mapped external-data file a
band of rows at a time, each band's pages released once written: a block
of columns reads every row of its weight."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx

from forge_opt.frontends.onnx import release_mapped_pages
from forge_opt.interpreters.shard import block

#: bytes of a weight read at once when taking a device's block of it
BAND_BYTES = 8 << 20

#: blocks up to this size are compared by content, so equal ones are written once
SAME_BLOCK_BYTES = 1 << 20


class WeightBlock:
    """Device `rank`'s block of `x` along `axis`, not read yet."""

    def __init__(self, x: np.ndarray, axis: int, rank: int, devices: int):
        self.x, self.axis, self.rank, self.devices = x, axis, rank, devices
        shape = list(x.shape)
        shape[axis] //= devices
        self.shape = tuple(shape)
        self.dtype = x.dtype
        self.nbytes = int(np.prod(shape, dtype=np.int64)) * x.dtype.itemsize

    def bands(self) -> Iterator[np.ndarray]:
        """The block as contiguous arrays of consecutive rows (its first
        axis), each valid until the next is asked for."""
        x, axis = self.x, self.axis
        if x.ndim == 0 or not x.flags.c_contiguous:  # not a weight's bytes: numpy's way
            yield np.ascontiguousarray(block(x, axis, self.rank, self.devices))
            return
        n = self.shape[axis]
        if axis == 0:
            x = x[self.rank * n:(self.rank + 1) * n]
        cols = (slice(None),) * axis + (slice(self.rank * n, (self.rank + 1) * n),)
        step = max(1, BAND_BYTES // max(1, x[0].nbytes if len(x) else 1))
        for r in range(0, x.shape[0], step):
            rows = x[r:r + step]
            yield rows if axis == 0 else np.ascontiguousarray(rows[cols])
            release_mapped_pages(rows)

    def array(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        at = 0
        for band in self.bands():
            out[at:at + len(band)] = band
            at += len(band)
        return out


def value_of(data: np.ndarray | WeightBlock) -> np.ndarray:
    return data.array() if isinstance(data, WeightBlock) else data


class WeightFile:
    """`dev/weights.bin` and its index, `dev/weights.onnx` (on close)."""

    def __init__(self, dev: Path):
        self.dev = dev
        self.file = open(dev / "weights.bin", "wb")  # noqa: SIM115 (closed by close())
        self.tensors: list[onnx.TensorProto] = []
        self.names: dict[object, str] = {}  # the value a block is of, its name
        self.written: set[str] = set()
        self.digests: dict[tuple, str] = {}  # small blocks written, by weight and content
        self.nbytes = 0

    def claim(self, key: object, base: str) -> str:
        """The parameter name of the block of value `key`: the weight's
        name, suffixed where another block already has it."""
        if key not in self.names:
            taken = set(self.names.values())
            name, n = f"{base}.shard", 0
            while name in taken:
                n += 1
                name = f"{base}.shard{n}"
            self.names[key] = name
        return self.names[key]

    def __contains__(self, name: str) -> bool:
        return name in self.written

    def add(self, name: str, data: np.ndarray | WeightBlock) -> str:
        """Append `data` as parameter `name`, unless written already; the
        name it is under. A small block equal to one written already (the
        same constant reached twice) is that one."""
        if name in self.written:
            return name
        if data.nbytes <= SAME_BLOCK_BYTES:
            data = np.asarray(value_of(data), order="C")  # (ascontiguousarray makes a scalar 1-d)
            digest = (name.rsplit(".shard", 1)[0], data.dtype.str, data.shape, hashlib.sha1(_bytes(data)).digest())
            if digest in self.digests:
                return self.digests[digest]
            self.digests[digest] = name
        t = onnx.TensorProto()
        t.name = name
        t.data_type = onnx.helper.np_dtype_to_tensor_dtype(data.dtype)
        t.dims.extend(data.shape)
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(self.nbytes)), ("length", str(data.nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        for band in data.bands() if isinstance(data, WeightBlock) else [np.asarray(data, order="C")]:
            self.file.write(_bytes(band))
        self.nbytes += data.nbytes
        self.tensors.append(t)
        self.written.add(name)
        return name

    def close(self) -> None:
        self.file.close()
        graph = onnx.helper.make_graph([], "weights", [], [], self.tensors)
        onnx.save_model(onnx.helper.make_model(graph), self.dev / "weights.onnx")


def _bytes(data: np.ndarray) -> np.ndarray:
    """A contiguous array's bytes, without a copy (narrow types such as
    bfloat16 have no buffer format of their own)."""
    return data.reshape(-1).view(np.uint8)
