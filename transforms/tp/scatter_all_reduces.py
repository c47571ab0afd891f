"""`scatter-all-reduces`: all-reduces that only element-wise ops read become
reduce-scatters, the element-wise ops run on each device's slice, and what
leaves them is all-gathered: llama3_70b_galaxy's gated MLP on its columns,
where W1's and W3's partial sums are reduce-scattered, SiLU·mul runs on
1/C of the hidden units and one all-gather feeds W2.

A ring all-reduce is a reduce-scatter and an all-gather, so k all-reduces
feeding a region of element-wise ops that m values leave cost 2k ring
passes before and k + m after: the rewrite is made where m < k (fewer
bytes and ring steps, one more collective per value that leaves), never
otherwise.

The region grows from an all-reduce, in program order, through unary,
cast and binary ops of its shape whose other operands are constant
scalars or results of all-reduces alike (same grid axes, a sum: more of
the region's sources). A product (or quotient) of a region value and a
summand `h` that only an all-reduce alike reads joins it too: the sum of
`s·h` over the group is `s` times the sum of `h`, `s` being the same on
every device of the group, so `h` is reduce-scattered instead. That is how
`tp-partition` leaves the gated MLP: SiLU of the gate's sum times the up
projection's summand, all-reduced once."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TypeGuard

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt.dialects import shard, tir
from forge_opt.dialects.shard import ReductionKind
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.tp.rules import shape

_ELEMENTWISE = (tir.UnaryOp, tir.CastOp, tir.BinaryOp)


@dataclass(frozen=True)
class ScatterAllReducesPass(ModulePass):
    """Reduce-scatter the all-reduces that only element-wise ops read, and
    all-gather what leaves them, where that sends fewer bytes."""

    name = "scatter-all-reduces"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in list(op.walk()):
            for region in o.regions:
                for block in region.blocks:
                    at = {x: i for i, x in enumerate(block.ops)}
                    for seed in [x for x in block.ops if _summed(x)]:
                        if seed.parent is block and (group := _grow(seed, block, at)) is not None:
                            group.rewrite(block)
                            at = {x: i for i, x in enumerate(block.ops)}


def _summed(op: Operation) -> TypeGuard[shard.AllReduceOp]:
    return isinstance(op, shard.AllReduceOp) and shard.reduction_of(op) == ReductionKind.SUM


def _alike(op: Operation, seed: shard.AllReduceOp) -> bool:
    """An all-reduce summing over the seed's grid axes a value of its shape."""
    return _summed(op) and op.grid == seed.grid and shard.grid_axes(op) == shard.grid_axes(seed) and \
        shape(op.operands[0]) == shape(seed.operands[0])


def _constant_scalar(v: SSAValue) -> bool:
    return isinstance(v.owner, tir.ConstantOp | tir.FullOp) and math.prod(shape(v)) == 1


