"""`scatter-attention-heads`: the all-reduces that make a mesh row's
attention heads become one reduce-scatter over the columns, each column
running attention on its own heads with its own block of the KV cache, and
one all-gather before the output projection: llama3_70b_galaxy's
`llama_rs_create_heads` and `all_gather_concat` (its decode splits users
over the columns instead; a batch of one has none to split).

The region is found by following each all-reduce's result forward with the
axis its blocks lie along: through element-wise ops (other operands the
same on every device of the group and of size 1 on that axis), reshapes
that keep it an outer factor, transposes, broadcasts, slices, softmax and
concatenations along other axes, and batched matmuls. An input or result
of the program split by the mesh's rows along that axis (the KV cache)
takes the column's block too, so it is split over all R·C devices. What
an op outside the region reads is all-gathered. The rewrite is made where
the all-gathers carry fewer bytes than the sums did."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, ModuleOp, TensorType
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from forge_opt.dialects import shard, tir
from forge_opt.dialects.shard import ReductionKind
from forge_opt.dtypes import tensor_nbytes
from forge_opt.transforms.tp.mesh import COLUMNS
from forge_opt.transforms.tp.partition import SPLIT_AXIS, SPLIT_BLOCKS, split_axes, split_blocks
from forge_opt.transforms.tp.rules import shape
from forge_opt.transforms.tp.scatter_all_reduces import insert_named

_ELEMENTWISE = (tir.UnaryOp, tir.CastOp, tir.BinaryOp, tir.WhereOp)


@dataclass(frozen=True)
class ScatterAttentionHeadsPass(ModulePass):
    """Reduce-scatter a row's attention heads over the columns, with the KV
    cache split alike, where that sends fewer bytes."""

    name = "scatter-attention-heads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in [o for o in op.walk() if isinstance(o, func.FuncOp) and o.body.blocks]:
            sums = [o for o in f.body.block.ops if isinstance(o, shard.AllReduceOp)
                    and shard.reduction_of(o) == ReductionKind.SUM and shard.grid_axes(o) == [COLUMNS]]
            if sums:
                program = _Program(f, sums[0])
                dims = _axes(program, sums)
                if dims:
                    _Region(program, dims).rewrite_cheaper_parts()


class _Program:
    """A function's facts every region of it reads: its ops' order, the mesh, and which values are the same
    on every device of a column group (constants, inputs whole or split by the rows, what a collective over
    the columns makes, and what ops make of those alone)."""

    def __init__(self, f: func.FuncOp, seed: shard.AllReduceOp):
        self.f, self.block = f, f.body.block
        self.renumber()
        self.rows = int(shard.grid_of(seed).shape.get_values()[0])
        self.parts = shard.group_size(seed) or 1
        self.grid, self.axes = seed.grid.string_value(), shard.grid_axes(seed)
        n = len(f.args)
        self.arg_splits = list(zip(split_axes(f.arg_attrs, n), split_blocks(f.arg_attrs, n)))
        self.same: dict[SSAValue, bool] = {a: axis is None or blocks == self.rows
                                           for a, (axis, blocks) in zip(f.args, self.arg_splits)}
        for o in self.block.ops:
            for r in o.results:
                self.same[r] = self._uniform(o)

    def _uniform(self, op: Operation) -> bool:
        if isinstance(op, shard.AllReduceOp | shard.AllGatherOp | shard.ReduceScatterOp | shard.AllSliceOp):
            over = COLUMNS in shard.grid_axes(op)
            if isinstance(op, shard.ReduceScatterOp | shard.AllSliceOp):
                return not over and self.same.get(op.operands[0], False)
            return over or self.same.get(op.operands[0], False)
        if not op.operands:
            return isinstance(op, tir.ConstantOp | tir.FullOp)
        return not op.regions and all(self.same.get(x, False) for x in op.operands)

    def renumber(self) -> None:
        """The ops in order and their places, again after a rewrite added some."""
        self.ops = list(self.block.ops)
        self.at = {o: i for i, o in enumerate(self.ops)}

    def splittable(self, v: SSAValue, d: int) -> bool:
        """An input split by the rows along `d`: each column can take its block of the row's."""
        if not isinstance(v, BlockArgument) or v.block is not self.block:
            return False
        return self.arg_splits[v.index] == (d, self.rows) and shape(v)[d] % self.parts == 0

    def place(self, reader: Operation) -> int:
        """Where in the function's block an op (or the op it is nested in) is."""
        top = self.block.find_ancestor_op_in_block(reader)
        return self.at[top] if top is not None else len(self.at)


