"""`stack-experts`: a mixture of experts' E expert computations as one,
batched over a leading expert axis, so that devices can share the experts
(expert parallelism: `tensor-parallel`'s "expert" case).

At a fixed size (`frontends/onnx/dispatch.py`) an MoE layer is E copies of
one computation (the expert's MLP on every token, its routing weight, its
rows' validity) that differ only in their weights and in which expert's row
of the router's choices they slice, summed by a chain of Adds. The copies
are matched op by op: the same op, properties and types, each operand the
same value in every copy, equal computations, constants, or the slices
e = 0..E-1 of one value. The chain's sum then becomes one copy batched over
the experts (their constants stacked to [E, ...], their slices one
transpose of the value sliced) summed over that axis by one ReduceSum.

Only addends whose copies hold a matmul on stacked weights (experts, not
any sum of like terms) are stacked, and only when nothing outside the sum
reads a copy's values; otherwise the chain stays as it is.

`onnx-to-forge{devices=P}` runs it; one device's program keeps the copies,
since its module loads each weight by the model's initializer name, which a
stack of them does not have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, TensorType, i64
from xdsl.dialects.func import FuncOp
from xdsl.ir import Block, Operation, OpResult, SSAValue
from xdsl.passes import ModulePass

from forge_opt.diagnostics import node_name
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.tir_base import ints_attr, shape_of
from forge_opt.dialects.tir_functions import BinaryFn, ReduceFn
from forge_opt.transforms.lowering import erase_dead_ops
from forge_opt.transforms.merge_equal_ops import COMPARED_BYTES
from forge_opt.xdsl_internals import name_loc

_ELEMENTWISE = (tir.UnaryOp, tir.CastOp, tir.ClipOp, tir.BinaryOp, tir.WhereOp)
#: ops with one axis property, moved past the expert axis
_ONE_AXIS = (tir.ArgmaxOp, tir.SoftmaxOp, tir.CumsumOp)
#: how far back from the sum copies are matched (Python's recursion stays well inside its limit)
MAX_DEPTH = 200
_BATCHED = (*_ELEMENTWISE, *_ONE_AXIS, tir.MatmulOp, tir.ReshapeOp, tir.TransposeOp, tir.StridedSliceOp,
            tir.ReduceOp, tir.GatherOp)


@dataclass(frozen=True)
class _Shared:
    """One value every copy reads (or equal computations of it)."""

    value: SSAValue


@dataclass(frozen=True)
class _Constants:
    """A constant per copy, with different values: stacked."""

    values: tuple[SSAValue, ...]


@dataclass(frozen=True)
class _Slices:
    """Copy e reads index `first` + e of `source`'s `axis`."""

    source: SSAValue
    axis: int
    first: int
    result: SSAValue  # copy 0's


@dataclass(frozen=True)
class _Copies:
    """The same op in every copy, on operands that differ."""

    ops: tuple[Operation, ...]
    operands: tuple[_Node, ...]


_Node = _Shared | _Constants | _Slices | _Copies


@dataclass
class _Matcher:
    """Matches E values op by op back to what they share."""

    memo: dict[tuple[SSAValue, ...], _Node | None] = field(default_factory=dict)

    def match(self, values: tuple[SSAValue, ...], depth: int = 0) -> _Node | None:
        if values not in self.memo:
            self.memo[values] = self._match(values, depth) if depth < MAX_DEPTH else None
        return self.memo[values]

    def _match(self, values: tuple[SSAValue, ...], depth: int) -> _Node | None:
        first = values[0]
        if all(v is first for v in values):
            return _Shared(first)
        results = [v for v in values if isinstance(v, OpResult)]
        ops = tuple(r.op for r in results)
        if len(ops) != len(values) or any(type(r.op) is not type(ops[0]) or r.type != first.type
                                          or r.index != results[0].index for r in results):
            return None
        op = ops[0]
        if isinstance(op, tir.ConstantOp):
            return _constants([o for o in ops if isinstance(o, tir.ConstantOp)], values)
        if isinstance(op, tir.StridedSliceOp) and (slices := _slices(values)) is not None:
            return slices
        if any(o.properties != op.properties or o.attributes != op.attributes or len(o.operands) != len(op.operands)
               for o in ops):
            return None
        operands = []
        for i in range(len(op.operands)):
            node = self.match(tuple(o.operands[i] for o in ops), depth + 1)
            if node is None:
                return None
            operands.append(node)
        if all(isinstance(n, _Shared) for n in operands):
            return _Shared(first)  # equal computations
        if not isinstance(op, _BATCHED) or not _batchable(op, operands):
            return None
        return _Copies(ops, tuple(operands))


