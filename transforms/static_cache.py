"""`static-kv-cache{length=L}`: a decoder exported with a growing KV cache
(Optimum's `past_key_values.*` in, `present.*` = Concat(past, new) out)
becomes one that keeps a cache of L positions, as fixed-shape hardware
serves LLMs: every decode step then has the same shapes, and one program
runs them all.

The past inputs hold L positions (import the model with its past length
set to L); a new input, `cache_position` ([1], int64), is the position the
step's first token is written at. Each `present.*` result becomes the
cache with the step's keys or values written in place at [p, p + s): a
one-hot [L, s] matrix places them (a matmul of ones and zeros, exact) and a
`Where` keeps every other position's old value. Attention still reads
Concat(past, new), as the model computes it: the positions not yet written
are masked by `attention_mask`, zero over [p, L), so they weigh exactly
nothing. A cache read other than by that Concat is an error naming the op.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, FunctionType, ModuleOp, StringAttr, TensorType, i64
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.targets.forge_python import input_names, output_names

#: what Optimum names a decoder's cache (`past_key_values.0.key` in, `present.0.key` out) and the input
#: a static cache adds
PAST, PRESENT, POSITION = "past_key_values", "present", "cache_position"
#: the module attribute naming the cache's length, for the plan and the runtime
STATIC_CACHE_ATTR = "forge.static_cache"


def cache_pairs(inputs: Iterable[str], outputs: Iterable[str]) -> dict[str, str]:
    """Each `present<suffix>` output's `past_key_values<suffix>` input."""
    names = set(inputs)
    return {o: PAST + o[len(PRESENT):] for o in outputs if o.startswith(PRESENT) and PAST + o[len(PRESENT):] in names}


class NotStaticError(ForgeOptError):
    """A model whose cache the pass cannot make static (no paired cache, a
    cache read other than by its Concat): a decode check says how to run it
    as exported instead."""


def pairs_as_cache(past: SSAValue, present: SSAValue, axis: int | None = None) -> bool:
    """Whether `past` is the cache `present` extends: the same type but for
    the length of one axis (not `axis`, the split one)."""
    a, b = dtypes.tensor(past.type), dtypes.tensor(present.type)
    if a.element_type != b.element_type or len(a.get_shape()) != len(b.get_shape()):
        return False
    differ = [i for i, (x, y) in enumerate(zip(a.get_shape(), b.get_shape())) if x != y]
    return len(differ) == 1 and differ[0] != axis


def static_past(present: SSAValue) -> SSAValue | None:
    """The past input a static cache's present writes (the Where that keeps
    its other positions), if `present` is one."""
    owner = present.owner
    if isinstance(owner, tir.WhereOp):
        past = owner.operands[2]
        if isinstance(past, BlockArgument) and past.type == present.type:
            return past
    return None


class _Writer:
    """The ops every layer's cache update shares, made once before the
    return: which positions the step writes ([L, 1]), and the one-hot
    matrix that places its s new entries ([L, s], in each element type)."""

    def __init__(self, func: FuncOp, ret: ReturnOp, position: SSAValue, length: int, steps: int):
        self.block, self.ret, self.length, self.steps = func.body.block, ret, length, steps
        positions = self.constant(np.arange(length, dtype=np.int64).reshape(length, 1))
        offsets = self.constant(np.arange(steps, dtype=np.int64).reshape(1, steps))
        targets = self.add(tir.BinaryOp(BinaryFn.ADD, position, offsets))  # [1, s]: p .. p + s - 1
        self.hits = self.add(tir.BinaryOp(BinaryFn.EQ, positions, targets))  # [L, s]: l takes entry i
        end = self.add(tir.BinaryOp(BinaryFn.ADD, position, self.constant(np.array([steps], np.int64))))
        after = self.add(tir.BinaryOp(BinaryFn.GE, positions, position))
        before = self.add(tir.BinaryOp(BinaryFn.LT, positions, end))
        self.written = self.add(tir.BinaryOp(BinaryFn.AND, after, before))  # [L, 1]
        self.onehot: dict[Attribute, SSAValue] = {}  # `hits` as [1, 1, L, s] in each element type

    def add(self, op: Operation) -> SSAValue:
        self.block.insert_op_before(op, self.ret)
        return op.results[0]

    def constant(self, values: np.ndarray) -> SSAValue:
        return self.add(tir.ConstantOp(array_to_attr(values)))

    def write(self, past: SSAValue, new: SSAValue) -> SSAValue:
        """`past` with `new` ([..., s, d]) written at [p, p + s) of axis 2."""
        element = dtypes.tensor(past.type).element_type
        if element not in self.onehot:
            ones = self.add(tir.CastOp(self.hits, element))
            self.onehot[element] = self.add(tir.ReshapeOp(ones, [1, 1, self.length, self.steps]))
        placed = self.add(tir.MatmulOp(self.onehot[element], new))  # [b, h, L, d]
        return self.add(tir.WhereOp(self.written, placed, past))


