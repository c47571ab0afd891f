"""`merge-equal-ops`: two `tir` ops of the same kind, with the same operands
and properties, compute the same value: the later one's uses move to the
first, and it goes (common subexpression elimination). Exporters repeat
whole computations (a mask or a position table rebuilt in every layer, two
branches reading one input through equal constants). Across devices, two
`shard.all_slice`s of one value take one block: each reader of a weight
(an unrolled recurrence's, once a step) then reads one parameter. Model
weights are never compared (that would read them), nor constants over 1 MiB."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from forge_opt.dialects import shard, tir
from forge_opt.transforms.lowering import erase_dead_ops

#: constants up to this size are compared by value
COMPARED_BYTES = 1 << 20


def _compared(op: Operation) -> bool:
    if isinstance(op, shard.AllSliceOp):  # (a device's own block: no collective is merged)
        return True
    if not isinstance(op, tir.TirOp) or op.regions:
        return False
    return not isinstance(op, tir.ConstantOp) or (op.weight_name is None and _nbytes(op) <= COMPARED_BYTES)


def _nbytes(op: tir.ConstantOp) -> int:
    value = op.value
    return len(value.data.data) if isinstance(value, DenseIntOrFPElementsAttr) else COMPARED_BYTES + 1


def _equal(a: Operation, b: Operation) -> bool:
    return a.properties == b.properties and [r.type for r in a.results] == [r.type for r in b.results]


def merge_equal_ops(block: Block) -> bool:
    """Whether any op was merged (and is now unused)."""
    # ops by kind and operands first, a cheap key; their properties are compared only among those
    seen: dict[tuple, list[Operation]] = {}
    merged = False
    for op in list(block.ops):
        if not _compared(op):
            continue
        # an op without operands (a constant, a fill) is keyed by what it holds, else every one shares a bucket
        key = (type(op), *op.operands) if op.operands else (type(op), *op.properties.items(), *op.result_types)
        same = seen.setdefault(key, [])
        first = next((other for other in same if _equal(other, op)), None)
        if first is None:
            same.append(op)
            continue
        for old, new in zip(op.results, first.results):
            old.replace_all_uses_with(new)
        merged = True
    return merged


@dataclass(frozen=True)
class MergeEqualOpsPass(ModulePass):
    """Two `tir` ops of one kind with equal operands and properties: the
    later is the first (weights and constants over 1 MiB not compared)."""

    name = "merge-equal-ops"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merged = [merge_equal_ops(block) for inner in op.walk() for region in inner.regions for block in region.blocks]
        if any(merged):
            erase_dead_ops(op)
