"""Checks of `onnx` ops that the schemas state in prose: shapes and counts
that must agree, with the numbers in the message."""

from __future__ import annotations

from xdsl.dialects.builtin import TensorType
from xdsl.utils.exceptions import VerifyException

from forge_opt.dialects import onnx_ops
from forge_opt.dialects.onnx_base import VERIFIERS


def _static_dim(op, axis: int) -> int | None:
    t = op.input.type
    if not isinstance(t, TensorType):
        return None
    shape = t.get_shape()
    if not -len(shape) <= axis < len(shape):
        raise VerifyException(f"axis {axis} is out of range for an input of rank {len(shape)}")
    dim = shape[axis]
    return dim if dim >= 0 else None


def verify_split(op) -> None:
    axis = op.axis.value.data
    dim = _static_dim(op, axis)
    count = len(op.outputs)
    if op.num_outputs is not None and op.num_outputs.value.data != count:
        raise VerifyException(f"num_outputs is {op.num_outputs.value.data} but there are {count} results")
    if op.split is None and op.num_outputs is None and dim is not None and count and dim % count:
        raise VerifyException(f"dimension {axis} of size {dim} does not divide into {count} equal parts")


VERIFIERS[onnx_ops.SplitOp] = verify_split