#: how far apart (in ops) the sums whose axes are chosen together lie: an attention's Q, K and V sums are
#: a few dozen ops apart, its layer a few hundred
WINDOW = 256


def _axes(program: _Program, sums: list[shard.AllReduceOp]) -> dict[shard.AllReduceOp, int]:
    """Each sum's axis: first the one along which the most ops keep its blocks apart, alone (of equals the
    outer: a query's heads lie outside its head_dim); then, with its neighbours' chosen, the one that saves
    the most bytes (a query's heads only pass the scores' matmul beside the keys' heads)."""
    candidates = {s: [d for d, n in enumerate(shape(s.result)) if n % program.parts == 0 and n >= program.parts]
                  for s in sums}
    dims: dict[shard.AllReduceOp, int] = {}
    for s, ds in candidates.items():
        if ds:
            reach = [len(_Region(program, {s: d}).axis) for d in ds]
            dims[s] = ds[reach.index(max(reach))]
    for s in [s for s in dims if len(candidates[s]) > 1]:
        near = {t: d for t, d in dims.items() if t is not s and abs(program.at[t] - program.at[s]) <= WINDOW}
        saved = [_Region(program, {**near, s: d}).saved() for d in candidates[s]]
        if max(saved) > saved[candidates[s].index(dims[s])]:
            dims[s] = candidates[s][saved.index(max(saved))]
    return dims


