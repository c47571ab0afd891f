"""Forge's own checks and golden element types, once, for every `forge.op`
function we emit.

Each rule is read from tt-forge-fe (commit c6f95fba; the Python wrappers in
`forge/forge/op/*.py` and the C++ ops in `forge/csrc/ops/op_*.cpp`, whose
`TT_ASSERT`s run in release builds) and carries its source. Rules look at a
`Call`: operand shapes and dtypes and the keyword values as Python would
pass them. The `forge` dialect's verifier builds a `Call` from the IR, the
stand-in from the arrays and values of a real call, so both reject the same
programs with the same message; `docs/forge_rules.md` is generated from
`RULES`.

`result_dtype` is Forge's golden element type (what `op.eval` returns in
PyTorch): the stand-in's values carry it and the dialect's result types must
equal it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from forge_opt.dtypes import is_float


class ForgeRuleError(Exception):
    """A call Forge itself rejects; the message starts with the rule's id."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs microseconds to build, once per op
class Call:
    """One call of `forge.op.<function>`, as the rules see it."""

    function: str
    shapes: Sequence[tuple[int, ...] | None]  # per operand; None for an absent optional one
    dtypes: Sequence[np.dtype | None]
    keywords: dict[str, Any]  # every keyword, Forge's defaults filled in (ints, lists, dtypes, ...)

    @property
    def rank(self) -> int:
        return len(self.shapes[0] or ())

    def shape(self, i: int) -> tuple[int, ...]:
        """The shape of operand `i`, which the function requires."""
        shape = self.shapes[i]
        assert shape is not None, f"{self.function}: operand {i} is required"
        return shape


@dataclass(frozen=True)
class Rule:
    id: str
    functions: tuple[str, ...]  # empty: every function
    what: str
    source: str
    check: Callable[[Call], str | None]  # the message when the call breaks the rule


RULES: list[Rule] = []


def rule(id: str, functions: Sequence[str], what: str, source: str):
    def register(check: Callable[[Call], str | None]):
        RULES.append(Rule(id, tuple(functions), what, source, check))
        return check

    return register


_BY_FUNCTION: dict[str, list[Rule]] = {}


def rules_for(function: str) -> list[Rule]:
    found = _BY_FUNCTION.get(function)
    if found is None:
        found = _BY_FUNCTION[function] = [r for r in RULES if not r.functions or function in r.functions]
    return found


def check_call(call: Call) -> None:
    """Raise `ForgeRuleError` for the first rule the call breaks."""
    for r in rules_for(call.function):
        message = r.check(call)
        if message is not None:
            raise ForgeRuleError(f"[{r.id}] forge.op.{call.function}: {message} ({r.source})")


# -- element types ----------------------------------------------------------------

# torch dtypes Forge has a DataFormat for, and the one each becomes
# (forge/forge/tensor.py pytorch_dtype_to_forge_dataformat): bool and every
# integer type are held as Int32.
_FORMATS = {
    "float32": "Float32", "float16": "Float16", "bfloat16": "Float16_b",
    "int32": "Int32", "int64": "Int32", "int8": "Int32", "uint8": "Int32", "bool": "Int32",
}
# DataFormat -> the torch dtype Forge computes it in (forge_dataformat_to_pytorch_dtype).
_FORMAT_DTYPES = {"Float32": "float32", "Float16": "float16", "Float16_b": "bfloat16", "Int32": "int32"}


_FORMAT_OF: dict[np.dtype, str | None] = {}


def data_format(dtype: np.dtype) -> str | None:
    """Forge's DataFormat for a dtype, None where Forge has none (float64, int16, ...)."""
    try:
        return _FORMAT_OF[dtype]
    except (KeyError, TypeError):  # TypeError: an unhashable stand-in for a dtype
        fmt = _FORMATS.get(np.dtype(dtype).name)
        if isinstance(dtype, np.dtype):
            _FORMAT_OF[dtype] = fmt  # dtype.name costs microseconds; every op asks
        return fmt


