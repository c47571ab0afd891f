"""A fused projection (GPT-2's `c_attn`, Phi-3's `qkv_proj` and
`gate_up_proj`, Falcon's and GPT-BigCode's `query_key_value`): one Linear
whose output is taken apart by columns. Column-parallel, it is packed: its
columns permuted so that device d holds the d-th block of every part. A
part whose heads the devices do not divide (a multi-query projection's one
K/V head) cannot be split so: the projection becomes two Linears, the
parts that divide (column-parallel, packed) and the others, whole on every
device, as Megatron keeps K/V with fewer heads than devices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from xdsl.ir import Operation, SSAValue

from forge_opt.diagnostics import describe
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.transforms.tp.rules import TPError, constant_root, shape

#: inserts an op before another; its result
Insert = Callable[[Operation, Operation], SSAValue]


@dataclass
class Fused:
    """A Linear's output taken apart along its columns: by one `Split`, by
    `Slice`s that cover the columns once, or by `Slice`s of its reshape to
    [..., heads, head_dim] along the heads (Falcon's)."""

    chain: list[Operation]  # from the Linear to `value`: bias adds of a [width] constant, reshapes keeping the width
    value: SSAValue  # what is taken apart
    users: list[Operation]  # the Split, or the Slices
    parts: list[tuple[int, int]]  # (first column, columns) of each part, in column order
    results: list[SSAValue]  # each part as the model reads it, in column order
    head_dim: int | None = None  # known from a reshape to heads before the Slices

    @property
    def biases(self) -> list[tir.BinaryOp]:
        return [op for op in self.chain if isinstance(op, tir.BinaryOp)]


def bias_index(add: tir.BinaryOp, v: SSAValue | None = None) -> int:
    """Which operand of a bias add is the bias: a constant (`constant_root`),
    or the one that is not `v`."""
    if v is not None:
        return 1 if add.lhs is v else 0
    return 0 if constant_root(add.lhs) is not None else 1


def _slice_part(op: Operation, axis: int, size: int) -> tuple[int, int] | None:
    """The (first, count) a unit-stride Slice of `axis` alone takes."""
    if not isinstance(op, tir.StridedSliceOp):
        return None
    rank = len(shape(op.input))
    if [a % rank for a in op.axes.get_values()] != [axis % rank] or list(op.strides.get_values()) != [1]:
        return None
    begin, end = op.begin.get_values()[0], op.end.get_values()[0]
    begin, end = (begin + size if begin < 0 else begin), (end + size if end < 0 else min(end, size))
    return (begin, end - begin) if 0 <= begin < end else None


def _covering(users: list[Operation], axis: int, size: int, unit: int) -> list[tuple[tuple[int, int], Operation]]:
    """The Slices, in order, if they take `axis` apart once (parts in columns: `unit` per index)."""
    parts = [part for u in users if (part := _slice_part(u, axis, size)) is not None]
    if len(users) < 2 or len(parts) != len(users):
        return []
    ordered = sorted(zip(parts, users), key=lambda pu: pu[0])
    ends = [0] + [b + n for (b, n), _ in ordered]
    if not all(b == e for ((b, _), _), e in zip(ordered, ends)) or ends[-1] != size:
        return []
    return [((b * unit, n * unit), u) for (b, n), u in ordered]


def fused_parts(y: SSAValue) -> Fused | None:
    """The bias adds and the parts that follow a Linear's result `y` through
    single uses, if it is taken apart by columns."""
    v, width, chain = y, shape(y)[-1], []
    while True:
        users = [u.operation for u in v.uses]
        if len(users) == 1 and isinstance(users[0], tir.SplitOp):
            split_op = users[0]
            if split_op.axis.value.data != len(shape(v)) - 1 or len(split_op.results) < 2:
                return None
            sizes = list(split_op.sections.get_values())
            offsets = [sum(sizes[:i]) for i in range(len(sizes))]
            return Fused(chain, v, [split_op], list(zip(offsets, sizes)), list(split_op.results))
        if covered := _covering(users, -1, width, 1):
            return Fused(chain, v, [u for _, u in covered], [p for p, _ in covered], [u.results[0] for _, u in covered])
        if len(users) != 1:
            return None
        user = users[0]
        if isinstance(user, tir.ReshapeOp) and _splits_heads(shape(v), shape(user.output)):
            heads, dim = shape(user.output)[-2:]
            covered = _covering([u.operation for u in user.output.uses], -2, heads, dim)
            if not covered:
                return None
            return Fused(chain, v, [u for _, u in covered], [p for p, _ in covered], [u.results[0] for _, u in covered],
                         dim)
        if isinstance(user, tir.ReshapeOp) and shape(user.output)[-1:] == [width]:  # (a scalar has no last dim)
            chain.append(user)
            v = user.output
        elif isinstance(user, tir.BinaryOp) and user.fn.data == BinaryFn.ADD:
            other = user.operands[bias_index(user, v)]
            if not (constant_root(other) is not None and shape(other) == [width]):
                return None
            chain.append(user)
            v = user.output
        else:
            return None


def _splits_heads(before: list[int], after: list[int]) -> bool:
    """A reshape of the last dim into [heads, head_dim], the others kept;
    not one into [1, width] (GPT-2's [tokens, width] back to [batch, tokens,
    width] at one token, which keeps the width)."""
    return len(after) == len(before) + 1 and after[:-2] == before[:-1] and after[-2] * after[-1] == before[-1] \
        and after[-2] > 1


def head_dim(fused: Fused) -> int | None:
    """The head width: from the reshape the Slices take heads of, or from a
    part's own reshape to [..., heads, head_dim] through single uses."""
    if fused.head_dim is not None:
        return fused.head_dim
    for v in fused.results:
        while v.uses.get_length() == 1:
            user = next(iter(v.uses)).operation
            if not isinstance(user, tir.ReshapeOp):
                break
            before, after = shape(v), shape(user.output)
            if len(after) >= 2 and before and after[-1] < before[-1] and after[-2] * after[-1] == before[-1]:
                return after[-1]
            if after[-2:] == [1, before[-1]] and len(after) == len(before) + 1:  # one head (a multi-query K/V)
                return after[-1]
            if after[-1] != before[-1]:
                break
            v = user.output
    return None


def whole_parts(fused: Fused, devices: int) -> list[bool]:
    """Which parts stay whole on every device: those of whole heads that the
    devices do not divide (one K/V head of multi-query attention)."""
    dim = head_dim(fused)
    return [dim is not None and n % dim == 0 and (n // dim) % devices != 0 for _, n in fused.parts]


def unfuse(matmul: tir.MatmulOp, fused: Fused, whole: list[bool],
           insert: Callable[[Operation], SSAValue]) -> tuple[tir.MatmulOp, tir.MatmulOp]:
    """Two Linears in place of `matmul`: the parts to split and the parts
    kept whole, each with its columns of the weight and the biases; each
    part's readers read its columns of one. `insert` adds an op after the
    last it added (where the annotator's walk will reach it)."""
    made = []
    for keep in (False, True):
        chosen = [(part, result) for part, result, w in zip(fused.parts, fused.results, whole) if w == keep]
        columns = np.asarray([c for (b, n), _ in chosen for c in range(b, b + n)], np.int64)
        index = insert(tir.ConstantOp(array_to_attr(columns)))
        linear = tir.MatmulOp(matmul.lhs, insert(tir.GatherOp(matmul.rhs, index, 1)))
        y = insert(linear)
        made.append(linear)
        for op in fused.chain:  # its biases' columns, its reshapes with the width it has
            if isinstance(op, tir.BinaryOp):
                bias = op.operands[bias_index(op)]
                y = insert(tir.BinaryOp(BinaryFn.ADD, y, insert(tir.GatherOp(bias, index, 0))))
            else:
                y = insert(tir.ReshapeOp(y, [*shape(op.results[0])[:-1], len(columns)]))
        offset = 0
        for (_, n), result in chosen:
            piece = y if len(chosen) == 1 else insert(
                tir.StridedSliceOp(y, [len(shape(y)) - 1], [offset], [offset + n], [1]))
            offset += n
            shaped = piece if shape(piece) == shape(result) else insert(tir.ReshapeOp(piece, shape(result)))
            shaped.name_hint = result.name_hint
            result.replace_all_uses_with(shaped)
    return made[0], made[1]


def packed_order(parts: list[int], devices: int) -> list[int]:
    """The order (device, part, i) of parts of these sizes, one after the
    other: device d's block of each part, part after part."""
    offsets = [sum(parts[:i]) for i in range(len(parts))]
    return [b + d * (n // devices) + i for d in range(devices) for b, n in zip(offsets, parts)
            for i in range(n // devices)]


def permuted(v: SSAValue, order: list[int], axis: int, before: Operation, insert: Insert) -> SSAValue:
    """`v` with its `axis` in `order` (a gather of a constant index)."""
    index = insert(tir.ConstantOp(array_to_attr(np.asarray(order, np.int64))), before)
    return insert(tir.GatherOp(v, index, axis), before)


def pack(matmul: tir.MatmulOp, fused: Fused, devices: int, insert: Insert) -> None:
    """Permute the Linear's columns (and its biases') so that device d holds
    the d-th block of every part; each part read per device."""
    p = devices
    if any(n % p for _, n in fused.parts):
        raise TPError(
            f"{describe(fused.users[0])}: takes the fused projection of {describe(matmul)} apart into parts "
            f"of {[n for _, n in fused.parts]} columns, which the {p} devices do not all divide"
        )
    width = shape(matmul.rhs)[1]
    order = packed_order([n for _, n in fused.parts], p)  # the parts cover the columns in order
    matmul.operands[1] = permuted(matmul.rhs, order, 1, matmul, insert)
    for add in fused.biases:
        index = bias_index(add)
        add.operands[index] = permuted(add.operands[index], order, 0, add, insert)
    # each part: its columns of every device's block, [..., P, width/P] sliced, read in its shape again
    z, first = fused.value, fused.users[0]
    outer = shape(z)[:-1]
    blocks = insert(tir.ReshapeOp(z, [*outer, p, width // p]), first)
    last = len(outer) + 1
    if isinstance(first, tir.SplitOp):
        pieces = tir.SplitOp(blocks, last, [n // p for _, n in fused.parts])
        insert(pieces, first)
        taken = list(zip(fused.results, pieces.results))
    else:
        taken = [(result, insert(tir.StridedSliceOp(blocks, [last], [b // p], [(b + n) // p], [1]), user))
                 for user, result, (b, n) in zip(fused.users, fused.results, fused.parts)]
    for old, piece in taken:
        old.replace_all_uses_with(insert(tir.ReshapeOp(piece, shape(old)), old.owner))  # pyright: ignore
    taken_apart = {user.operands[0].owner for user in fused.users}  # `z`, or its reshape to heads
    for user in fused.users:
        user.detach()
        user.erase()
    for op in taken_apart:
        if isinstance(op, tir.ReshapeOp) and not op.output.uses:
            op.detach()
            op.erase()
