"""numpy kernels of Forge's ops, shared by the `forge` dialect's interpreter
and the stand-in `forge.op` namespace, so both compute the same numbers."""

from __future__ import annotations

import numpy as np


def index(x: np.ndarray, dim: int, start: int, stop: int, stride: int) -> np.ndarray:
    """Forge's Index: `t.slice(dim, start, stop, stride)`."""
    where = [slice(None)] * x.ndim
    where[dim] = slice(start, stop, stride)
    return x[tuple(where)]