def format_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype Forge holds values of `dtype` in (bool and int64 become
    int32); `dtype` itself where Forge has no DataFormat (rules reject it)."""
    fmt = data_format(dtype)
    return np.dtype(dtype) if fmt is None else np.dtype(_FORMAT_DTYPES[fmt])


_COMPARISONS = ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual")
_ARITHMETIC = ("Add", "Subtract", "Multiply", "Max", "Min", "Power", "Remainder")


def promote(*dtypes: np.dtype) -> np.dtype:
    """torch's promotion of tensors with dimensions: the widest float if any
    operand is a float, else the widest integer; bool is the narrowest."""
    ds = [np.dtype(d) for d in dtypes]
    floats = [d for d in ds if is_float(d)]
    pool = floats or [d for d in ds if d.kind in "iu"] or ds
    return max(pool, key=lambda d: d.itemsize)


def result_dtype(call: Call) -> np.dtype:
    """Forge's golden element type of the call's result."""
    fn, ds = call.function, [d for d in call.dtypes if d is not None]
    if fn in _COMPARISONS:  # torch::eq(a, b).to(a.dtype()), op_equal.cpp and siblings
        return ds[0]
    if fn == "Divide":  # torch::div: true division, an integer quotient is float32
        d = promote(*ds)
        return d if is_float(d) else np.dtype(np.float32)
    if fn in _ARITHMETIC or fn in ("Matmul", "Concatenate"):
        return promote(*ds)
    if fn == "Where":
        return promote(ds[1], ds[2])
    if fn == "Cast":  # tensors[0].to(data_format_to_scalar_type(df)), op_cast.cpp
        return format_dtype(call.keywords["dtype"])
    if fn == "LogicalNot":
        return np.dtype(bool)
    if fn == "Argmax":
        return np.dtype(np.int64)
    if fn == "Embedding":
        return ds[1]
    return ds[0]


# -- generic rules ----------------------------------------------------------------


@rule("dtype-unsupported", (), "every operand has a dtype Forge has a DataFormat for "
      "(float32, float16, bfloat16, int32, int64, int8, uint8, bool)",
      "forge/forge/tensor.py pytorch_dtype_to_forge_dataformat")
def _dtype_supported(call: Call) -> str | None:
    for i, d in enumerate(call.dtypes):
        if d is not None and data_format(d) is None:
            return f"operand {i} has dtype {np.dtype(d).name}, which Forge cannot hold"
    return None


def _broadcast(shapes: Sequence[tuple[int, ...]]) -> str | None:
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    for dims in zip(*padded):
        if len({d for d in dims if d != 1}) > 1:
            return f"shapes {[list(s) for s in shapes]} do not broadcast"
    return None


@rule("eltwise-broadcast", (*_ARITHMETIC, *_COMPARISONS, "Divide", "Where"),
      "operand shapes broadcast numpy-style (aligned from the right; a differing dim must be 1)",
      "forge/csrc/ops/op_common.cpp compute_elementwise_binary_shape")
def _eltwise_broadcast(call: Call) -> str | None:
    return _broadcast([s for s in call.shapes if s is not None])


@rule("matmul-shapes", ("Matmul",),
      "the operands' inner dims agree and their batch dims broadcast (shape() assumes it; the golden "
      "torch.matmul raises otherwise)", "forge/csrc/ops/op_matmul.cpp shape(), eval()")
def _matmul_shapes(call: Call) -> str | None:
    a, b = call.shape(0), call.shape(1)
    if not a or not b:
        return f"operands of shapes {list(a)} and {list(b)} are no matrices or vectors"
    if a[-1] != b[-2 if len(b) > 1 else -1]:
        return f"shapes {list(a)} and {list(b)} do not agree on the inner dimension"
    if len(a) > 2 and len(b) > 2:
        return _broadcast([a[:-2], b[:-2]])
    return None


@rule("matmul-bias", ("Matmul",),
      "a bias is added to the product by a separate Add: it broadcasts to the product's shape without widening it",
      "forge/forge/op/matmul.py Matmul; forge/csrc/ops/op_common.cpp compute_elementwise_binary_shape")
def _matmul_bias(call: Call) -> str | None:
    if len(call.shapes) < 3 or call.shapes[2] is None:
        return None
    a, b, bias = call.shape(0), call.shape(1), call.shape(2)
    if len(a) < 2 or len(b) < 2:
        return None
    product = (*np.broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])
    wrong = _broadcast([product, bias])
    if wrong is None and (len(bias) > len(product) or np.broadcast_shapes(product, bias) != product):
        wrong = f"a bias of shape {list(bias)} widens the product's {list(product)}"
    return wrong


def _is_float(v: object) -> bool:
    return isinstance(v, float)


_FLOAT_KEYWORDS = {
    "Clip": ("min", "max"), "LeakyRelu": ("alpha",), "Layernorm": ("epsilon",), "Batchnorm": ("epsilon",),
    "Pad": ("value",), "ConstantPad": ("value",),
}


@rule("attr-variant", tuple(_FLOAT_KEYWORDS),
      "keywords the C++ op reads as float are Python floats (an int makes std::get throw)",
      "forge/csrc/ops/op.hpp attr_as; op_clip.cpp, op_leaky_relu.cpp, op_layernorm.cpp, op_pad.cpp")
def _float_keywords(call: Call) -> str | None:
    for k in _FLOAT_KEYWORDS[call.function]:
        if not _is_float(call.keywords.get(k)):
            return f"{k} must be a float, got {call.keywords.get(k)!r}"
    return None


# -- tensor manipulation ----------------------------------------------------------


def _int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def _dim(call: Call, key: str = "dim", rank: int | None = None) -> int | str:
    """The dimension made non-negative, or the message why it is none."""
    rank = call.rank if rank is None else rank
    d = call.keywords.get(key)
    if not _int(d):
        return f"{key} must be one int, got {d!r}"
    if not -rank <= d < rank:
        return f"{key} {d} is out of range for rank {rank}"
    return d % rank


def _error(dim: int | str) -> str | None:
    return dim if isinstance(dim, str) else None


@rule("index-start", ("Index",), "dim in range; `start < size` (stop=None is start+1; a negative stop adds the size)",
      "forge/forge/op/tm.py Index; forge/csrc/ops/op_index.cpp")
def _index_start(call: Call) -> str | None:
    dim = _dim(call)
    if isinstance(dim, str):
        return dim
    size, start = call.shape(0)[dim], call.keywords["start"]
    if not _int(start) or not 0 <= start < size:
        return f"start {start} must be < {size} (the size of dim {call.keywords['dim']})"
    return None


def index_stop(call: Call) -> Any:
    """Index's stop as Forge resolves it: None is start + 1, a negative stop adds the size."""
    start, stop = call.keywords["start"], call.keywords["stop"]
    stop = start + 1 if stop is None else stop
    if _int(stop) and stop < 0:
        stop += call.shape(0)[call.keywords["dim"]]
    return stop