def _constants(ops: list[tir.ConstantOp], values: tuple[SSAValue, ...]) -> _Node | None:
    """Stacked, unless equal. Model weights and constants over 1 MiB are
    not compared (that would read them): stacking equal ones is exact too."""
    try:
        arrays = [attr_to_array(o.value) for o in ops]
    except ValueError:
        return None
    compared = not any(o.weight_name is not None or a.nbytes > COMPARED_BYTES for o, a in zip(ops, arrays))
    if compared and all(np.array_equal(a, arrays[0]) for a in arrays[1:]):
        return _Shared(values[0])
    return _Constants(values)


def _slices(values: tuple[SSAValue, ...]) -> _Slices | None:
    """Index e (from some first) of one value's axis, in copy e."""
    ops = [v.owner for v in values if isinstance(v.owner, tir.StridedSliceOp)]
    if len(ops) != len(values) or len(ops[0].slices()) != 1 or any(o.input is not ops[0].input for o in ops):
        return None
    [(axis, first, _, _)] = ops[0].slices()
    size = shape_of(ops[0].input.type)[axis]
    for e, o in enumerate(ops):
        [(a, begin, end, stride)] = o.slices()
        if (a, begin, end, stride) != (axis, first + e, first + e + 1, 1) or begin < 0 or end > size:
            return None
    return _Slices(ops[0].input, axis, first, values[0])


def _batchable(op: Operation, operands: list[_Node]) -> bool:
    """Whether the op has a batched form for these operands."""
    if isinstance(op, tir.MatmulOp):
        return op.bias is None and all(len(shape_of(v.type)) >= 2 for v in (op.lhs, op.rhs))
    if isinstance(op, tir.GatherOp):
        table, indices = (not isinstance(n, _Shared) for n in operands)  # which differ by copy
        # a table per copy read at shared indices, or one table at indices per copy, gathered along axis 0
        # (where the experts' axis of the indices leads the result)
        return table != indices and (table or op.axis.value.data % len(shape_of(op.input.type)) == 0)
    return True


def _common_name(names: list[str]) -> str:
    """`experts.0.w`, `experts.1.w` as `experts.*.w`."""
    if all(n == names[0] for n in names):
        return names[0]
    prefix = _common_start(names)
    suffix = _common_start([n[len(prefix):][::-1] for n in names])[::-1]
    return f"{prefix}*{suffix}"


def _name_of_all(ops: Sequence[Operation]) -> str | None:
    """The ONNX node name `ops` share (`experts.*.up`); None unless each has one."""
    names = [n for n in map(node_name, ops) if n]
    return _common_name(names) if ops and len(names) == len(ops) else None


def _common_start(names: list[str]) -> str:
    n = 0
    while all(len(s) > n and s[n] == names[0][n] for s in names):
        n += 1
    return names[0][:n]


