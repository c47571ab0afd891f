"""`combine-all-reduces`: independent all-reduces of small values as one
message, as XLA's all-reduce combiner does. A collective of a few bytes
costs its latency, not its bandwidth: a dynamically quantized layer's
range (the maximum of its input and of its negation, `PARTIAL_MAX`) is two
all-reduces of 4 bytes each, which travel as one of 8.

All-reduces of one grid, grid axes, reduction and element type are
combined where each one's operand is made before any of their results is
read (a few pure ops moved up where it is not, as the range's maximum is
computed after its minimum is used): there their operands are flattened
and concatenated, reduced once, and sliced back to their shapes. A group
stays under `max-bytes` (the combined message), so a large sum is never
copied to save one message's latency."""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from forge_opt.dialects import shard, tir
from forge_opt.dtypes import tensor, tensor_nbytes


@dataclass(frozen=True)
class CombineAllReducesPass(ModulePass):
    """Combine independent all-reduces alike into one (`max-bytes`: the
    largest combined message)."""

    name = "combine-all-reduces"
    max_bytes: int = 16384

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in list(op.walk()):
            for region in o.regions:
                for block in region.blocks:
                    for group in _groups(block, self.max_bytes):
                        _combine(group, block)


def _key(op: shard.AllReduceOp) -> tuple:
    return (op.grid, tuple(shard.grid_axes(op)), shard.reduction_of(op), tensor(op.operands[0].type).element_type)


def _bytes(op: shard.AllReduceOp) -> int:
    return tensor_nbytes(tensor(op.operands[0].type))


#: the most ops moved up to make a later all-reduce's operand ready for an earlier one (a range's
#: ReduceMax, its negation): a larger move would reorder the program for a message's latency
HOIST = 8


def _groups(block: Block, max_bytes: int) -> list[list[shard.AllReduceOp]]:
    """The block's all-reduces that can travel together, in groups of two
    or more: alike, each member's operand made (moved up, at most `HOIST`
    pure `tir` ops, where it is made after the group's first read) before
    any member's result is read."""
    candidates = [o for o in block.ops if isinstance(o, shard.AllReduceOp) and _bytes(o) <= max_bytes]
    if len(candidates) < 2:
        return []
    at = {x: i for i, x in enumerate(block.ops)}  # positions, renewed after ops move
    done: list[list[shard.AllReduceOp]] = []
    open_: dict[tuple, list[shard.AllReduceOp]] = {}
    for o in candidates:
        key = _key(o)
        members = open_.get(key, [])
        fits = bool(members) and sum(map(_bytes, members)) + _bytes(o) <= max_bytes
        first = _first_read(members, block, at) if fits else None
        moved = None if first is None else _to_move(o, members, at, at[first])
        if first is not None and moved is not None:
            for m in sorted(moved, key=at.__getitem__):
                m.detach()
                block.insert_op_before(m, first)
            if moved:
                at = {x: i for i, x in enumerate(block.ops)}
        elif members:
            done.append(members)
            members = []
        open_[key] = [*members, o]
    done += open_.values()
    return [g for g in done if len(g) > 1]


def _to_move(op: shard.AllReduceOp, members: list[shard.AllReduceOp], at: dict[Operation, int],
             first: int) -> set[Operation] | None:
    """The ops that make `op`'s operand at or after position `first` (the
    first read of the members' results), to move up before it; None where
    one of them reads a member (so `op` waits for them) or is not a pure
    `tir` op, or where they are more than `HOIST`."""
    moved: set[Operation] = set()
    todo = [op.operands[0]]
    while todo:
        owner = todo.pop().owner
        if owner in members:
            return None
        if not isinstance(owner, Operation) or owner in moved or at.get(owner, -1) < first:  # (-1: an outer op)
            continue
        if not isinstance(owner, tir.TirOp) or owner.regions or len(moved) == HOIST:
            return None
        moved.add(owner)
        todo += owner.operands
    return moved


def _first_read(members: list[shard.AllReduceOp], block: Block, at: dict[Operation, int]) -> Operation:
    """The first op of the block reading a member's result (the block's
    last op, its return, where none does)."""
    readers = [block.find_ancestor_op_in_block(u.operation) for m in members for u in m.results[0].uses]
    found = [r for r in readers if r is not None]
    return min(found, key=at.__getitem__) if found else block.ops.last  # type: ignore[return-value]


def _combine(group: list[shard.AllReduceOp], block: Block) -> None:
    """One all-reduce of the group's operands, flattened and joined, before
    the first read of a member's result; each member's result a slice of
    it."""
    last = group[-1]
    at = {x: i for i, x in enumerate(block.ops)}
    first = _first_read(group, block, at)
    made_at = [at.get(o, -1) if isinstance(o := m.operands[0].owner, Operation) else -1 for m in group]
    assert max(made_at) < at[first], "an operand made after the first read"
    made: list[Operation] = []

    def add(new: Operation) -> SSAValue:  # named, and located, as the last member (the report's label)
        made.append(new)
        new.location = last.location
        new.results[0].name_hint = last.results[0].name_hint
        return new.results[0]

    sizes = [math.prod(_shape(m)) for m in group]
    flat = [add(tir.ReshapeOp(m.operands[0], [n])) for m, n in zip(group, sizes)]
    reduced = add(shard.all_reduce(add(tir.ConcatOp(flat, 0)), last.grid.string_value(), shard.grid_axes(last),
                                   shard.reduction_of(last)))
    start = 0
    results = []
    for m, n in zip(group, sizes):
        part = add(tir.StridedSliceOp(reduced, [0], [start], [start + n], [1]))
        results.append(add(tir.ReshapeOp(part, _shape(m))))
        start += n
    Rewriter.insert_op(made, InsertPoint.before(first))
    for m, result in zip(group, results):
        m.results[0].replace_all_uses_with(result)
        Rewriter.erase_op(m)


def _shape(op: Operation) -> list[int]:
    return list(tensor(op.operands[0].type).get_shape())
