"""ONNX `Einsum` as the ops an einsum is made of: diagonals as gathers,
labels no later operand or the output needs summed away, and each pair of
operands contracted by one Matmul over (batch labels, free labels of the
left, summed labels) × (batch labels, summed labels, free labels of the
right); transposes and reshapes put the labels in place."""

from __future__ import annotations

import math
import re

import numpy as np
from xdsl.ir import SSAValue

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import ReduceFn
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

_TERM = re.compile(r"^(?:[A-Za-z]|\.\.\.)*$")


class _Operand:
    """A value with one label per axis (ellipsis axes get digit labels)."""

    def __init__(self, value: SSAValue, labels: list[str]):
        self.value = value
        self.labels = labels


def _parse(equation: str, ranks: list[int], e: TirEmitter) -> tuple[list[list[str]], list[str]]:
    text = equation.replace(" ", "")
    inputs_text, arrow, output_text = text.partition("->")
    terms = inputs_text.split(",")
    if len(terms) != len(ranks) or not all(_TERM.match(t) for t in [*terms, output_text]):
        raise e.error(f"equation '{equation}' does not fit {len(ranks)} inputs")
    ellipsis_rank = 0
    labels = []
    for term, rank in zip(terms, ranks):
        named = term.replace("...", "")
        dots = rank - len(named) if "..." in term else 0
        if dots < 0 or (dots == 0 and "..." not in term and len(named) != rank):
            raise e.error(f"'{term}' does not label the {rank} axes of its input")
        ellipsis_rank = max(ellipsis_rank, dots)
        before, _, after = term.partition("...")
        # ellipsis axes align from the right across operands, as they broadcast
        labels.append([*before, *(str(ellipsis_rank - dots + i) for i in range(dots)), *after])
    dots_labels = [str(i) for i in range(ellipsis_rank)]
    if arrow:
        before, has_dots, after = output_text.partition("...")
        output = [*before, *(dots_labels if has_dots else []), *after]
    else:  # implicit: the ellipsis, then the labels used once, in alphabetical order
        counts = {}
        for term_labels in labels:
            for label in term_labels:
                counts[label] = counts.get(label, 0) + 1
        output = dots_labels + sorted(k for k, c in counts.items() if c == 1 and not k.isdigit())
    return labels, output


def _diagonals(e: TirEmitter, x: _Operand) -> _Operand:
    """A label repeated within one operand takes the diagonal."""
    while len(set(x.labels)) != len(x.labels):
        label = next(k for k in x.labels if x.labels.count(k) > 1)
        first, second = (i for i, k in enumerate(x.labels) if k == label)
        rest = [i for i in range(len(x.labels)) if i not in (first, second)]
        moved = e.transpose(x.value, [*rest, first, second])
        shape = static_shape(moved, e)
        n = shape[-1]
        flat = e.reshape(moved, [*shape[:-2], n * n])
        diagonal = e.constant((np.arange(n) * (n + 1)).astype(np.int64))
        x = _Operand(e.gather(flat, diagonal, len(shape) - 2), [*(x.labels[i] for i in rest), label])
    return x


def _sum_away(e: TirEmitter, x: _Operand, keep: set[str]) -> _Operand:
    axes = [i for i, k in enumerate(x.labels) if k not in keep]
    if not axes:
        return x
    summed = e.value(tir.ReduceOp(ReduceFn.SUM, x.value, axes, False))
    return _Operand(summed, [k for k in x.labels if k in keep])


def _sizes(e: TirEmitter, x: _Operand) -> dict[str, int]:
    return dict(zip(x.labels, static_shape(x.value, e)))


def _arrange(e: TirEmitter, x: _Operand, groups: list[list[str]]) -> SSAValue:
    """x transposed to the labels of `groups` in order, each group but the
    first flattened to one axis (the first, batch, keeps its axes)."""
    order = [k for g in groups for k in g]
    value = x.value
    if order != x.labels:
        value = e.transpose(value, [x.labels.index(k) for k in order])
    sizes = _sizes(e, x)
    shape = [sizes[k] for k in groups[0]] + [math.prod(sizes[k] for k in g) for g in groups[1:]]
    return e.reshape(value, shape) if shape != static_shape(value, e) else value


def _contract(e: TirEmitter, a: _Operand, b: _Operand, keep: set[str]) -> _Operand:
    """One Matmul: batch labels (in both, kept) stay, summed labels (in both,
    not kept) are contracted, the free labels of each side remain."""
    batch = [k for k in a.labels if k in b.labels and k in keep]
    summed = [k for k in a.labels if k in b.labels and k not in keep]
    left = [k for k in a.labels if k not in b.labels]
    right = [k for k in b.labels if k not in a.labels]
    product = e.value(tir.MatmulOp(_arrange(e, a, [batch, left, summed]), _arrange(e, b, [batch, summed, right])))
    a_sizes, b_sizes = _sizes(e, a), _sizes(e, b)
    shape = [*static_shape(product, e)[: len(batch)], *(a_sizes[k] for k in left), *(b_sizes[k] for k in right)]
    if shape != static_shape(product, e):
        product = e.reshape(product, shape)
    return _Operand(product, [*batch, *left, *right])


@lowers(onnx.EinsumOp)
def _einsum(op: onnx.EinsumOp, e: TirEmitter):
    values = list(op.Inputs)
    labels, output = _parse(op.equation.data, [len(static_shape(v, e)) for v in values], e)
    operands = [_diagonals(e, _Operand(v, ls)) for v, ls in zip(values, labels)]
    result = None
    for i, x in enumerate(operands):
        needed = set(output).union(*(o.labels for o in operands[i + 1 :]))
        if result is None:
            result = _sum_away(e, x, needed)
            continue
        result = _sum_away(e, result, needed | set(x.labels))
        x = _sum_away(e, x, needed | set(result.labels))
        result = _contract(e, result, x, needed)
    assert result is not None
    result = _sum_away(e, result, set(output))
    if result.labels != output:
        result = _Operand(e.transpose(result.value, [result.labels.index(k) for k in output]), output)
    return [result.value]
