"""Forge's tensor manipulation functions (forge/forge/op/tm.py,
eltwise_nary.py; forge/csrc/ops/op_<name>.cpp): their records, checks,
shapes and goldens."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.forge_functions.record import (
    AB,
    REQUIRED,
    A,
    Call,
    ForgeFunction,
    Shape,
    axis,
    dim,
    dim_error,
    is_int,
    promoted,
    rule,
)

# -- Index ---------------------------------------------------------------------------


@rule("index-start", "dim in range; `start < size` (stop=None is start+1; a negative stop adds the size)",
      "forge/forge/op/tm.py Index; forge/csrc/ops/op_index.cpp")
def _index_start(call: Call) -> str | None:
    d = dim(call)
    if isinstance(d, str):
        return d
    size, start = call.shape(0)[d], call.keywords["start"]
    if not is_int(start) or not 0 <= start < size:
        return f"start {start} must be < {size} (the size of dim {call.keywords['dim']})"
    return None


def index_stop(call: Call) -> Any:
    """Index's stop as Forge resolves it: None is start + 1, a negative stop adds the size."""
    start, stop = call.keywords["start"], call.keywords["stop"]
    stop = start + 1 if stop is None else stop
    if is_int(stop) and stop < 0:
        stop += call.shape(0)[call.keywords["dim"]]
    return stop


@rule("index-stop", "`start <= stop <= size` after stop=None and negative stops are resolved",
      "forge/forge/op/tm.py Index")
def _index_stop(call: Call) -> str | None:
    size, stop = call.shape(0)[call.keywords["dim"]], index_stop(call)
    if not is_int(stop) or not stop <= size:
        return f"stop {stop} must be <= {size}"
    return None


@rule("index-stride", "`0 < stride <= size`; a negative stride only on a dim of size 1", "forge/forge/op/tm.py Index")
def _index_stride(call: Call) -> str | None:
    size, stride = call.shape(0)[call.keywords["dim"]], call.keywords["stride"]
    if not is_int(stride) or stride == 0:
        return f"stride {stride!r} must be a non-zero int"
    if stride < 0 and size != 1:
        return "a negative stride is only allowed on a dimension of size 1"
    if stride > max(size, 1):
        return f"stride {stride} must be <= {size}"
    return None


def _index_shape(call: Call) -> Shape:
    out = list(call.shape(0))
    out[axis(call)] = len(range(call.keywords["start"], index_stop(call), call.keywords["stride"]))
    return tuple(out)


def _index(x, dim, start, stop=None, stride=1):
    """Forge's Index: `t.slice(dim, start, stop, stride)`."""
    where = [slice(None)] * x.ndim
    where[dim] = slice(start, start + 1 if stop is None else stop, stride)
    return x[tuple(where)]


# -- Transpose, Reshape, Broadcast, Repeat, Unsqueeze, Squeeze -------------------------------


@rule("transpose-dims", "two int dims, in range for the rank and distinct",
      "forge/forge/op/tm.py Transpose; forge/csrc/ops/op_transpose.cpp")
def _transpose_dims(call: Call) -> str | None:
    dims = []
    for k in ("dim0", "dim1"):
        d = dim(call, k)
        if isinstance(d, str):
            return d
        dims.append(d)
    if dims[0] == dims[1]:
        return f"dim0 and dim1 name the same dimension {dims[0]}"
    return None


def _transpose_shape(call: Call) -> Shape:
    out = list(call.shape(0))
    a, b = axis(call, "dim0"), axis(call, "dim1")
    out[a], out[b] = out[b], out[a]
    return tuple(out)


@rule("reshape-volume", "the new shape has the same volume, with at most one -1, given as a list",
      "forge/forge/op/tm.py Reshape")
def _reshape_volume(call: Call) -> str | None:
    shape = call.keywords["shape"]
    if not isinstance(shape, list) or not all(is_int(d) for d in shape):
        return f"shape must be a list of ints, got {shape!r}"
    if shape.count(-1) > 1:
        return f"shape {shape} has more than one -1"
    volume = math.prod(call.shape(0))
    known = math.prod(d for d in shape if d != -1)
    if (-1 in shape and (known == 0 or volume % known)) or (-1 not in shape and known != volume):
        return f"cannot reshape {list(call.shape(0))} ({volume} elements) into {shape}"
    return None


def _reshape_shape(call: Call) -> Shape:
    target = list(call.keywords["shape"])
    if -1 in target:  # rule reshape-volume: one -1 at most, and it divides
        target[target.index(-1)] = math.prod(call.shape(0)) // math.prod(d for d in target if d != -1)
    return tuple(target)


@rule("broadcast-dim", "one dim, in range after unsqueezing, whose size is 1 or already the target",
      "forge/csrc/ops/op_broadcast.cpp")
