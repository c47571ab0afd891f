"""A device's parameters on disk, written as they are made: each block is
appended to `weights.bin` and `weights.onnx` indexes them as ONNX
external data, so that no device's weights are ever in memory at once.

A block of a model weight is read from the mapped external-data file a
band of rows at a time, each band's pages released once written: a block
of columns reads every row of its weight. A block of rows, and a whole
weight, the kernel copies from that file (`os.copy_file_range`)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import onnx

from forge_opt.files import save_onnx
from forge_opt.frontends.onnx.values import mapped_span, release_mapped_pages
from forge_opt.interpreters.forge import laid_out
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

    def read_together(self, other: WeightBlock) -> bool:
        """Whether `other` is another device's block of the same weight,
        along the same axis, and both are read from it a band of rows
        at a time (blocks of columns)."""
        return (
            self.axis == other.axis != 0 and self.x.flags.c_contiguous and self.x.ndim > 0
            and self.x.__array_interface__ == other.x.__array_interface__
        )

    def columns(self) -> tuple[slice, ...]:
        n = self.shape[self.axis]
        return (slice(None),) * self.axis + (slice(self.rank * n, (self.rank + 1) * n),)

    def bands(self) -> Iterator[np.ndarray]:
        """The block as contiguous arrays of consecutive rows (its first
        axis), each valid until the next is asked for."""
        x, axis = self.x, self.axis
        if x.ndim == 0 or not x.flags.c_contiguous:  # not a weight's bytes: numpy's way
            yield np.ascontiguousarray(block(x, axis, self.rank, self.devices))
            return
        if axis == 0:
            n = self.shape[0]
            x = x[self.rank * n:(self.rank + 1) * n]
        cols = self.columns()
        for rows in _row_bands(x):
            yield rows if axis == 0 else np.ascontiguousarray(rows[cols])

    def rows(self) -> np.ndarray | None:
        """A view of the block, where it is consecutive rows of the weight's
        bytes (a block of rows); None otherwise."""
        if self.axis != 0 or self.x.ndim == 0 or not self.x.flags.c_contiguous:
            return None
        n = self.shape[0]
        return self.x[self.rank * n:(self.rank + 1) * n]

    def array(self) -> np.ndarray:
        """The block's values: a view where it is consecutive rows (not read
        until used), else a copy."""
        rows = self.rows()
        if rows is not None:
            return rows
        out = np.empty(self.shape, self.dtype)
        at = 0
        for band in self.bands():
            out[at:at + len(band)] = band
            at += len(band)
        return out


def _row_bands(x: np.ndarray) -> Iterator[np.ndarray]:
    """`x` a band of rows at a time, each band's pages (of a mapped file)
    released once the next is asked for."""
    step = max(1, BAND_BYTES // max(1, x[0].nbytes if len(x) else 1))
    for r in range(0, x.shape[0], step):
        rows = x[r:r + step]
        yield rows
        release_mapped_pages(rows)


def add_together(files: list[WeightFile], names: list[str], blocks: list[WeightBlock],
                 keep: list[bool]) -> list[np.ndarray | None]:
    """Several devices' blocks of one weight, each appended to its device's
    file under its name; the values of those to `keep`. Blocks of columns
    read every row of the weight, so each band of rows is read once for
    all of them, not once a device."""
    if len(blocks) < 2 or not all(blocks[0].read_together(b) for b in blocks[1:]):
        out = []
        for f, name, b, k in zip(files, names, blocks, keep):
            data = b.array() if k else b
            f.add(name, data)
            out.append(data if k else None)
        return out
    kept = [np.empty(b.shape, b.dtype) if k else None for b, k in zip(blocks, keep)]
    for f, name, b in zip(files, names, blocks):
        f.index(name, b.shape, b.dtype, b.nbytes)
    at = 0
    for rows in _row_bands(blocks[0].x):
        for f, b, out in zip(files, blocks, kept):
            band = np.ascontiguousarray(rows[b.columns()])
            f.write(_bytes(band))
            if out is not None:
                out[at:at + len(band)] = band
        at += len(rows)
    return kept


def value_of(data: np.ndarray | WeightBlock) -> np.ndarray:
    return data.array() if isinstance(data, WeightBlock) else data


@dataclass
class Place:
    """Where a parameter is in `weights.bin`, and its index entry."""

    offset: int
    dtype: np.dtype
    tensor: onnx.TensorProto

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.tensor.dims)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


class WeightFile:
    """`dev/weights.bin` and its index, `dev/weights.onnx` (on close).

    Each parameter's bytes go at the offset its index entry gives. The
    kernel's copies (`_copy_mapped`) run on a thread of their own while this
    one gathers and writes the next blocks: on 2 cores the two overlap
    (`benchmarks/README.md`)."""

    def __init__(self, dev: Path):
        self.dev = dev
        (dev / "weights.bin").unlink(missing_ok=True)  # never written through a link to an older file
        self.fd = os.open(dev / "weights.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.end = 0  # where the next bytes go
        self.copies: list[Future] = []  # the kernel's copies under way
        self.tensors: list[onnx.TensorProto] = []
        self.names: dict[object, str] = {}  # the value a block is of, its name
        self.small: dict[tuple, list[str]] = {}  # small blocks written, by weight, type and shape
        self.digests: dict[str, bytes] = {}  # the content digests of those taken so far
        self.places: dict[str, Place] = {}  # each parameter written
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
        return name in self.places

    def add(self, name: str, data: np.ndarray | WeightBlock) -> str:
        """Append `data` as parameter `name`, unless written already; the
        name it is under. A small block equal to one written already (the
        same constant reached twice) is that one."""
        if name in self.places:
            return name
        if data.nbytes <= SAME_BLOCK_BYTES:
            data = np.asarray(value_of(data), order="C")  # (ascontiguousarray makes a scalar 1-d)
            same = self._written_before(name, data)
            if same is not None:
                return same
        self.index(name, data.shape, data.dtype, data.nbytes)
        whole = data.rows() if isinstance(data, WeightBlock) else np.asarray(data, order="C")
        if whole is None:  # a block of columns: read a band of rows at a time
            assert isinstance(data, WeightBlock)
            for band in data.bands():
                self.write(_bytes(band))
        elif not self._copy_mapped(whole):
            self.write(_bytes(whole))
        return name

    def write(self, data: memoryview) -> None:
        """Append `data`."""
        _write_at(self.fd, data, self.end)
        self.end += data.nbytes

    def _copy_mapped(self, view: np.ndarray) -> bool:
        """Append `view`'s bytes by the kernel's copy from the weight file it
        is over (faster than writing them from the mapping, and never in this
        process: `benchmarks/README.md`), on the copying thread; False where
        `view` is over no weight file (the caller writes it)."""
        span = mapped_span(view)
        if span is None or not hasattr(os, "copy_file_range"):
            return False
        self.copies.append(_copier().submit(_copy_range, span, view, self.fd, self.end))
        self.end += view.nbytes
        return True

    def settle(self) -> None:
        """Wait for the kernel's copies under way; the first one's error, if one failed."""
        copies, self.copies = self.copies, []
        for copy in copies:
            copy.result()

    def _written_before(self, name: str, data: np.ndarray) -> str | None:
        """A small block of the same weight, type and shape written already
        with `data`'s content; None after noting `data` as written. Digests
        are taken only when two such blocks meet (rarely: most weights
        have one block a device), the earlier one read back for it."""
        key = (name.rsplit(".shard", 1)[0], data.dtype.str, data.shape)
        earlier = self.small.setdefault(key, [])
        if earlier:
            digest = _digest(data)
            for other in earlier:
                if other not in self.digests:
                    self.digests[other] = _digest(self._read(self.places[other]))
                if self.digests[other] == digest:
                    return other
            self.digests[name] = digest
        earlier.append(name)
        return None

    def index(self, name: str, shape: tuple[int, ...], dtype: np.dtype, nbytes: int) -> None:
        """Parameter `name` as the next `nbytes` the file is given."""
        t = onnx.TensorProto()
        t.name = name
        t.data_type = onnx.helper.np_dtype_to_tensor_dtype(dtype)
        t.dims.extend(shape)
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", "weights.bin"), ("offset", str(self.nbytes)), ("length", str(nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.places[name] = Place(self.nbytes, np.dtype(dtype), t)
        self.nbytes += nbytes
        self.tensors.append(t)

    def _read(self, place: Place) -> np.ndarray:
        """A parameter's bytes as written, read back from the file."""
        self.settle()
        count = int(np.prod(place.shape, dtype=np.int64))
        data = np.fromfile(self.dev / "weights.bin", dtype=place.dtype, count=count, offset=place.offset)
        return data.reshape(place.shape)

    def lay_out(self, name: str, steps) -> None:
        """Rewrite parameter `name` in place as its layout `steps` leave it
        (the same bytes in another order): read back, laid out, written
        over itself. One parameter in memory at a time."""
        place = self.places[name]
        out = np.asarray(laid_out(self._read(place), steps), order="C")
        _write_at(self.fd, _bytes(out), place.offset)
        del place.tensor.dims[:]
        place.tensor.dims.extend(out.shape)

    def close(self) -> None:
        try:
            self.settle()
        finally:
            os.close(self.fd)
        graph = onnx.helper.make_graph([], "weights", [], [], self.tensors)
        save_onnx(onnx.helper.make_model(graph), self.dev / "weights.onnx")


