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

import numpy as np
from xdsl.dialects.builtin import TensorType
from xdsl.ir import Block, Operation, SSAValue, SSAValues
from xdsl.transforms.dead_code_elimination import is_trivially_dead

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects.irdl_fast import item


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


class LoweringTable(dict):
    """Lowering functions by key (ONNX op type or op name); `@table.lowers(k)`
    registers one."""

    def lowers(self, *keys: str):
        def register(fn: Lowering) -> Lowering:
            for key in keys:
                self[key] = fn
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
            for op in _ops_of(block):
                if op.parent is not block:
                    continue
                replacement = rewrite(op)
                if replacement is None:
                    if op.regions:
                        rewrite_in_order(op, rewrite)
                    continue
                new_ops, values = replacement
                _insert_before(block, new_ops, op)
                for old, new in zip(op.results, values, strict=True):
                    if new is not None:
                        _move_uses(old, new)
                # As xDSL's PatternRewriter.replace: the ops computing one
                # value share its name, so emitted names trace to the ONNX value.
                if len(values) == 1 and values[0] is not None and values[0].name_hint:
                    for new_op in new_ops:
                        for result in new_op.results:
                            if result._name is None:
                                result._name = values[0]._name  # valid already
                _erase(block, op)


def _ops_of(block: Block) -> list[Operation]:
    """`list(block.ops)`, read off the linked list without an iterator object."""
    ops = []
    op = block._first_op
    while op is not None:
        ops.append(op)
        op = op._next_op
    return ops


def _insert_before(block: Block, new_ops: Sequence[Operation], op: Operation) -> None:
    """`block.insert_ops_before(new_ops, op)`, linking new ops without
    regions directly (they cannot contain the block, which is all that
    xDSL's ancestry walk checks)."""
    for new in new_ops:
        if new.parent is not None or new.regions:
            block.insert_op_before(new, op)
            continue
        new.parent = block
        prev = op._prev_op
        new._prev_op = prev
        new._next_op = op
        op._prev_op = new
        if prev is None:
            block._first_op = new
        else:
            prev._next_op = new


def _move_uses(old: SSAValue, new: SSAValue) -> None:
    """`old.replace_all_uses_with(new)`: each use object moves to `new` and
    its user's operand tuple is rebuilt once, with no operand views."""
    if new is old:
        return
    use = old.first_use
    while use is not None:
        following = use._next_use
        user = use._operation
        operands = list(user._operands)
        operands[use._index] = new
        user._operands = SSAValues(operands)
        new.add_use(use)
        use = following
    old.first_use = None
    if new._name is None:
        new._name = old._name  # carries the name hint over, as xDSL does


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


def table_rewrite(table: dict[str, Lowering], key: Callable[[Operation], str | None]) -> Rewrite:
    """Rewrite each op that has an entry in `table` (keyed by `key(op)`)."""

    def rewrite(op: Operation) -> Replacement | None:
        k = key(op)
        fn = table.get(k) if k is not None else None
        if fn is None:
            return None
        emitter = Emitter(op)
        results = list(fn(op, emitter))
        if len(results) != len(op.results):
            raise ForgeOptError(
                f"{describe(op)}: lowering gave {len(results)} values for {len(op.results)} results"
            )
        for old, new in zip(op.results, results):
            if new is None and old.uses:
                raise ForgeOptError(f"{describe(op)}: result #{old.index} is used but cannot be lowered")
            if new is not None and old._name is not None and new.owner in emitter.ops:
                new._name = old._name  # valid already: no need for the setter's checks
        return emitter.ops, results

    return rewrite


def shape_of(value: SSAValue) -> list[int]:
    t = value.type
    if not isinstance(t, TensorType):
        raise ValueError(f"{t} is not a ranked tensor")
    return list(t.get_shape())


def static_shape(value: SSAValue, emitter: Emitter, what: str = "input") -> list[int]:
    t = value.type
    if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
        raise emitter.error(f"the {what} has no static shape ({t}); Forge needs static shapes")
    return list(t.get_shape())


def normalize_axis(axis: int, rank: int, emitter: Emitter) -> int:
    if not -rank <= axis < rank:
        raise emitter.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def as_ints(array: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(array).reshape(-1)]