@dataclass(frozen=True)
class StaticKvCachePass(ModulePass):
    """A growing KV cache (`present.*` = Concat(`past_key_values.*`, new))
    as one of `length` positions written in place at `cache_position`."""

    name = "static-kv-cache"

    length: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.length < 1:
            raise ForgeOptError(f"static-kv-cache: length={self.length}: give the cache's positions, 1 or more")
        funcs = [f for f in op.ops if isinstance(f, FuncOp) and f.body.blocks]
        if len(funcs) != 1:
            raise ForgeOptError(f"static-kv-cache rewrites one function; the module has {len(funcs)}")
        func = funcs[0]
        block = func.body.block
        ret = block.last_op
        assert isinstance(ret, ReturnOp)
        ins, outs = input_names(func), output_names(func)
        pasts = [(name, arg) for name, arg in zip(ins, block.args) if name.startswith(PAST)]
        if not pasts:
            raise NotStaticError(f"static-kv-cache: the model has no '{PAST}.*' input to make static")
        if POSITION in ins:
            raise NotStaticError(f"static-kv-cache: the model has an input '{POSITION}' already")
        updates: dict[int, tuple[SSAValue, SSAValue]] = {}
        steps = None
        for name, past in pasts:
            present = PRESENT + name[len(PAST):]
            concat = self._concat(name, past, present, ret, outs)
            shape = dtypes.tensor(past.type).get_shape()
            if shape[2] != self.length:
                raise ForgeOptError(f"static-kv-cache: '{name}' holds {shape[2]} positions, not {self.length}: "
                                    f"import the model with its past length set to {self.length} "
                                    f"(--dim past_sequence_length={self.length})")
            new = concat.operands[1]
            s = dtypes.tensor(new.type).get_shape()[2]
            if steps not in (None, s):
                raise NotStaticError(f"static-kv-cache: '{name}' gains {s} positions a step, another cache {steps}")
            steps = s
            updates[outs.index(present)] = (past, new)
        assert steps is not None
        position = block.insert_arg(TensorType(i64, [1]), len(block.args))
        position.name_hint = POSITION
        writer = _Writer(func, ret, position, self.length, steps)
        results = list(ret.arguments)
        for index, (past, new) in updates.items():
            results[index] = writer.write(past, new)
            results[index].name_hint = outs[index].replace(".", "_")
        block.insert_op_before(ReturnOp(*results), ret)
        ret.detach()
        ret.erase()
        func.function_type = FunctionType.from_lists([a.type for a in block.args], [r.type for r in results])
        arg_attrs = list(func.arg_attrs.data) if func.arg_attrs is not None else \
            [DictionaryAttr({}) for _ in block.args[:-1]]
        func.arg_attrs = ArrayAttr([*arg_attrs, DictionaryAttr({"onnx.name": StringAttr(POSITION)})])
        op.attributes[STATIC_CACHE_ATTR] = DictionaryAttr({
            "length": array_to_attr(np.array(self.length, np.int64)),
            "position": StringAttr(POSITION),
        })

    @staticmethod
    def _concat(name: str, past: SSAValue, present: str, ret: ReturnOp, outs: list[str]) -> tir.ConcatOp:
        """The Concat(past, new) on axis 2 returned as `present`: the only
        reader of the cache a static one can stand in for."""
        if present not in outs:
            raise NotStaticError(f"static-kv-cache: '{name}' has no '{present}' result to pair with")
        returned = ret.arguments[outs.index(present)]
        for use in past.uses:
            reader = use.operation
            if not (isinstance(reader, tir.ConcatOp) and use.index == 0 and len(reader.operands) == 2
                    and reader.axis.value.data % 4 == 2 and reader.results[0] is returned):
                raise NotStaticError(f"{describe(reader)}: reads the KV cache '{name}' other than as the Concat with "
                                    f"the step's new entries that makes '{present}': its cache cannot be made static")
        owner = returned.owner
        if not isinstance(owner, tir.ConcatOp) or owner.operands[0] is not past:
            raise NotStaticError(f"static-kv-cache: '{present}' is not Concat('{name}', new) on the positions' axis")
        return owner
