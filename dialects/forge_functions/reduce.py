"""Forge's reductions (forge/forge/op/reduce.py, tm.py CumSum;
forge/csrc/ops/op_reduce_*.cpp, op_argmax.cpp, op_cumsum.cpp): their
records, checks, shapes, element types and goldens."""

from __future__ import annotations

import numpy as np

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_functions.record import (
    REQUIRED,
    A,
    Call,
    ForgeFunction,
    Shape,
    axis,
    dim,
    dim_error,
    is_int,
    rule,
    same_shape,
)


@rule("reduce-dim", "one int dim with -4 <= dim <= 3, in range for the rank",
      "forge/forge/op/reduce.py; forge/csrc/ops/op_common.cpp reduce_ops_shape")
def _reduce_dim(call: Call) -> str | None:
    d = call.keywords["dim"]
    if not is_int(d) or not -4 <= d <= 3:
        return f"dim {d!r} must be one axis in -4..3"
    return dim_error(dim(call))


def _reduce_shape(call: Call) -> Shape:
    return tuple(shapes.reduce(call.shape(0), [axis(call)], call.keywords["keep_dim"]))


def _argmax_shape(call: Call) -> Shape:
    if call.keywords["dim"] is None:  # over every element
        return (1,) * call.rank if call.keywords["keep_dim"] else ()
    return _reduce_shape(call)


def _reduction(name: str, kernel) -> ForgeFunction:
    return ForgeFunction(name, A, _reduce_shape, kernel, keywords=(("dim", REQUIRED), ("keep_dim", True)),
                         rules=(_reduce_dim,))


FUNCTIONS = (
    _reduction("ReduceSum", lambda x, dim, keep_dim=True: x.sum(axis=dim, keepdims=keep_dim).astype(x.dtype)),
    _reduction("ReduceAvg", lambda x, dim, keep_dim=True: x.mean(axis=dim, keepdims=keep_dim).astype(x.dtype)),
    _reduction("ReduceMax", lambda x, dim, keep_dim=True: x.max(axis=dim, keepdims=keep_dim)),
    ForgeFunction(
        "Argmax", A, _argmax_shape, lambda x, dim=None, keep_dim=False: np.argmax(x, axis=dim, keepdims=keep_dim),
        lambda call: np.dtype(np.int64), keywords=(("dim", None), ("keep_dim", False)),
    ),
    ForgeFunction("CumSum", A, same_shape, lambda x, dim: np.cumsum(x, axis=dim).astype(x.dtype),
                  keywords=(("dim", REQUIRED),)),
)