@rule("index-stop", ("Index",), "`start <= stop <= size` after stop=None and negative stops are resolved",
      "forge/forge/op/tm.py Index")
def _index_stop(call: Call) -> str | None:
    size, stop = call.shape(0)[call.keywords["dim"]], index_stop(call)
    if not _int(stop) or not stop <= size:
        return f"stop {stop} must be <= {size}"
    return None


@rule("index-stride", ("Index",), "`0 < stride <= size`; a negative stride only on a dim of size 1",
      "forge/forge/op/tm.py Index")
def _index_stride(call: Call) -> str | None:
    size, stride = call.shape(0)[call.keywords["dim"]], call.keywords["stride"]
    if not _int(stride) or stride == 0:
        return f"stride {stride!r} must be a non-zero int"
    if stride < 0 and size != 1:
        return "a negative stride is only allowed on a dimension of size 1"
    if stride > max(size, 1):
        return f"stride {stride} must be <= {size}"
    return None


@rule("transpose-dims", ("Transpose",), "two int dims, in range for the rank and distinct",
      "forge/forge/op/tm.py Transpose; forge/csrc/ops/op_transpose.cpp")
def _transpose(call: Call) -> str | None:
    dims = []
    for k in ("dim0", "dim1"):
        d = _dim(call, k)
        if isinstance(d, str):
            return d
        dims.append(d)
    if dims[0] == dims[1]:
        return f"dim0 and dim1 name the same dimension {dims[0]}"
    return None