@dataclass
class _Builder:
    """The copies as one, batched over a leading axis of E."""

    before: Operation
    experts: int
    built: dict[int, SSAValue] = field(default_factory=dict)

    def add(self, op: Operation, *like: Operation) -> SSAValue:
        """Insert `op`, named for the ops it stands for (`experts.*.up`)."""
        name = _name_of_all(like)
        if name is not None:
            op.location = name_loc(name)
        hints = [h for h in (o.results[0].name_hint for o in like) if h]
        if like and len(hints) == len(like):  # `experts_0_up_output`, `experts_1_up_output` as `experts_up_output`
            op.results[0].name_hint = _common_name(hints).replace("_*_", "_").replace("*", "")
        block = self.before.parent_block()
        assert block is not None
        block.insert_op_before(op, self.before)
        return op.results[0]

    def stacked(self, node: _Node, reader: str | None = None) -> SSAValue:
        """The node's values with the expert axis first; a shared one as it
        is. `reader` names the op reading stacked weights, which take its
        name (the experts' weights were each their own initializer)."""
        if isinstance(node, _Shared):
            return node.value
        if id(node) not in self.built:
            self.built[id(node)] = self._build(node, reader)
        return self.built[id(node)]

    def _build(self, node: _Node, reader: str | None) -> SSAValue:
        e = self.experts
        if isinstance(node, _Constants):
            owners = [v.owner for v in node.values if isinstance(v.owner, tir.ConstantOp)]
            value = np.stack([attr_to_array(o.value) for o in owners])
            weights = all(o.weight_name is not None for o in owners)
            name = (f"{reader}.weight" if reader else "experts.weight") if weights else None
            return self.add(tir.ConstantOp(array_to_attr(value), name))
        if isinstance(node, _Slices):
            rank = len(shape_of(node.source.type))
            v = node.source
            if node.axis:
                v = self.add(tir.TransposeOp(v, [node.axis, *(a for a in range(rank) if a != node.axis)]))
            if node.first or shape_of(v.type)[0] != e:
                v = self.add(tir.StridedSliceOp(v, [0], [node.first], [node.first + e], [1]))
            return self.add(tir.ReshapeOp(v, [e, *shape_of(node.result.type)]))
        assert isinstance(node, _Copies)
        op = node.ops[0]
        out = op.results[0]
        rank = len(shape_of(out.type))
        reader = _name_of_all(node.ops)
        operands = [self.stacked(n, reader) for n in node.operands]
        if isinstance(op, (*_ELEMENTWISE, tir.MatmulOp)):
            # broadcasting aligns from the right: a copy's operand of fewer dims gains 1s after the expert axis
            operands = [self._aligned(v, rank) if not isinstance(n, _Shared) else v
                        for v, n in zip(operands, node.operands)]
        props = dict(op.properties)
        if isinstance(op, tir.TransposeOp):
            props["perm"] = ints_attr([0, *(p + 1 for p in op.perm.get_values())])
        elif isinstance(op, tir.StridedSliceOp):
            props["axes"] = ints_attr([a % rank + 1 for a in op.axes.get_values()])
        elif isinstance(op, tir.ReduceOp):
            props["axes"] = ints_attr([a % len(shape_of(op.input.type)) + 1 for a in op.axes.get_values()])
        elif isinstance(op, _ONE_AXIS) or (isinstance(op, tir.GatherOp) and not isinstance(node.operands[0], _Shared)):
            props["axis"] = IntegerAttr(op.axis.value.data % len(shape_of(op.input.type)) + 1, i64)
        t = out.type
        assert isinstance(t, TensorType)
        result = TensorType(t.element_type, [e, *t.get_shape()])
        new = type(op).create(operands=operands, result_types=[result], properties=props,
                              attributes=dict(op.attributes))
        return self.add(new, *node.ops)

    def _aligned(self, v: SSAValue, rank: int) -> SSAValue:
        dims = shape_of(v.type)
        if len(dims) - 1 == rank:
            return v
        return self.add(tir.ReshapeOp(v, [dims[0], *[1] * (rank + 1 - len(dims)), *dims[1:]]))


def _adds(op: object) -> bool:
    return isinstance(op, tir.BinaryOp) and op.fn.data == BinaryFn.ADD