def _broadcast_dim(call: Call) -> str | None:
    d = call.keywords["dim"]
    if not is_int(d) or not is_int(call.keywords["shape"]):
        return "dim and shape must be ints"
    shape = call.shape(0)
    rank = max(len(shape), -d if d < 0 else d + 1)
    full = (1,) * (rank - len(shape)) + tuple(shape)
    if full[d] not in (1, call.keywords["shape"]):
        return f"dim {d} has size {full[d]}, which cannot broadcast to {call.keywords['shape']}"
    return None


def _broadcast_shape(call: Call) -> Shape:
    shape, d = call.shape(0), call.keywords["dim"]
    rank = max(len(shape), -d if d < 0 else d + 1)  # leading dims are unsqueezed first
    out = [1] * (rank - len(shape)) + list(shape)
    out[d] = call.keywords["shape"]
    return tuple(out)


def _broadcast(x, dim, shape):
    needed = -dim if dim < 0 else dim + 1
    while x.ndim < needed:
        x = x[np.newaxis]
    target = list(x.shape)
    target[dim] = shape
    return np.broadcast_to(x, target).copy()


def _repeat_shape(call: Call) -> Shape:
    repeats, shape = list(call.keywords["repeats"]), call.shape(0)
    rank = max(len(repeats), len(shape))
    repeats = [1] * (rank - len(repeats)) + repeats
    padded = [1] * (rank - len(shape)) + list(shape)
    return tuple(d * r for d, r in zip(padded, repeats))


@rule("unsqueeze-dim", "one dim in range for the result's rank", "forge/csrc/ops/op_unsqueeze.cpp")
def _unsqueeze_dim(call: Call) -> str | None:
    return dim_error(dim(call, rank=call.rank + 1))


def _unsqueeze_shape(call: Call) -> Shape:
    out = list(call.shape(0))
    out.insert(axis(call, rank=call.rank + 1), 1)
    return tuple(out)


@rule("squeeze-dim", "one dim in range, of size 1", "forge/csrc/ops/op_squeeze.cpp")
def _squeeze_dim(call: Call) -> str | None:
    d = dim(call)
    if isinstance(d, str):
        return d
    if call.shape(0)[d] != 1:
        return f"dim {call.keywords['dim']} has size {call.shape(0)[d]}, not 1"
    return None


def _squeeze_shape(call: Call) -> Shape:
    out = list(call.shape(0))
    del out[axis(call)]
    return tuple(out)


# -- ConstantPad and Pad -------------------------------------------------------------------


@rule("constantpad-unusable", "never emitted: the wrapper passes an extra `attrs=[]`, so the C++ op gets 3 attributes "
      "and asserts 2", "forge/forge/op/tm.py ConstantPad; forge/csrc/ops/op_constant_pad.cpp")
def _constant_pad(call: Call) -> str | None:
    return "every Python call fails in Forge (3 attributes where the op asserts 2); use Pad"


@rule("pad-len", "2 or 4 non-negative entries in F.pad order (left, right[, top, bottom]) on the last dims; mode "
      "constant, replicate or reflect", "forge/forge/op/tm.py Pad; forge/csrc/ops/op_pad.cpp")
def _pad_len(call: Call) -> str | None:
    pad = call.keywords["pad"]
    if not isinstance(pad, (list, tuple)) or len(pad) not in (2, 4) or not all(is_int(p) for p in pad):
        return f"pad must be 2 or 4 ints, got {pad!r}"
    if any(p < 0 for p in pad):
        return f"pad {list(pad)} has a negative entry"
    if len(pad) // 2 > call.rank:
        return f"pad {list(pad)} pads {len(pad) // 2} dims of a rank-{call.rank} tensor"
    if call.keywords["mode"] not in ("constant", "replicate", "reflect"):
        return f"mode {call.keywords['mode']!r} must be constant, replicate or reflect"
    return None


