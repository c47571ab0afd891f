"""The machinery shared by the lowering passes: a table of lowering
functions by op, and one in-order walk that runs the one for each op it
meets.

A lowering function gets the op and an `Emitter`, builds the replacement
ops through the emitter (they are inserted before the op and carry its
location, so diagnostics keep naming the ONNX node) and returns the values
that replace the op's results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, cast

import numpy as np
from xdsl.dialects.builtin import TensorType, UnrankedTensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects.tir_shapes import ShapeError
from forge_opt.dtypes import UnrankedType
from forge_opt.xdsl_internals import insert_before, item, move_uses, name_results, ops_of, take_name


class Emitter:
    def __init__(self, op: Operation):
        self.op = op
        self.ops: list[Operation] = []

    def add(self, new: Operation) -> Operation:
        new.location = self.op.location
        self.ops.append(new)
        return new

    def value(self, new: Operation) -> SSAValue:
        return item(self.add(new).results, 0)

    def error(self, message: str) -> ForgeOptError:
        return ForgeOptError(f"{describe(self.op)}: {message}")


Lowering = Callable[[Operation, Emitter], Sequence[SSAValue | None]]


OpT = TypeVar("OpT", bound=Operation)
EmitterT = TypeVar("EmitterT", bound=Emitter)


class LoweringTable(dict[type[Operation], Lowering]):
    """Lowering functions by the op class they lower; `@table.lowers(Op)`
    registers one, which may take its op typed as that class, and the
    emitter its table is rewritten with (`table_rewrite`) typed as that."""

    def lowers(self, *ops: type[OpT]):
        def register(fn: Callable[[OpT, EmitterT], Sequence[SSAValue | None]]):
            for op in ops:
                self[op] = cast(Lowering, fn)
            return fn

        return register


Replacement = tuple[Sequence[Operation], Sequence[SSAValue | None]]
Rewrite = Callable[[Operation], Replacement | None]


def rewrite_in_order(root: Operation, rewrite: Rewrite) -> None:
    """Offer each op nested in `root` to `rewrite` once, in program order.

    When it returns (new ops, values), the new ops go before the op, the
    uses of its results move to the values and the op is erased. New ops are
    not offered again: each stage rewrites one level down. One walk with no
    worklist; xDSL's greedy rewriter costs about as much again as the
    rewrites themselves.
    """
    for region in root.regions:
        for block in region.blocks:
            for op in ops_of(block):
                if op.parent is not block:
                    continue
                replacement = rewrite(op)
                if replacement is None:
                    if op.regions:
                        rewrite_in_order(op, rewrite)
                    continue
                new_ops, values = replacement
                insert_before(block, new_ops, op)
                for old, new in zip(op.results, values, strict=True):
                    if new is not None:
                        move_uses(old, new)
                # As xDSL's PatternRewriter.replace: the ops computing one
                # value share its name, so emitted names trace to the ONNX value.
                if len(values) == 1 and values[0] is not None and values[0].name_hint:
                    name_results(new_ops, values[0])
                _erase(block, op)


def _erase(block: Block, op: Operation) -> None:
    """`block.erase_op(op)` for an op whose results have no uses left,
    without marking each result erased (a new value per result)."""
    block.detach_op(op)
    op.drop_all_references()


def erase_dead_ops(root: Operation) -> None:
    """Erase ops without effects whose results are unused, in one backward
    sweep per block (a dead chain dies from its end); xDSL's `dce` does the
    same through its greedy rewriter, at several times the cost."""
    for region in root.regions:
        for block in region.blocks:
            op = block.last_op
            while op is not None:
                before = op.prev_op
                if is_trivially_dead(op):
                    _erase(block, op)
                elif op.regions:
                    erase_dead_ops(op)
                op = before


def table_rewrite(table: dict[type[Operation], Lowering], emitter_class: type[Emitter] = Emitter) -> Rewrite:
    """Rewrite each op whose class has an entry in `table`, each lowering
    given an `emitter_class` for its op. An op a lowering builds from
    operands it cannot take (`ShapeError`) is an error of the op being
    lowered."""

    def rewrite(op: Operation) -> Replacement | None:
        fn = table.get(type(op))
        if fn is None:
            return None
        emitter = emitter_class(op)
        try:
            results = list(fn(op, emitter))
        except ShapeError as error:
            raise emitter.error(str(error)) from None
        except UnrankedType as error:  # ONNX could not type a value this lowering needs (another domain's op made it)
            raise emitter.error(f"{error}; Forge needs static shapes") from None
        if len(results) != len(op.results):
            raise ForgeOptError(
                f"{describe(op)}: lowering gave {len(results)} values for {len(op.results)} results"
            )
        for old, new in zip(op.results, results):
            if new is None and old.uses:
                raise ForgeOptError(f"{describe(op)}: result #{old.index} is used but cannot be lowered")
            if new is not None and new.owner in emitter.ops:
                take_name(new, old)
        return emitter.ops, results

    return rewrite


def leaving_failures(rewrite: Rewrite, failures: dict[Operation, str]) -> Rewrite:
    """`rewrite`, except that an op it cannot rewrite stays as it is, with
    the reason in `failures` (AutoSplit's trial lowering)."""

    def tolerant(op: Operation) -> Replacement | None:
        try:
            return rewrite(op)
        except ForgeOptError as error:
            failures[op] = str(error)
            return None

    return tolerant


def known_shape(value: SSAValue) -> list[int] | None:
    """The value's shape when it is a tensor of known sizes, else None."""
    t = value.type
    if isinstance(t, TensorType) and all(d >= 0 for d in t.get_shape()):
        return list(t.get_shape())
    return None


def static_shape(value: SSAValue, emitter: Emitter, what: str = "input") -> list[int]:
    shape = known_shape(value)
    if shape is None:
        where = _origin(value)
        raise emitter.error(
            f"the {what} has no static shape ({_unknown_dims(value.type)}); Forge needs static shapes{where}"
        )
    return shape


def _unknown_dims(t) -> str:
    if not isinstance(t, TensorType):
        return f"{t}: its rank is unknown"
    dims = [str(i) for i, d in enumerate(t.get_shape()) if d < 0]
    return f"{t}: dim{'s' if len(dims) > 1 else ''} {', '.join(dims)} unknown"


def _origin(value: SSAValue) -> str:
    """Where the unknown sizes come from: the first op up the chain whose
    inputs have static shapes but whose result does not (inputs of the
    function are checked before lowering)."""
    for _ in range(10_000):
        op = value.owner
        if not isinstance(op, Operation):
            return ""
        tensors = (v for v in op.operands if isinstance(v.type, TensorType | UnrankedTensorType))
        unknown = next((v for v in tensors if known_shape(v) is None), None)
        if unknown is None:
            return f"; the unknown sizes come from {describe(op)}, whose result shape is not known at compile time"
        value = unknown
    return ""


def normalize_axis(axis: int, rank: int, emitter: Emitter) -> int:
    if not -rank <= axis < rank:
        raise emitter.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def as_ints(array: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]
