"""The `tir` dialect: framework-neutral tensor IR between `onnx` and `forge`.

Ops here may be richer than Forge's (multi-result, multi-axis); passes
decompose them until each maps onto one Forge function.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import I64, DenseArrayBase, IntegerAttr, TensorType, i64
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_result_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException


def _shape(value: SSAValue | Attribute) -> tuple[int, ...]:
    t = value.type if isinstance(value, SSAValue) else value
    if not isinstance(t, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {t}")
    return t.get_shape()


def split_sections(dim: int, *, parts: int | None = None, size: int | None = None) -> list[int]:
    """Sections of a split by count (must divide) or by size per part (the
    last part smaller when it does not divide)."""
    if parts is not None:
        if parts <= 0:
            raise ValueError(f"a split into {parts} parts is not possible")
        if dim % parts:
            raise ValueError(f"dimension {dim} does not divide into {parts} equal parts")
        return [dim // parts] * parts
    assert size is not None
    if size <= 0:
        raise ValueError(f"a split into parts of size {size} is not possible")
    full, rest = divmod(dim, size)
    return [size] * full + ([rest] if rest else [])


@irdl_op_definition
class SplitOp(IRDLOperation):
    """Split a tensor along one axis into consecutive pieces, one per result.

    `sections` lists the size of each piece; they sum to the axis' size and
    may be zero. Builders accept the three rules frameworks use (equal parts,
    size per part, explicit sections) and normalise them to sections.
    """

    name = "tir.split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sections = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axis` $axis `sections` $sections attr-dict `:` type($input) `->` type($outputs)"
    )

    def __init__(self, input: SSAValue, axis: int, sections: Sequence[int]):
        shape = list(_shape(input))
        rank = len(shape)
        if not -rank <= axis < rank:
            raise ValueError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        elem = input.type.element_type
        types = []
        for s in sections:
            shape[axis] = s
            types.append(TensorType(elem, shape))
        super().__init__(
            operands=[input],
            result_types=[types],
            properties={
                "axis": IntegerAttr(axis, i64),
                "sections": DenseArrayBase.from_list(i64, list(sections)),
            },
        )

    def verify_(self) -> None:
        shape = _shape(self.input)
        rank = len(shape)
        axis = self.axis.value.data
        if not 0 <= axis < rank:
            raise VerifyException(f"axis {axis} is out of range for an input of rank {rank} (normalise to 0..{rank - 1})")
        sections = self.sections.get_values()
        if len(sections) != len(self.outputs):
            raise VerifyException(f"{len(sections)} sections but {len(self.outputs)} results")
        if any(s < 0 for s in sections):
            raise VerifyException(f"sections {list(sections)} contain a negative size")
        if shape[axis] >= 0 and sum(sections) != shape[axis]:
            raise VerifyException(
                f"sections {list(sections)} sum to {sum(sections)}, but dimension {axis} has size {shape[axis]}"
            )
        for i, (s, out) in enumerate(zip(sections, self.outputs)):
            expected = list(shape)
            expected[axis] = s
            if list(_shape(out)) != expected:
                raise VerifyException(f"result {i} has shape {list(_shape(out))}, expected {expected}")


@irdl_op_definition
class StridedSliceOp(IRDLOperation):
    """Take `begin:end:stride` along each listed axis; other axes are kept."""

    name = "tir.strided_slice"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axes = prop_def(DenseArrayBase.constr(i64))
    begin = prop_def(DenseArrayBase.constr(i64))
    end = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = (
        "$input `axes` $axes `begin` $begin `end` $end `strides` $strides attr-dict "
        "`:` type($input) `->` type($output)"
    )

    def __init__(
        self,
        input: SSAValue,
        axes: Sequence[int],
        begin: Sequence[int],
        end: Sequence[int],
        strides: Sequence[int],
    ):
        shape = list(_shape(input))
        for a, b, e, s in zip(axes, begin, end, strides):
            shape[a] = len(range(b, e, s))
        super().__init__(
            operands=[input],
            result_types=[TensorType(input.type.element_type, shape)],
            properties={
                "axes": DenseArrayBase.from_list(i64, list(axes)),
                "begin": DenseArrayBase.from_list(i64, list(begin)),
                "end": DenseArrayBase.from_list(i64, list(end)),
                "strides": DenseArrayBase.from_list(i64, list(strides)),
            },
        )

    def slices(self) -> list[tuple[int, int, int, int]]:
        """(axis, begin, end, stride) per sliced axis."""
        return list(
            zip(
                self.axes.get_values(),
                self.begin.get_values(),
                self.end.get_values(),
                self.strides.get_values(),
            )
        )

    def verify_(self) -> None:
        shape = _shape(self.input)
        rank = len(shape)
        lists = [self.axes, self.begin, self.end, self.strides]
        if len({len(x.get_values()) for x in lists}) != 1:
            raise VerifyException("axes, begin, end and strides must have the same length")
        expected = list(shape)
        seen = set()
        for a, b, e, s in self.slices():
            if not 0 <= a < rank:
                raise VerifyException(f"axis {a} is out of range for an input of rank {rank}")
            if a in seen:
                raise VerifyException(f"axis {a} is sliced twice")
            seen.add(a)
            if s <= 0:
                raise VerifyException(f"stride {s} on axis {a} must be positive")
            if not 0 <= b <= e <= shape[a]:
                raise VerifyException(
                    f"slice {b}:{e} on axis {a} is outside 0..{shape[a]} or reversed"
                )
            expected[a] = len(range(b, e, s))
        if list(_shape(self.output)) != expected:
            raise VerifyException(f"result has shape {list(_shape(self.output))}, expected {expected}")


TIR = Dialect("tir", [SplitOp, StridedSliceOp], [])
