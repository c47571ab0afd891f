"""One `forge.op` function as one record: its signature as Forge's Python
wrapper has it, the checks Forge makes of a call, the shape its C++
`shape()` gives, the element type its golden computes, the golden itself,
and the operand a block-float weight format may store.

The records are written by family, beside each other in this package, as
Forge keeps each op's checks, shape and golden in one `op_*.cpp`. Every
rule is read from tt-forge-fe (commit c6f95fba; the Python wrappers in
`forge/forge/op/*.py` and the C++ ops in `forge/csrc/ops/op_*.cpp`, whose
`TT_ASSERT`s run in release builds) and carries its source. The `forge`
dialect's op classes are generated from the records
(`tools/gen_forge_ops.py`), its verifier builds a `Call` from the IR and the
stand-in one from a real call's arrays, so both reject the same programs
with the same message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np

from forge_opt.dialects.forge_functions.element_types import data_format, promote
from forge_opt.dtypes import is_narrow_float

REQUIRED = object()  # a keyword parameter without a default

Shape = tuple[int, ...]


class ForgeRuleError(Exception):
    """A call Forge itself rejects; the message starts with the rule's id."""


@dataclass(slots=True)  # not frozen: a frozen dataclass costs microseconds to build, once per op
class Call:
    """One call of a `forge.op` function, as its rules see it."""

    fn: ForgeFunction
    shapes: Sequence[tuple[int, ...] | None]  # per operand; None for an absent optional one
    dtypes: Sequence[np.dtype | None]
    keywords: dict[str, Any]  # every keyword, Forge's defaults filled in (ints, lists, dtypes, ...)

    @property
    def function(self) -> str:
        return self.fn.name

    @property
    def rank(self) -> int:
        return len(self.shapes[0] or ())

    def shape(self, i: int) -> tuple[int, ...]:
        """The shape of operand `i`, which the function requires."""
        shape = self.shapes[i]
        assert shape is not None, f"{self.fn.name}: operand {i} is required"
        return shape


@dataclass(frozen=True)
class Rule:
    id: str
    what: str
    source: str
    check: Callable[[Call], str | None]  # the message when the call breaks the rule


def rule(id: str, what: str, source: str) -> Callable[[Callable[[Call], str | None]], Rule]:
    """A check of Forge's, with where it is read from; records list it."""
    return lambda check: Rule(id, what, source, check)


def first_dtype(call: Call) -> np.dtype:
    """The golden's element type of most functions: its first operand's."""
    return next(d for d in call.dtypes if d is not None)


def dtype_of(i: int) -> Callable[[Call], np.dtype]:
    """The golden's element type is operand `i`'s."""
    def dtype(call: Call) -> np.dtype:
        d = call.dtypes[i]
        assert d is not None, f"{call.fn.name}: operand {i} is required"
        return d
    return dtype


def promoted(call: Call) -> np.dtype:
    """torch's promotion of every operand given."""
    return promote(*(d for d in call.dtypes if d is not None))


@dataclass(eq=False)  # not frozen, so a test can give a function a wrong golden
class ForgeFunction:
    """One `forge.op.<name>` function."""

    name: str
    # (parameter name, "single" | "optional" | "variadic"), after `name: str`
    operands: tuple[tuple[str, str], ...]
    # Forge's C++ `shape()`, for a call that passed the rules
    shape: Callable[[Call], Shape]
    # the golden (PyTorch) semantics in numpy: the operands' arrays and every keyword
    kernel: Callable[..., Any] | None
    # the golden's element type
    dtype: Callable[[Call], np.dtype] = first_dtype
    # (parameter name, default or REQUIRED), in Forge's order
    keywords: tuple[tuple[str, object], ...] = ()
    # the checks of this function's own, in the order Forge makes them
    rules: tuple[Rule, ...] = ()
    keyword_only: bool = False  # Softmax's dim, Concatenate's axis
    # keywords Forge asserts to be tuples (a list fails), printed as tuples
    tuple_keywords: tuple[str, ...] = ()
    # keywords the C++ op reads as float (rule attr-variant)
    float_keywords: tuple[str, ...] = ()
    # the operand tt-mlir may store in a block float (a matmul's B) when made of weights
    weight_operand: int | None = None
    # a keyword's Python type where it is not `KEYWORD_TYPES`' (the generated builders' annotations)
    keyword_types: tuple[tuple[str, str], ...] = ()
    # every check in order: those every function makes, then its own
    checks: tuple[Rule, ...] = field(init=False)
    # the op's operand fields (`operands`, Concatenate's, is Operation's own: `inputs`), kinds and keywords
    fields: tuple[str, ...] = field(init=False)
    kinds: tuple[str, ...] = field(init=False)
    keyword_names: tuple[str, ...] = field(init=False)
    plain: bool = field(init=False)  # every operand "single"

    def __post_init__(self) -> None:
        self.checks = (dtype_supported, *((float_values,) if self.float_keywords else ()), *self.rules)
        self.fields = tuple("inputs" if n == "operands" else n for n, _ in self.operands)
        self.kinds = tuple(kind for _, kind in self.operands)
        self.keyword_names = tuple(n for n, _ in self.keywords)
        self.plain = all(kind == "single" for kind in self.kinds)

    @property
    def op_name(self) -> str:
        """`forge.<snake_case>`, e.g. `forge.reduce_avg` for ReduceAvg."""
        out = []
        name = self.name
        for i, c in enumerate(name):
            if c.isupper() and i and (not name[i - 1].isupper() or (i + 1 < len(name) and name[i + 1].islower())):
                out.append("_")
            out.append(c.lower())
        return "forge." + "".join(out).replace("2_d", "2d").replace("1_d", "1d")

    def keyword_type(self, name: str) -> str:
        """What the keyword takes, as Forge's wrapper accepts it."""
        return dict(self.keyword_types).get(name) or KEYWORD_TYPES[name]

    def check(self, call: Call) -> None:
        """Raise `ForgeRuleError` for the first rule the call breaks."""
        for r in self.checks:
            message = r.check(call)
            if message is not None:
                raise ForgeRuleError(f"[{r.id}] forge.op.{self.name}: {message} ({r.source})")

    def golden(self, arrays: Sequence[np.ndarray | None], keywords: dict) -> np.ndarray:
        """Forge's golden for one call: the kernel's values in the element
        type Forge computes."""
        assert self.kernel is not None, f"forge.op.{self.name} has no golden"
        dtypes_in = [None if a is None else a.dtype for a in arrays]
        # torch computes bfloat16 (and float8) ops in float32 and rounds the
        # result once; numpy on ml_dtypes would round inside some kernels
        wide = [a.astype(np.float32) if a is not None and is_narrow_float(a.dtype) else a for a in arrays]
        out = np.asarray(self.kernel(*wide, **keywords))
        return out.astype(self.dtype(Call(self, [], dtypes_in, keywords)), copy=False)


