"""Every file forge-opt writes is written whole or not at all, and never
through a link.

A file is written under a temporary name in its own folder and renamed over
the target: a failed compile leaves the user's file as it was, a reader
never sees half a file, and a name that was a hard link to another file
(an older plan's device module, a user's external data) is replaced, not
written through. A link is made only after the name it takes is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np


@contextlib.contextmanager
def replacing(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file object for `path`'s new content, open on a temporary name in
    the same folder; renamed over `path` when the block ends without an
    error, removed when it raises."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike, text: str) -> None:
    with replacing(path, "w") as f:
        f.write(text)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with replacing(path, "wb") as f:
        f.write(data)


def save_npz(path: str | os.PathLike, arrays: Mapping[str, np.ndarray], mark: bytes = b"") -> None:
    """`arrays` as an .npz file; `mark`, if given, as the zip's comment
    (`marked` reads it), so a later write can tell the file for its own."""
    with replacing(path, "w+b") as f:
        np.savez(f, **arrays)  # pyright: ignore[reportArgumentType]  (numpy's stub reads names as flags)
        if mark:
            f.seek(0)
            with zipfile.ZipFile(f, "a") as z:
                z.comment = mark


def marked(path: str | os.PathLike, mark: bytes) -> bool:
    """Whether `path` is an .npz file `save_npz` wrote with `mark`."""
    try:
        with zipfile.ZipFile(path) as z:
            return z.comment == mark
    except (OSError, zipfile.BadZipFile):
        return False


#: the entry of an arrays file naming the element types numpy's format cannot hold
_DTYPES = "__dtypes__"


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, np.ndarray]) -> None:
    """Arrays passed between processes or runs, each keeping its element
    type: one numpy's .npz cannot hold (ml_dtypes' bfloat16) goes as its
    bits, its type named in an entry of its own (`load_arrays`)."""
    kinds = {name: a.dtype.name for name, a in arrays.items() if a.dtype.kind == "V"}
    stored = {name: a.view(f"u{a.dtype.itemsize}") if name in kinds else a for name, a in arrays.items()}
    if kinds:
        stored[_DTYPES] = np.array(json.dumps(kinds))
    save_npz(path, stored)


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """What `save_arrays` wrote."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 and the other narrow types with numpy)

    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files if name != _DTYPES}
        kinds = json.loads(str(data[_DTYPES])) if _DTYPES in data.files else {}
    return {name: a.view(np.dtype(kinds[name])) if name in kinds else a for name, a in arrays.items()}


def save_onnx(model, path: str | os.PathLike) -> None:
    with replacing(path, "wb") as f:
        f.write(model.SerializeToString())


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """`target` as a hard link to `source` (a copy where links cannot be
    made); whatever `target` named before is unlinked first, never written."""
    source, target = Path(source), Path(target)
    if target.exists() or target.is_symlink():
        if target.exists() and os.path.samefile(source, target):
            return
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        with replacing(target) as f, open(source, "rb") as s:
            shutil.copyfileobj(s, f)


def remove_tree_entries(folder: Path, names: list[str]) -> None:
    """Remove these entries of `folder` (files or folders), those present."""
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