@rule("reshape-volume", ("Reshape",), "the new shape has the same volume, with at most one -1, given as a list",
      "forge/forge/op/tm.py Reshape")
def _reshape(call: Call) -> str | None:
    shape = call.keywords["shape"]
    if not isinstance(shape, list) or not all(_int(d) for d in shape):
        return f"shape must be a list of ints, got {shape!r}"
    if shape.count(-1) > 1:
        return f"shape {shape} has more than one -1"
    volume = math.prod(call.shape(0))
    known = math.prod(d for d in shape if d != -1)
    if (-1 in shape and (known == 0 or volume % known)) or (-1 not in shape and known != volume):
        return f"cannot reshape {list(call.shape(0))} ({volume} elements) into {shape}"
    return None


@rule("concat-dims", ("Concatenate",), "axis in range; every operand of the same rank and equal off the axis",
      "forge/forge/op/eltwise_nary.py Concatenate; forge/csrc/ops/op_concatenate.cpp")
def _concat(call: Call) -> str | None:
    shapes = [call.shape(i) for i in range(len(call.shapes))]
    ranks = {len(s) for s in shapes}
    if len(ranks) != 1:
        return f"operands have different ranks {sorted(ranks)}"
    axis = _dim(call, "axis")
    if isinstance(axis, str):
        return axis
    rest = {tuple(d for i, d in enumerate(s) if i != axis) for s in shapes}
    if len(rest) != 1:
        return f"operand shapes {[list(s) for s in shapes]} differ off axis {call.keywords['axis']}"
    return None


@rule("broadcast-dim", ("Broadcast",), "one dim, in range after unsqueezing, whose size is 1 or already the target",
      "forge/csrc/ops/op_broadcast.cpp")
def _broadcast_dim(call: Call) -> str | None:
    d = call.keywords["dim"]
    if not _int(d) or not _int(call.keywords["shape"]):
        return "dim and shape must be ints"
    shape = call.shape(0)
    rank = max(len(shape), -d if d < 0 else d + 1)
    full = (1,) * (rank - len(shape)) + tuple(shape)
    if full[d] not in (1, call.keywords["shape"]):
        return f"dim {d} has size {full[d]}, which cannot broadcast to {call.keywords['shape']}"
    return None


@rule("squeeze-dim", ("Squeeze",), "one dim in range, of size 1", "forge/csrc/ops/op_squeeze.cpp")
def _squeeze(call: Call) -> str | None:
    d = _dim(call)
    if isinstance(d, str):
        return d
    if call.shape(0)[d] != 1:
        return f"dim {call.keywords['dim']} has size {call.shape(0)[d]}, not 1"
    return None


@rule("unsqueeze-dim", ("Unsqueeze",), "one dim in range for the result's rank", "forge/csrc/ops/op_unsqueeze.cpp")
def _unsqueeze(call: Call) -> str | None:
    return _error(_dim(call, rank=call.rank + 1))


@rule("constantpad-unusable", ("ConstantPad",),
      "never emitted: the wrapper passes an extra `attrs=[]`, so the C++ op gets 3 attributes and asserts 2",
      "forge/forge/op/tm.py ConstantPad; forge/csrc/ops/op_constant_pad.cpp")
def _constant_pad(call: Call) -> str | None:
    return "every Python call fails in Forge (3 attributes where the op asserts 2); use Pad"