#: what a keyword takes, as Forge's wrappers accept it (../shared/reference/forge_api.md)
KEYWORD_TYPES = {
    "approximate": "str", "alpha": "float", "min": "float", "max": "float", "dtype": "Attribute",
    "unsqueeze": "str", "unsqueeze_dim": "int",
    "stride": "int | Sequence[int]", "dilation": "int | Sequence[int]", "output_padding": "int | Sequence[int]",
    "padding": "str | int | Sequence[int]", "kernel_size": "int | Sequence[int]", "groups": "int",
    "channel_last": "bool", "ceil_mode": "bool", "return_indices": "bool", "max_pool_add_sub_surround": "bool",
    "max_pool_add_sub_surround_value": "float", "count_include_pad": "bool", "divisor_override": "int",
    "dim": "int", "dim0": "int", "dim1": "int", "start": "int", "stop": "int", "axis": "int", "keep_dim": "bool",
    "stable": "bool", "epsilon": "float", "shape": "Sequence[int]", "repeats": "Sequence[int]",
    "pad": "Sequence[int]", "mode": "str", "value": "float",
}

#: the tensor parameters of most functions
A = (("operandA", "single"),)
AB = (("operandA", "single"), ("operandB", "single"))


# -- rules every function makes, and helpers of the families' rules -------------------


@rule("dtype-unsupported", "every operand has a dtype Forge has a DataFormat for "
      "(float32, float16, bfloat16, int32, int64, int8, uint8, bool)",
      "forge/forge/tensor.py pytorch_dtype_to_forge_dataformat")
def dtype_supported(call: Call) -> str | None:
    for i, d in enumerate(call.dtypes):
        if d is not None and data_format(d) is None:
            return f"operand {i} has dtype {np.dtype(d).name}, which Forge cannot hold"
    return None


@rule("attr-variant", "keywords the C++ op reads as float are Python floats (an int makes std::get throw)",
      "forge/csrc/ops/op.hpp attr_as; op_clip.cpp, op_leaky_relu.cpp, op_layernorm.cpp, op_pad.cpp")
def float_values(call: Call) -> str | None:
    for k in call.fn.float_keywords:
        if not isinstance(call.keywords.get(k), float):
            return f"{k} must be a float, got {call.keywords.get(k)!r}"
    return None


def is_int(v: object) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)


def dim(call: Call, key: str = "dim", rank: int | None = None) -> int | str:
    """The dimension made non-negative, or the message why it is none."""
    rank = call.rank if rank is None else rank
    d = call.keywords.get(key)
    if not is_int(d):
        return f"{key} must be one int, got {d!r}"
    if not -rank <= d < rank:
        return f"{key} {d} is out of range for rank {rank}"
    return d % rank


def dim_error(d: int | str) -> str | None:
    return d if isinstance(d, str) else None


def axis(call: Call, key: str = "dim", rank: int | None = None) -> int:
    """A dimension the rules have checked, made non-negative."""
    return call.keywords[key] % (call.rank if rank is None else rank)


def broadcast_error(shapes: Sequence[tuple[int, ...]]) -> str | None:
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]
    for dims in zip(*padded):
        if len({d for d in dims if d != 1}) > 1:
            return f"shapes {[list(s) for s in shapes]} do not broadcast"
    return None


def same_shape(call: Call) -> Shape:
    """The shape of an op that keeps its first operand's."""
    return call.shape(0)
