"""Channels taken apart and joined, as a CNN does between its convolutions
(YOLOv8's C2f: a convolution's output `Split` in two by channels, the parts
and what is made of them joined again by a `Concat` before the next one).

Split by channels across the devices, a part of the channels is no block of
them: device d holds the d-th block of the whole, not of each part. As the
fused projections are packed (`fused_parts`), the channels are permuted so
that device d holds its block of every part:

- An output-channel convolution whose output (through per-channel
  element-wise ops, an activation) one channel `Split` takes apart, into
  parts read only by what keeps them split by channels (convolutions,
  element-wise ops, a Concat as below), has its output channels (weight
  and bias) permuted, device by device, part by part; each part is then
  read as the device's block of it.
- A channel `Concat` of values split by channels (or replicated: sliced at
  no cost), read only by convolutions, joins each device's blocks; the
  channels it makes are permuted so, and each convolution reading them has
  its input channels permuted alike, so it computes what it did.

The global program stays exact: a permutation of channels, undone by the
weights that read them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Operation, SSAValue

from forge_opt.dialects import tir
from forge_opt.transforms.tp.fused_parts import Insert, packed_order, permuted
from forge_opt.transforms.tp.rules import Sharding, constant_weight, shape


def _scalar_constant(v: SSAValue) -> bool:
    return isinstance(v.owner, tir.ConstantOp) and all(d == 1 for d in shape(v))


def channel_split(y: SSAValue) -> tir.SplitOp | None:
    """The one channel `Split` that takes a convolution's output `y` apart,
    if every other op reading `y` on the way is element-wise per channel
    (unary ops; binary ops of such values or of a scalar constant: SiLU's
    x·sigmoid(x))."""
    values, todo, found = {y}, [y], None
    chain: list[Operation] = []
    while todo:
        for use in todo.pop().uses:
            user = use.operation
            if isinstance(user, tir.SplitOp):
                if found not in (None, user) or user.axis.value.data != 1 or len(user.results) < 2:
                    return None
                found = user
            elif isinstance(user, tir.UnaryOp | tir.BinaryOp) and shape(user.results[0]) == shape(y):
                if user.results[0] not in values:
                    values.add(user.results[0])
                    todo.append(user.results[0])
                    chain.append(user)
            else:
                return None
    if found is None or any(v not in values and not _scalar_constant(v) for op in chain for v in op.operands):
        return None
    return found


def parts_stay_split(split_op: tir.SplitOp, devices: int) -> bool:
    """Whether every reader of the parts keeps them split by channels: a
    convolution reading one as its input, an element-wise op, a Concat that
    `packable_concat` can take. (A part read whole would be gathered part by
    part: one gather of the whole before the Split costs less.)"""
    return all(
        (isinstance(u.operation, tir.Conv2dOp) and u.index == 0)
        or isinstance(u.operation, tir.UnaryOp | tir.BinaryOp)
        or (isinstance(u.operation, tir.ConcatOp) and _joined_for_convs(u.operation, devices))
        for part in split_op.results for u in part.uses
    )


def pack_split(conv: tir.Conv2dOp, split_op: tir.SplitOp, devices: int, insert: Insert) -> None:
    """Permute the output channels of `conv` (weight and bias) so device d
    holds its block of every part of `split_op`, which then takes each
    device's block apart."""
    parts = list(split_op.sections.get_values())
    order = packed_order(parts, devices)
    conv.operands[1] = permuted(conv.weight, order, 0, conv, insert)
    if conv.bias is not None:
        conv.operands[2] = permuted(conv.bias, order, 0, conv, insert)
    z = split_op.input
    n, c, *rest = shape(z)
    blocks = insert(tir.ReshapeOp(z, [n, devices, c // devices, *rest]), split_op)
    pieces = tir.SplitOp(blocks, 2, [k // devices for k in parts])
    insert(pieces, split_op)
    for old, piece in zip(split_op.results, pieces.results):
        old.replace_all_uses_with(insert(tir.ReshapeOp(piece, shape(old)), split_op))
    split_op.detach()
    split_op.erase()


def packable_concat(op: tir.ConcatOp, given: Sequence[Sharding], devices: int) -> bool:
    """A channel `Concat` of values split by channels (some may be
    replicated), each part's channels a multiple of the devices, read by
    convolutions alone (as their input, with a constant weight)."""
    if any(g.partial or g.axis not in (None, 1) for g in given) or all(g.axis is None for g in given):
        return False
    return _joined_for_convs(op, devices)


def _joined_for_convs(op: tir.ConcatOp, devices: int) -> bool:
    """A channel Concat of parts the devices divide, read by convolutions
    alone (as their input, with a constant weight)."""
    if op.axis.value.data != 1 or len(shape(op.output)) != 4 or not op.output.uses:
        return False
    if any(shape(v)[1] % devices for v in op.operands):
        return False
    return all(isinstance(u.operation, tir.Conv2dOp) and u.index == 0 and u.operation.groups.value.data == 1
               and constant_weight(u.operation.weight, 4) for u in op.output.uses)


def pack_concat(op: tir.ConcatOp, devices: int, after: Callable[[Operation], SSAValue], insert: Insert) -> None:
    """Join each device's blocks of the parts (`after` adds ops after the
    last it added, where the annotator's walk reaches them) and permute the
    input channels of every convolution reading the result alike."""
    pieces = []
    for v in op.operands:
        n, c, *rest = shape(v)
        pieces.append(after(tir.ReshapeOp(v, [n, devices, c // devices, *rest])))
    joined = after(tir.ReshapeOp(after(tir.ConcatOp(pieces, 2)), shape(op.output)))
    joined.name_hint = op.output.name_hint
    order = packed_order([shape(v)[1] for v in op.operands], devices)
    for use in list(op.output.uses):
        conv = use.operation
        assert isinstance(conv, tir.Conv2dOp)
        conv.operands[1] = permuted(conv.weight, order, 1, conv, insert)
    op.output.replace_all_uses_with(joined)