@rule("pad-len", ("Pad",), "2 or 4 non-negative entries in F.pad order (left, right[, top, bottom]) on the last dims; "
      "mode constant, replicate or reflect", "forge/forge/op/tm.py Pad; forge/csrc/ops/op_pad.cpp")
def _pad(call: Call) -> str | None:
    pad = call.keywords["pad"]
    if not isinstance(pad, (list, tuple)) or len(pad) not in (2, 4) or not all(_int(p) for p in pad):
        return f"pad must be 2 or 4 ints, got {pad!r}"
    if any(p < 0 for p in pad):
        return f"pad {list(pad)} has a negative entry"
    if len(pad) // 2 > call.rank:
        return f"pad {list(pad)} pads {len(pad) // 2} dims of a rank-{call.rank} tensor"
    if call.keywords["mode"] not in ("constant", "replicate", "reflect"):
        return f"mode {call.keywords['mode']!r} must be constant, replicate or reflect"
    return None


# -- reductions and normalisation ---------------------------------------------------


@rule("reduce-dim", ("ReduceSum", "ReduceAvg", "ReduceMax"), "one int dim with -4 <= dim <= 3, in range for the rank",
      "forge/forge/op/reduce.py; forge/csrc/ops/op_common.cpp reduce_ops_shape")
def _reduce(call: Call) -> str | None:
    d = call.keywords["dim"]
    if not _int(d) or not -4 <= d <= 3:
        return f"dim {d!r} must be one axis in -4..3"
    return _error(_dim(call))


@rule("softmax-dim", ("Softmax", "LogSoftmax"), "dim (keyword-only) in range for the rank",
      "forge/csrc/ops/op_softmax.cpp, op_log_softmax.cpp")
def _softmax(call: Call) -> str | None:
    return _error(_dim(call))


@rule("layernorm-shape", ("Layernorm",), "normalises the last dim only; gamma and beta are [..., N] with leading 1s",
      "forge/csrc/ops/op_layernorm.cpp")
def _layernorm(call: Call) -> str | None:
    if call.keywords["dim"] not in (-1, call.rank - 1):
        return f"dim {call.keywords['dim']} must be the last dimension"
    n = call.shape(0)[-1]
    for name, shape in zip(("weights", "bias"), call.shapes[1:3]):
        if not shape or shape[-1] != n or any(d != 1 for d in shape[:-1]):
            return f"{name} has shape {list(shape or ())}, expected [..., {n}] with leading 1s"
    return None


# -- matmul, convolution, pooling, embedding -------------------------------------------


@rule("conv-operands", ("Conv2d",), "4-D activations and OIHW weights; padding an explicit [top, left, bottom, right] "
      "list (the default 'same' is symmetric)", "forge/forge/op/convolution.py; forge/csrc/ops/op_conv_2d.cpp")
def _conv(call: Call) -> str | None:
    if len(call.shape(0)) != 4 or len(call.shape(1)) != 4:
        return f"activations {list(call.shape(0))} and weights {list(call.shape(1))} must be 4-D"
    padding = call.keywords["padding"]
    if not (isinstance(padding, list) and len(padding) == 4 and all(_int(p) and p >= 0 for p in padding)):
        return f"padding must be an explicit [top, left, bottom, right] list, got {padding!r}"
    return None


@rule("convtranspose-operands", ("Conv2dTranspose",), "4-D activations and (Cin, Cout/groups, kH, kW) weights; "
      "padding an int or a (top, left, bottom, right) tuple with top == bottom and left == right (the wrapper's "
      "assert; the op reads [pH, pW])", "forge/forge/op/convolution.py; forge/csrc/ops/op_conv_2d_transpose.cpp")