@dataclass
class _Group:
    seed: shard.AllReduceOp
    dim: int  # the axis scattered
    parts: int  # the devices of the group
    sources: list[Operation] = field(default_factory=list)  # all-reduces made reduce-scatters
    ops: list[Operation] = field(default_factory=list)  # the element-wise ops, in program order
    summands: dict[Operation, SSAValue] = field(default_factory=dict)  # an op's summand operand (`s·h`)
    absorbed: dict[Operation, SSAValue] = field(default_factory=dict)  # the all-reduce of `s·h`: `s·h`
    held: dict[SSAValue, None] = field(default_factory=dict)  # every value the region holds a slice of
    pending: set[Operation] = field(default_factory=set)  # the ops ahead that read one

    def hold(self, v: SSAValue, block: Block, at: dict[Operation, int], now: Operation) -> None:
        self.held[v] = None
        for u in v.uses:
            reader = block.find_ancestor_op_in_block(u.operation)
            if reader is not None and at.get(reader, -1) > at[now]:
                self.pending.add(reader)

    @property
    def reduces(self) -> list[Operation]:
        return [*self.sources, *self.absorbed]

    def inside(self) -> set[Operation]:
        return {*self.ops, *self.absorbed}

    def leaving(self) -> list[SSAValue]:
        """The region's values that an op outside it reads."""
        inside = self.inside()
        return [v for v in self.held if any(u.operation not in inside for u in v.uses)]

    def join(self, op: Operation, block: Block, at: dict[Operation, int]) -> None:
        """Take `op` in, with the sources and summand it brings, if it is
        element-wise on the region's values, constant scalars and
        all-reduces alike."""
        if not isinstance(op, _ELEMENTWISE) or shape(op.results[0]) != shape(self.seed.result):
            return
        sources: list[Operation] = []
        summand: tuple[SSAValue, Operation] | None = None  # and the all-reduce of the product
        for v in op.operands:
            if v in self.held or _constant_scalar(v):
                continue
            if isinstance(v.owner, shard.AllReduceOp) and _alike(v.owner, self.seed):
                sources.append(v.owner)
            elif summand is None and (reduce := _scaled_sum(op, v, self.seed)) is not None:
                summand = v, reduce
            else:
                return
        for s in dict.fromkeys(sources):
            if s not in self.sources:
                self.sources.append(s)
                self.hold(s.results[0], block, at, op)
        if summand is not None:
            self.summands[op], reduce = summand
            self.absorbed[reduce] = op.results[0]
        self.ops.append(op)
        self.hold(op.results[0], block, at, op)

    def rewrite(self, block: Block) -> None:
        """Each source's operand reduce-scattered in its place, each summand
        before its product, the region's ops on slices, an all-gather of
        each value that leaves it; the old ops erased."""
        grid, axes = self.seed.grid.string_value(), shard.grid_axes(self.seed)
        new: dict[SSAValue, SSAValue] = {}

        def scatter(v: SSAValue, before: Operation) -> SSAValue:
            return insert_named(shard.ReduceScatterOp(v, grid, axes, self.dim, self.sliced(v)), before, v)

        for source in self.sources:
            new[source.results[0]] = scatter(source.operands[0], source)
        for op in self.ops:
            operands = [new[v] if v in new else scatter(v, op) if v is self.summands.get(op) else v
                        for v in op.operands]
            clone = type(op).create(operands=operands, result_types=[self.sliced(op.results[0])],
                                    properties=dict(op.properties), attributes=dict(op.attributes))
            new[op.results[0]] = insert_named(clone, op, op.results[0])
        for reduce, product in self.absorbed.items():
            new[reduce.results[0]] = new[product]
        inside = self.inside()
        for v in self.leaving():
            assert isinstance(v.owner, Operation)
            whole = insert_named(shard.AllGatherOp(new[v], grid, axes, self.dim, v.type), v.owner, v)
            v.replace_uses_with_if(whole, lambda use: use.operation not in inside)
        gone = set(self.reduces) | set(self.ops)
        for op in reversed([x for x in block.ops if x in gone]):
            op.detach()
            op.erase(safe_erase=False)

    def sliced(self, v: SSAValue) -> TensorType:
        t = v.type
        assert isinstance(t, TensorType)
        dims = shape(v)
        dims[self.dim] //= self.parts
        return TensorType(t.element_type, dims)


def insert_named(op: Operation, before: Operation, named: SSAValue) -> SSAValue:
    """`op` placed before `before` with its location and the name of `named`."""
    op.location = before.location
    assert before.parent is not None
    before.parent.insert_op_before(op, before)
    op.results[0].name_hint = named.name_hint
    return op.results[0]


def _scaled_sum(op: Operation, v: SSAValue, seed: shard.AllReduceOp) -> Operation | None:
    """The all-reduce of `op`, where `op` is `s·v` (or `v/s`) of a `v` of
    its shape that `op` alone reads, and an all-reduce alike alone reads
    `op` (`s` being the region's, the same on every device); else None."""
    if not isinstance(op, tir.BinaryOp) or shape(v) != shape(op.output) or v.uses.get_length() != 1:
        return None
    if not (op.fn.data == BinaryFn.MUL or (op.fn.data == BinaryFn.DIV and v is op.lhs)):
        return None
    users = [u.operation for u in op.output.uses]
    return users[0] if len(users) == 1 and _alike(users[0], seed) else None


def _grow(seed: shard.AllReduceOp, block: Block, at: dict[Operation, int]) -> _Group | None:
    """The region an all-reduce starts, where scattering it sends fewer
    bytes; None otherwise."""
    dims = shape(seed.result)
    parts = shard.group_size(seed) or 0
    dim = next((d for d in reversed(range(len(dims))) if parts > 1 and dims[d] % parts == 0), None)
    if dim is None:
        return None
    group = _Group(seed, dim, parts, sources=[seed])
    group.hold(seed.result, block, at, seed)
    op = seed.next_op
    while op is not None and group.pending:
        if op in group.absorbed:
            group.hold(op.results[0], block, at, op)
        elif op in group.pending:
            group.join(op, block, at)
        group.pending.discard(op)
        op = op.next_op
    return group if len(group.leaving()) < len(group.sources) + len(group.summands) else None