def _pad_shape(call: Call) -> Shape:
    out, pad = list(call.shape(0)), call.keywords["pad"]
    last = -2 if call.keywords["channel_last"] else -1  # channel-last pads the dims before the channels
    for i in range(len(pad) // 2):
        out[last - i] += pad[2 * i] + pad[2 * i + 1]
    return tuple(out)


def _pad(x, pad, mode="constant", value=0.0, channel_last=False):
    """F.pad order: (left, right[, top, bottom]) on the last dims (op_pad.cpp)."""
    if channel_last:
        x = np.moveaxis(x, -1, -3)
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        out = np.pad(x, pairs, mode="constant", constant_values=value)
    elif mode == "replicate":
        out = np.pad(x, pairs, mode="edge")
    elif mode == "reflect":
        out = np.pad(x, pairs, mode="reflect")
    else:
        raise ValueError(f"Pad: no mode '{mode}'")
    return np.moveaxis(out, -3, -1) if channel_last else out


# -- AdvIndex and Concatenate ------------------------------------------------------------


@rule("advindex-indices", "integer indices of rank 1 or 2, dim in range", "forge/csrc/ops/op_adv_index.cpp")
def _adv_index_indices(call: Call) -> str | None:
    if len(call.shape(1)) not in (1, 2) or np.dtype(call.dtypes[1]).kind not in "iu":
        return "the indices must be an integer tensor of rank 1 or 2"
    return dim_error(dim(call))


def _adv_index_shape(call: Call) -> Shape:
    out = list(call.shape(0))
    out[axis(call)] = math.prod(call.shape(1))  # 2-D indices are flattened
    return tuple(out)


@rule("concat-dims", "axis in range; every operand of the same rank and equal off the axis",
      "forge/forge/op/eltwise_nary.py Concatenate; forge/csrc/ops/op_concatenate.cpp")
def _concat_dims(call: Call) -> str | None:
    operand_shapes = [call.shape(i) for i in range(len(call.shapes))]
    ranks = {len(s) for s in operand_shapes}
    if len(ranks) != 1:
        return f"operands have different ranks {sorted(ranks)}"
    a = dim(call, "axis")
    if isinstance(a, str):
        return a
    rest = {tuple(d for i, d in enumerate(s) if i != a) for s in operand_shapes}
    if len(rest) != 1:
        return f"operand shapes {[list(s) for s in operand_shapes]} differ off axis {call.keywords['axis']}"
    return None


def _concat_shape(call: Call) -> Shape:
    return tuple(shapes.concat([call.shape(i) for i in range(len(call.shapes))], axis(call, "axis")))


FUNCTIONS = (
    ForgeFunction("Transpose", A, _transpose_shape, lambda x, dim0, dim1: np.swapaxes(x, dim0, dim1),
                  keywords=(("dim0", REQUIRED), ("dim1", REQUIRED)), rules=(_transpose_dims,)),
    ForgeFunction("Reshape", A, _reshape_shape, lambda x, shape: x.reshape(shape), keywords=(("shape", REQUIRED),),
                  rules=(_reshape_volume,)),
    ForgeFunction("Index", A, _index_shape, _index,
                  keywords=(("dim", REQUIRED), ("start", REQUIRED), ("stop", None), ("stride", 1)),
                  keyword_types=(("stride", "int"),),  # one step, not one per spatial dim
                  rules=(_index_start, _index_stop, _index_stride)),
    ForgeFunction("Broadcast", A, _broadcast_shape, _broadcast, keywords=(("dim", REQUIRED), ("shape", REQUIRED)),
                  keyword_types=(("shape", "int"),),  # one dim's new size, not a shape
                  rules=(_broadcast_dim,)),
    ForgeFunction("Repeat", A, _repeat_shape, lambda x, repeats: np.tile(x, repeats),
                  keywords=(("repeats", REQUIRED),)),
    ForgeFunction("Unsqueeze", A, _unsqueeze_shape,
                  lambda x, dim: np.expand_dims(x, dim if dim >= 0 else x.ndim + 1 + dim),
                  keywords=(("dim", REQUIRED),), rules=(_unsqueeze_dim,)),
    ForgeFunction("Squeeze", A, _squeeze_shape, lambda x, dim: np.squeeze(x, axis=dim),
                  keywords=(("dim", REQUIRED),), rules=(_squeeze_dim,)),
    # ConstantPad cannot be called from Python (rule constantpad-unusable); Pad is emitted instead
    ForgeFunction("ConstantPad", A, lambda call: tuple(shapes.pad(call.shape(0), call.keywords["padding"])), None,
                  keywords=(("padding", REQUIRED), ("value", 0.0)), float_keywords=("value",),
                  rules=(_constant_pad,)),
    ForgeFunction("Pad", A, _pad_shape, _pad,
                  keywords=(("pad", REQUIRED), ("mode", "constant"), ("value", 0.0), ("channel_last", False)),
                  float_keywords=("value",), rules=(_pad_len,)),
    ForgeFunction("AdvIndex", AB, _adv_index_shape,
                  lambda a, b, dim=0: np.take(a, b.reshape(-1).astype(np.int64), axis=dim),
                  keywords=(("dim", 0),), rules=(_adv_index_indices,)),
    ForgeFunction("Concatenate", (("operands", "variadic"),), _concat_shape,
                  lambda *operands, axis: np.concatenate(operands, axis=axis), promoted,
                  keywords=(("axis", REQUIRED),), keyword_only=True, rules=(_concat_dims,)),
)