def _conv_transpose(call: Call) -> str | None:
    if len(call.shape(0)) != 4 or len(call.shape(1)) != 4:
        return f"activations {list(call.shape(0))} and weights {list(call.shape(1))} must be 4-D"
    padding = call.keywords["padding"]
    if _int(padding) and padding >= 0:
        return None
    if isinstance(padding, tuple) and len(padding) == 4 and all(_int(p) and p >= 0 for p in padding):
        top, left, bottom, right = padding
        return None if top == bottom and left == right else f"padding {padding!r} must be symmetric"
    return f"padding must be an int or a (top, left, bottom, right) tuple, got {padding!r}"


@rule("maxpool-kernel-type", ("MaxPool2d",), "kernel_size is an int or a tuple of ints (a list fails the assert)",
      "forge/forge/op/pooling.py MaxPool2d")
def _maxpool_kernel(call: Call) -> str | None:
    k = call.keywords["kernel_size"]
    if _int(k) or (isinstance(k, tuple) and all(_int(x) for x in k)):
        return None
    return f"kernel_size must be an int or a tuple, got {k!r}"


def _pool_padding(padding: object) -> list[int] | None:
    """Forge's [left, right, top, bottom], from what the wrapper accepts."""
    if _int(padding):
        return [padding] * 4
    if isinstance(padding, list) and len(padding) == 4 and all(_int(p) for p in padding):
        return padding
    return None


@rule("pool-symmetric", ("MaxPool2d", "AvgPool2d"), "padding [left, right, top, bottom] with left == right and "
      "top == bottom", "forge/csrc/ops/op_max_pool_2d.cpp, op_avg_pool_2d.cpp shape()")
def _pool_symmetric(call: Call) -> str | None:
    padding = _pool_padding(call.keywords["padding"])
    if padding is None:
        return f"padding must be an int or a [left, right, top, bottom] list, got {call.keywords['padding']!r}"
    left, right, top, bottom = padding
    if left != right or top != bottom:
        return f"padding {padding} ([left, right, top, bottom]) must be symmetric"
    return None


@rule("pool-flags", ("MaxPool2d", "AvgPool2d"), "dilation 1, return_indices False, divisor_override None; no "
      "ceil_mode (shape() takes the plain ceiling where the golden drops a window starting in the padding)",
      "forge/forge/op/pooling.py; forge/csrc/ops/op_max_pool_2d.cpp, op_avg_pool_2d.cpp")
def _pool_flags(call: Call) -> str | None:
    kw = call.keywords
    if kw.get("dilation", 1) not in (1, [1, 1], (1, 1)):
        return f"dilation {kw['dilation']!r} must be 1"
    if kw.get("return_indices") or kw.get("divisor_override") is not None:
        return "return_indices must be False and divisor_override None"
    if kw["ceil_mode"]:
        return "ceil_mode must be False (pad explicitly instead)"
    return None


@rule("embedding-table", ("Embedding",), "indices first, then a 2-D table", "forge/csrc/ops/op_embedding.cpp")
def _embedding(call: Call) -> str | None:
    if len(call.shape(1)) != 2:
        return f"the table has shape {list(call.shape(1))}; it must be 2-D"
    if np.dtype(call.dtypes[0]).kind not in "iu":
        return f"indices have dtype {np.dtype(call.dtypes[0]).name}; they must be integers"
    return None


@rule("advindex-indices", ("AdvIndex",), "integer indices of rank 1 or 2, dim in range",
      "forge/csrc/ops/op_adv_index.cpp")
def _adv_index(call: Call) -> str | None:
    if len(call.shape(1)) not in (1, 2) or np.dtype(call.dtypes[1]).kind not in "iu":
        return "the indices must be an integer tensor of rank 1 or 2"
    return _error(_dim(call))


@rule("cast-dtype", ("Cast",), "a dtype Forge has a DataFormat for; bool, int64, int8 and uint8 become Int32 "
      "(truncation, not a comparison with 0)", "forge/forge/op/eltwise_unary.py Cast; forge/csrc/ops/op_cast.cpp")
def _cast(call: Call) -> str | None:
    if data_format(call.keywords["dtype"]) is None:
        return f"dtype {np.dtype(call.keywords['dtype']).name} has no Forge DataFormat"
    return None
