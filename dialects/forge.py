"""The `forge` dialect: one op per function of Forge's Python op API.

An op is named after its function (`forge.index` for `forge.op.Index`) and
its properties are the function's keyword arguments, by their Forge names;
`FORGE_FUNCTION` and `FORGE_OPERANDS` tell the Forge Python printer how to
call it. Verifiers enforce the constraints Forge itself asserts.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I64, IntegerAttr, TensorType, i64
from xdsl.ir import Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


class ForgeOp(IRDLOperation):
    """Base of the ops that print as one `forge.op.<FORGE_FUNCTION>` call."""

    FORGE_FUNCTION: ClassVar[str] = ""
    # Operand fields in the order of the function's positional parameters.
    FORGE_OPERANDS: ClassVar[tuple[str, ...]] = ()
    # Properties in the order of the function's keyword parameters.
    FORGE_KEYWORDS: ClassVar[tuple[str, ...]] = ()

    def forge_keywords(self) -> dict[str, object]:
        """Keyword arguments as Python values, in Forge's parameter order."""
        values: dict[str, object] = {}
        for name in self.FORGE_KEYWORDS:
            attr = self.properties.get(name)
            if attr is None:
                continue
            values[name] = _python_value(attr)
        return values


def _python_value(attr) -> object:
    from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, FloatAttr, IntegerType, StringAttr

    if isinstance(attr, IntegerAttr):
        if attr.type == IntegerType(1):
            return bool(attr.value.data)
        return attr.value.data
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        return list(attr.get_values())
    if isinstance(attr, ArrayAttr):
        return [_python_value(a) for a in attr.data]
    raise TypeError(f"no Python value for {attr}")


@irdl_op_definition
class IndexOp(ForgeOp):
    """`forge.op.Index(name, operandA, dim, start, stop=None, stride=1)`: a
    strided slice along one dimension. `dim` is negative, Forge's convention."""

    name = "forge.index"
    FORGE_FUNCTION: ClassVar[str] = "Index"
    FORGE_OPERANDS: ClassVar[tuple[str, ...]] = ("operandA",)
    FORGE_KEYWORDS: ClassVar[tuple[str, ...]] = ("dim", "start", "stop", "stride")

    operandA = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    stop = prop_def(IntegerAttr[I64])
    stride = prop_def(IntegerAttr[I64], IntegerAttr(1, i64))
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$operandA attr-dict `:` type($operandA) `->` type($result)"

    def __init__(self, operand: SSAValue, dim: int, start: int, stop: int, stride: int = 1):
        shape = list(operand.type.get_shape())
        shape[dim] = len(range(start, stop, stride))
        super().__init__(
            operands=[operand],
            result_types=[TensorType(operand.type.element_type, shape)],
            properties={
                "dim": IntegerAttr(dim, i64),
                "start": IntegerAttr(start, i64),
                "stop": IntegerAttr(stop, i64),
                "stride": IntegerAttr(stride, i64),
            },
        )

    def verify_(self) -> None:
        shape = self.operandA.type.get_shape()
        rank = len(shape)
        dim, start, stop, stride = (
            self.dim.value.data,
            self.start.value.data,
            self.stop.value.data,
            self.stride.value.data,
        )
        if not -rank <= dim < 0:
            raise VerifyException(f"dim {dim} must be negative and within rank {rank}")
        size = shape[dim]
        if stride <= 0:
            raise VerifyException(f"stride {stride} must be positive")
        if not 0 <= start < size:
            raise VerifyException(f"start {start} must be in 0..{size - 1} (dim {dim} has size {size})")
        if not start <= stop <= size:
            raise VerifyException(f"stop {stop} must be in {start}..{size} (dim {dim} has size {size})")
        expected = list(shape)
        expected[dim] = len(range(start, stop, stride))
        if list(self.result.type.get_shape()) != expected:
            raise VerifyException(f"result has shape {list(self.result.type.get_shape())}, expected {expected}")


FORGE_OPS: tuple[type[ForgeOp], ...] = (IndexOp,)

FORGE = Dialect("forge", list(FORGE_OPS), [])