@dataclass
class _Region:
    """The values whose blocks along an axis (`axis`) stay on their column,
    grown from the sums `sources` names, each with its axis."""

    program: _Program
    sources: dict[shard.AllReduceOp, int]
    axis: dict[SSAValue, int] = field(default_factory=dict)
    ops: list[Operation] = field(default_factory=list)

    def __post_init__(self) -> None:
        program = self.program
        at = program.at
        horizon = max(at[s] for s in self.sources)
        for op in program.ops[min(at[s] for s in self.sources):]:
            if at[op] > horizon:
                break
            if op in self.sources:
                d = self.sources[op]  # pyright: ignore[reportArgumentType]
            elif not any(v in self.axis for v in op.operands) or (d := self._follow(op)) is None:
                continue
            else:
                self.ops.append(op)
            self.axis[op.results[0]] = d
            # (the results' return is no op of a region: the walk need not reach it)
            horizon = max([horizon, *(program.place(u.operation) for u in op.results[0].uses
                                      if not isinstance(u.operation, func.ReturnOp))])

    def uniform(self, v: SSAValue) -> bool:
        return self.program.same.get(v, False)

    def _splittable(self, v: SSAValue, d: int) -> bool:
        return self.program.splittable(v, d)

    def _aligned(self, op: Operation, v: SSAValue) -> int | None:
        """The axis of `v`, an input `op` reads, that takes the column's block (None: it is read whole)."""
        k = self.axis[op.results[0]] - (len(shape(op.results[0])) - len(shape(v)))
        if k < 0 or isinstance(op, tir.MatmulOp) or shape(v)[k] != shape(op.results[0])[self.axis[op.results[0]]]:
            return None
        return k if self._splittable(v, k) else None

    # -- the axis an op's result keeps -------------------------------------------------

    def _follow(self, op: Operation) -> int | None:
        out = shape(op.results[0]) if len(op.results) == 1 else None
        if out is None:
            return None
        if isinstance(op, _ELEMENTWISE):
            return self._broadcasting(list(op.operands), out)
        if isinstance(op, tir.MatmulOp):
            return self._matmul(op, out)
        d = next(self.axis[v] for v in op.operands if v in self.axis)
        if isinstance(op, tir.ConcatOp):
            if op.axis.value.data % len(out) == d:
                return None
            return d if all(self.axis.get(v) == d or self._splittable(v, d) for v in op.operands) else None
        if op.operands[0] not in self.axis:
            return None
        if isinstance(op, tir.ReshapeOp):
            return _reshaped(shape(op.operands[0]), out, d, self.program.parts)
        if isinstance(op, tir.TransposeOp):
            return list(op.perm.get_values()).index(d)
        if isinstance(op, tir.BroadcastOp):
            at = d + len(out) - len(shape(op.operands[0]))
            return at if out[at] == shape(op.operands[0])[d] else None
        if isinstance(op, tir.StridedSliceOp):
            return None if d in [a % len(out) for a in op.axes.get_values()] else d
        if isinstance(op, tir.SoftmaxOp):
            return None if op.axis.value.data % len(out) == d else d
        return None

    def _broadcasting(self, operands: list[SSAValue], out: list[int], splittable: bool = True) -> int | None:
        """The output axis every operand's blocks align to, the others being the same on each device
        and of size 1 (or absent) there, or (`splittable`) inputs the rows split along it."""
        at = {self.axis[v] + len(out) - len(shape(v)) for v in operands if v in self.axis}
        if len(at) != 1:
            return None
        (d,) = at
        for v in operands:
            k = d - (len(out) - len(shape(v)))
            if v in self.axis:
                if shape(v)[k] != out[d]:
                    return None
            elif not (self.uniform(v) and (k < 0 or shape(v)[k] == 1)) and \
                    not (splittable and k >= 0 and shape(v)[k] == out[d] and self._splittable(v, k)):
                return None
        return d

    def _matmul(self, op: tir.MatmulOp, out: list[int]) -> int | None:
        lhs, rhs = op.lhs, op.rhs
        if op.bias is not None or len(shape(lhs)) < 2 or len(shape(rhs)) < 2:
            return None
        r = len(out)
        dl, dr = self.axis.get(lhs), self.axis.get(rhs)
        if dl == len(shape(lhs)) - 1 or dr == len(shape(rhs)) - 2:
            return None  # the contracted axis
        if dl == len(shape(lhs)) - 2:
            return r - 2 if dr is None and self.uniform(rhs) else None
        if dr == len(shape(rhs)) - 1:
            return r - 1 if dl is None and self.uniform(lhs) else None
        # batch axes broadcast as element-wise ones do (the last two axes are the product's own); an input
        # the rows split is not taken here
        return self._broadcasting([lhs, rhs], out, splittable=False)

    # -- the rewrite -----------------------------------------------------------------------

    def saved(self) -> int:
        """The bytes the parts worth rewriting save."""
        return sum(p.saving() for p in self._parts() if p.worth())

    def rewrite_cheaper_parts(self) -> None:
        """Each connected part of the region rewritten where its all-gathers carry fewer bytes than its sums."""
        for part in self._parts():
            if part.worth():
                part.rewrite()
                self.program.renumber()

    def _parts(self) -> list[_Part]:
        owner: dict[object, object] = {}

        def find(x: object) -> object:
            while owner.setdefault(x, x) is not x:
                x = owner[x]
            return x

        def union(a: object, b: object) -> None:
            owner[find(a)] = find(b)

        for op in self.ops:
            for v in op.operands:
                if v in self.axis:
                    union(op, v.owner)
                elif self._aligned(op, v) is not None:
                    union(op, v)
        parts: dict[object, _Part] = {}
        for x in [*self.sources, *self.ops]:
            part = parts.setdefault(find(x), _Part(self))
            (part.sources if x in self.sources else part.ops).append(x)
            part.inside.add(x)
        for op in self.ops:
            for v in op.operands:
                if v not in self.axis and (k := self._aligned(op, v)) is not None:
                    parts[find(op)].args[v] = k  # pyright: ignore[reportArgumentType]
        return list(parts.values())