def _chain(end: tir.BinaryOp) -> tuple[list[tir.BinaryOp], list[SSAValue]]:
    """The Adds of a sum ending at `end` (each read by the next alone) and
    its terms, first to last."""
    adds, terms = [end], []
    op = end
    while True:
        inner = [v for v in (op.lhs, op.rhs) if _adds(v.owner) and v.uses.get_length() == 1]
        if not inner:
            terms += [op.rhs, op.lhs]
            break
        nxt = inner[0]
        terms.append(op.rhs if nxt is op.lhs else op.lhs)
        op = nxt.owner
        assert isinstance(op, tir.BinaryOp)
        adds.append(op)
    return adds, terms[::-1]


def _ops_of(node: _Node, into: set[Operation], seen: set[int]) -> None:
    if id(node) in seen or isinstance(node, _Shared):
        return
    seen.add(id(node))
    if isinstance(node, _Constants):
        into.update(v.owner for v in node.values if isinstance(v.owner, Operation))
    elif isinstance(node, _Slices):
        pass  # the slices die with their readers, or stay for others
    else:
        into.update(node.ops)
        for n in node.operands:
            _ops_of(n, into, seen)


def _has_experts(node: _Node, seen: set[int]) -> bool:
    """A matmul on a stacked weight among the copies."""
    if id(node) in seen or not isinstance(node, _Copies):
        return False
    seen.add(id(node))
    if isinstance(node.ops[0], tir.MatmulOp) and any(isinstance(n, _Constants) for n in node.operands):
        return True
    return any(_has_experts(n, seen) for n in node.operands)


def _is_zero(v: SSAValue) -> bool:
    op = v.owner
    try:
        return isinstance(op, tir.ConstantOp) and not np.any(attr_to_array(op.value))
    except ValueError:
        return False


def _stack(adds: list[tir.BinaryOp], terms: list[SSAValue]) -> bool:
    """Stack the sum of `terms` by `adds` (`_chain`) if its terms are
    copies of an expert; whether it did."""
    end = adds[0]
    # every term a copy, or all but one (the zeros the sum began from, a shared expert)
    for skip in (None, *range(len(terms))):
        base = None if skip is None else terms[skip]
        copies = terms if skip is None else terms[:skip] + terms[skip + 1:]
        if len(copies) < 2:
            continue
        node = _Matcher().match(tuple(copies))
        if node is None or not _has_experts(node, set()):
            continue
        inside: set[Operation] = set()
        _ops_of(node, inside, set())
        inside.update(adds)
        if any(use.operation not in inside for op in inside - {end} for r in op.results for use in r.uses):
            continue  # a copy's value read elsewhere
        keep_base = base is not None and not (_is_zero(base) and base.type == end.output.type)
        if not keep_base and copies[0].type != end.output.type:
            continue  # the copies broadcast against the rest of the sum (a kept base makes the sum's type)
        b = _Builder(end, len(copies))
        total = b.add(tir.ReduceOp(ReduceFn.SUM, b.stacked(node), [0], False), end)
        if keep_base:
            assert base is not None
            total = b.add(tir.BinaryOp(BinaryFn.ADD, base, total), end)
        assert total.type == end.output.type
        end.output.replace_all_uses_with(total)
        return True
    return False


def stack_experts(block: Block) -> int:
    """Stack every sum of experts in `block`; how many."""
    done: set[Operation] = set()
    count = 0
    for op in reversed(list(block.ops)):  # a sum's last Add first
        if op in done or not _adds(op):
            continue
        assert isinstance(op, tir.BinaryOp)
        adds, terms = _chain(op)
        done.update(adds)
        count += _stack(adds, terms)
    return count


@dataclass(frozen=True)
class StackExpertsPass(ModulePass):
    name = "stack-experts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.walk():
            if isinstance(func, FuncOp) and not func.is_declaration and stack_experts(func.body.block):
                erase_dead_ops(func)

