"""An LM head tied to a vocab-parallel embedding's table: stored once.

PyTorch ties GPT-2's (and Whisper's, Gemma's, ...) `lm_head.weight` to the
token embedding; exporters write the head's weight as the table transposed,
either as a `Transpose` of the table or as a second initializer holding the
same values transposed. Split column-parallel on its own, each device would
hold its block of the table twice. Read as the table's rows instead,

    y = x · Tᵀ = (T · xᵀ)ᵀ,

the head's matmul takes the table (split by rows, as the embedding reads
it) as its first operand, so both read one block per device: the output is
split along the vocabulary as a column-parallel head's is, and a padded
vocabulary's columns are sliced off once the logits are gathered.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.ir import Operation, SSAValue

from forge_opt.dialects import tir
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.tp.rules import shape

#: rows of the table compared at once (the transposed compare makes a temporary)
_ROWS_AT_ONCE = 1 << 22


def _transposed_copy(w: np.ndarray, table: np.ndarray) -> bool:
    if w.dtype != table.dtype or w.shape != table.shape[::-1]:
        return False
    # an untied head differs at once: compared on a few pages (a column of a mapped weight would read
    # a page of every row, and the kernel's read-ahead most of the file: 0.9 GB of Llama-3's head)
    if not np.array_equal(w[0, :16], table[:16, 0]):
        return False
    step = max(1, _ROWS_AT_ONCE // max(table.shape[1], 1))
    return all(np.array_equal(w[:, i:i + step], table[i:i + step].T) for i in range(0, table.shape[0], step))


def tied_table(weight: SSAValue, tables: list[SSAValue]) -> SSAValue | None:
    """The table of `tables` that a Linear's `weight` is the transpose of:
    a `Transpose` of it, or a constant with its values transposed."""
    op = weight.owner
    if isinstance(op, tir.TransposeOp) and op.input in tables and list(op.perm.get_values()) == [1, 0]:
        return op.input
    w = constant_array(weight)
    if w is None or w.ndim != 2:
        return None
    for t in tables:
        table = constant_array(t)
        if table is not None and _transposed_copy(w, table):
            return t
    return None


def read_rows(head: tir.MatmulOp, table: SSAValue, vocab: int, insert: Callable[[Operation], SSAValue]) -> SSAValue:
    """`head`'s output computed from `table` ([rows ≥ vocab, width], the
    padded table the embedding reads) as (T · xᵀ)ᵀ, on 2-d operands, with
    the padding's columns sliced off; `insert` places each op after the
    last. The value replacing the head's output."""
    x = head.lhs
    outer = shape(x)[:-1]
    rows, width = shape(table)
    flat = insert(tir.ReshapeOp(x, [math.prod(outer), width])) if len(outer) != 1 else x
    products = insert(tir.MatmulOp(table, insert(tir.TransposeOp(flat, [1, 0]))))  # [rows, tokens]
    y = insert(tir.TransposeOp(products, [1, 0]))
    if len(outer) != 1:
        y = insert(tir.ReshapeOp(y, [*outer, rows]))
    if rows != vocab:
        y = insert(tir.StridedSliceOp(y, [len(outer)], [0], [vocab], [1]))
    return y