@dataclass
class _Part:
    """A connected part of a region: its sums, its ops and the inputs it splits."""

    region: _Region
    sources: list[Operation] = field(default_factory=list)
    ops: list[Operation] = field(default_factory=list)
    args: dict[BlockArgument, int] = field(default_factory=dict)
    inside: set[Operation] = field(default_factory=set)

    @property
    def program(self) -> _Program:
        return self.region.program

    @property
    def returned(self) -> func.ReturnOp:
        last = self.program.block.last_op
        assert isinstance(last, func.ReturnOp)
        return last

    def _kept_result(self, index: int, d: int) -> bool:
        """A result split by the rows along `d`: each column returns its block of the row's."""
        f, n = self.program.f, len(self.returned.operands)
        return split_axes(f.res_attrs, n)[index] == d and split_blocks(f.res_attrs, n)[index] == self.program.rows

    def leaving(self) -> list[SSAValue]:
        """The part's values an op outside it reads (a result kept split is not)."""
        axis = self.region.axis
        held = [o.results[0] for o in [*self.sources, *self.ops]]
        ret = self.returned
        return [v for v in held if any(u.operation not in self.inside and not (
            u.operation is ret and self._kept_result(u.index, axis[v])) for u in v.uses)]

    def saving(self) -> int:
        """The bytes all-reduced less those all-gathered (a ring all-reduce is a reduce-scatter and an
        all-gather of the same bytes)."""
        gathered = sum(tensor_nbytes(v.type) for v in self.leaving())
        return sum(tensor_nbytes(s.results[0].type) for s in self.sources) - gathered

    def worth(self) -> bool:
        """Its inputs read nowhere else, and fewer bytes all-gathered than all-reduced."""
        return self.saving() > 0 and all(u.operation in self.inside for a in self.args for u in a.uses)

    def sliced(self, v: SSAValue, d: int) -> TensorType:
        t = v.type
        assert isinstance(t, TensorType)
        dims = shape(v)
        dims[d] //= self.program.parts
        return TensorType(t.element_type, dims)

    def rewrite(self) -> None:
        """Its inputs split over every device, its sums reduce-scattered, its ops on blocks, an all-gather
        of each value that leaves it, its results kept split; the old ops erased."""
        program, axis, f = self.program, self.region.axis, self.program.f
        new: dict[SSAValue, SSAValue] = {}
        for a, d in self.args.items():
            new[a] = Rewriter.replace_value_with_new_type(a, self.sliced(a, d))
        f.arg_attrs = _rows_and_columns(f.arg_attrs, len(f.args), {a.index for a in self.args})
        new.update(_scatter(self))
        for op in self.ops:
            clone = type(op).create(operands=[new.get(v, v) for v in op.operands],
                                    result_types=[self.sliced(op.results[0], axis[op.results[0]])],
                                    properties=dict(op.properties), attributes=dict(op.attributes))
            new[op.results[0]] = insert_named(clone, op, op.results[0])
        ret = self.returned
        kept = {u.index for s in [*self.sources, *self.ops] for u in s.results[0].uses
                if u.operation is ret and self._kept_result(u.index, axis[s.results[0]])}
        for v in self.leaving():
            made = new[v].owner
            assert isinstance(made, Operation) and made.parent is not None
            whole = shard.AllGatherOp(new[v], program.grid, program.axes, axis[v], v.type)
            whole.location = made.location
            made.parent.insert_op_after(whole, made)
            whole.results[0].name_hint = v.name_hint
            v.replace_uses_with_if(whole.results[0], lambda use: use.operation not in self.inside and not (
                use.operation is ret and use.index in kept))
        ret.operands = [new[v] if i in kept else v for i, v in enumerate(ret.operands)]
        f.res_attrs = _rows_and_columns(f.res_attrs, len(ret.operands), kept)
        for op in reversed([x for x in program.block.ops if x in self.inside]):
            op.detach()
            op.erase(safe_erase=False)
        f.update_function_type()