@cache
def _copier() -> ThreadPoolExecutor:
    """The thread the kernel's copies run on, made at the first."""
    return ThreadPoolExecutor(1, thread_name_prefix="weight-copy")


def _copy_range(span: tuple[int, int], view: np.ndarray, fd: int, at: int) -> None:
    """`view`'s bytes at `at` in `fd`, by the kernel's copy from `span` (the
    weight file and offset it is over); what the file system refuses to copy
    is written from the mapping, a band at a time, each band's pages
    released once written."""
    source, offset = span
    done = 0
    try:
        while done < view.nbytes:
            n = os.copy_file_range(source, fd, view.nbytes - done, offset + done, at + done)
            if n == 0:  # (the source shorter than its index said: write what the mapping holds)
                break
            done += n
    except OSError:
        pass
    for band in _row_bands(view.reshape(-1).view(np.uint8)[done:]):
        _write_at(fd, _bytes(band), at + done)
        done += band.nbytes


def _write_at(fd: int, data: memoryview, at: int) -> None:
    """All of `data` (bytes) at offset `at` of `fd`."""
    while len(data):
        n = os.pwrite(fd, data, at)
        data, at = data[n:], at + n


def _digest(data: np.ndarray) -> bytes:
    return hashlib.sha1(_bytes(data)).digest()


def _bytes(data: np.ndarray) -> memoryview:
    """A contiguous array's bytes, without a copy (narrow types such as
    bfloat16 have no buffer format of their own)."""
    return data.reshape(-1).view(np.uint8).data
