"""Fold `onnx` ops whose inputs are all constants (and `Shape`/`Size` of
statically shaped values) into `onnx.Constant`, evaluating them with ONNX's
reference implementation. This turns the shape arithmetic of exported
models (Shape -> Gather -> Concat -> Reshape) into static attributes.

A result above `FOLD_LIMIT` elements is not folded: folding must never
materialise a huge tensor; lowerings that need such a value report it.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from xdsl.ir import Operation

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.onnx import INITIALIZER_ATTR, OnnxOp
from forge_opt.interpreters.onnx import FOLD_LIMIT, evaluate
from forge_opt.transforms.lowering import Replacement, known_shape
from forge_opt.xdsl_internals import operands_of

# Never folded: their value is not a function of constant inputs.
_KEEP = {
    onnx.ConstantOp, onnx.RandomNormalOp, onnx.RandomNormalLikeOp, onnx.RandomUniformOp,
    onnx.RandomUniformLikeOp, onnx.BernoulliOp, onnx.MultinomialOp, onnx.IfOp, onnx.LoopOp,
    onnx.ScanOp,
}
#: ops that fold from their operand's shape alone, its values unknown
_FROM_SHAPE = (onnx.ShapeOp, onnx.SizeOp)


_CONSTANT_OPS = (onnx.ConstantOp, tir.ConstantOp)


def constant_array(value) -> np.ndarray | None:
    """The value of an `onnx.Constant` or `tir.constant` result, else None."""
    op = value.owner
    if isinstance(op, _CONSTANT_OPS) and op.properties.get("value") is not None:
        try:
            return attr_to_array(op.properties["value"])
        except ValueError:
            return None
    return None


def _result_size(op: Operation) -> int | None:
    total = 0
    for r in op.results:
        shape = known_shape(r)
        if shape is None:
            return None
        total += math.prod(shape)
    return total


def fold_constant_op(op: Operation) -> Replacement | None:
    """`onnx.Constant` ops replacing `op`, or None when it does not fold."""
    if getattr(op, "ONNX_OP_TYPE", None) is None or type(op) in _KEEP or not op.results:
        return None  # only onnx ops have ONNX_OP_TYPE (cheaper than isinstance of an ABC)
    operands = operands_of(op)
    from_shape = type(op) in _FROM_SHAPE
    if not from_shape and not all(type(v.owner) in _CONSTANT_OPS for v in operands):
        return None  # the common case, decided without looking at values
    source = operands[0].owner if operands else None
    if type(op) is onnx.IdentityOp and isinstance(source, Operation) and INITIALIZER_ATTR in source.attributes:
        return None  # folding would turn a named weight into an anonymous copy
    if from_shape:
        shape = known_shape(op.operands[0])
        if shape is None:
            return None
        values = None
    else:
        values = [constant_array(v) for v in op.operands]
        if any(v is None for v in values):
            return None
    size = _result_size(op)
    if size is not None and size > FOLD_LIMIT:
        return None
    if values is None:
        values = [np.zeros(shape, np.float32)]
    outputs = evaluate(cast(OnnxOp, op), tuple(values))  # onnx ops alone have ONNX_OP_TYPE
    if any(np.asarray(o).size > FOLD_LIMIT for o in outputs):
        return None
    new_ops = []
    for out in outputs:
        const = onnx.ConstantOp.build(
            result_types=[array_to_attr(np.asarray(out)).type],
            properties={"value": array_to_attr(np.asarray(out))},
        )
        const.location = op.location
        new_ops.append(const)
    for old, new in zip(op.results, new_ops):
        if old.name_hint:
            new.results[0].name_hint = old.name_hint
    return new_ops, [c.results[0] for c in new_ops]