def _scatter(part: _Part) -> dict[SSAValue, SSAValue]:
    """Each source's operand reduce-scattered along its axis: in one message where every operand is made
    before any sum is read (Galaxy's heads made by one reduce-scatter), each operand's blocks as rows."""
    program, axis = part.program, part.region.axis
    at, grid, axes, parts = program.at, program.grid, program.axes, program.parts
    sources = sorted(part.sources, key=at.__getitem__)
    first_read = min((program.place(u.operation) for s in sources for u in s.results[0].uses),
                     default=len(at))
    made = max((at[o.operands[0].owner] for o in sources if isinstance(o.operands[0].owner, Operation)), default=-1)
    if len(sources) == 1 or made >= first_read:
        return {s.results[0]: insert_named(shard.ReduceScatterOp(s.operands[0], grid, axes, axis[s.results[0]],
                                                            part.sliced(s.results[0], axis[s.results[0]])),
                                      s, s.results[0]) for s in sources}
    first = next(o for o in program.block.ops if at[o] > made)
    flat = [_blocks_first(s.operands[0], axis[s.results[0]], parts, first) for s in sources]
    joined = insert_named(tir.ConcatOp(flat, 1), first, sources[0].results[0])
    total = sum(shape(v)[1] for v in flat)
    element = part.sliced(sources[0].results[0], 0).element_type
    mine = insert_named(shard.ReduceScatterOp(joined, grid, axes, 0, TensorType(element, [1, total])), first,
                   sources[0].results[0])
    out: dict[SSAValue, SSAValue] = {}
    start = 0
    for s, v in zip(sources, flat):
        width = shape(v)[1]
        piece = insert_named(tir.StridedSliceOp(mine, [1], [start], [start + width], [1]), first, s.results[0])
        sliced = part.sliced(s.results[0], axis[s.results[0]])
        out[s.results[0]] = insert_named(tir.ReshapeOp(piece, list(sliced.get_shape())), first, s.results[0])
        start += width
    return out


def _blocks_first(v: SSAValue, d: int, parts: int, before: Operation) -> SSAValue:
    """`v` as [parts, rest], row c holding block c of its axis `d` (the axes before `d` moved after it)."""
    dims = shape(v)
    lead, rest = math.prod(dims[:d]), math.prod(dims[d:]) // parts
    if lead == 1:
        return insert_named(tir.ReshapeOp(v, [parts, rest]), before, v)
    split = insert_named(tir.ReshapeOp(v, [lead, parts, rest]), before, v)
    moved = insert_named(tir.TransposeOp(split, [1, 0, 2]), before, v)
    return insert_named(tir.ReshapeOp(moved, [parts, lead * rest]), before, v)


def _reshaped(src: list[int], out: list[int], d: int, parts: int) -> int | None:
    """The output axis a reshape takes input axis `d`'s blocks to: the one after the same leading elements,
    divisible by the parts (then each part's run of elements is one block of it)."""
    lead = math.prod(src[:d])
    for k in range(len(out)):
        if math.prod(out[:k]) == lead and out[k] % parts == 0 and out[k] >= parts:
            return k
    return None


def _rows_and_columns(attrs: ArrayAttr[DictionaryAttr] | None, count: int,
                      indices: set[int]) -> ArrayAttr[DictionaryAttr] | None:
    """Argument or result attributes with the entries `indices` names split over every device, not by rows."""
    if not indices:
        return attrs
    entries = [dict(d.data) if isinstance(d, DictionaryAttr) else {} for d in (attrs.data if attrs else [])]
    entries += [{} for _ in range(count - len(entries))]
    for i in indices:
        assert SPLIT_AXIS in entries[i]
        entries[i].pop(SPLIT_BLOCKS, None)
    return ArrayAttr([DictionaryAttr(e) for e in entries])
