"""What every `tir` op shares: the base classes (result types checked
against `inferred()`), and helpers building their properties."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import (
    ParsePropInAttrDict,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.irdl_fast import FastOp
from forge_opt.dialects.tir_functions import (
    BinaryFn,
    BinaryFnAttr,
    UnaryFn,
    UnaryFnAttr,
)
from forge_opt.dialects.tir_shapes import ShapeError
from forge_opt.dtypes import tensor_type


def shape_of(t: Attribute) -> tuple[int, ...]:
    if not isinstance(t, TensorType):
        raise ShapeError(f"expected a ranked tensor, got {t}")
    return t.get_shape()


def ints_attr(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, [int(v) for v in values])


def int_attr(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), i64)


def like(t: Attribute, shape: Sequence[int]) -> TensorType:
    """A tensor of `t`'s element type and `shape`."""
    assert isinstance(t, TensorType)
    return tensor_type(t.element_type, shape)


def like_elem(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, TensorType) else t


class TirOp(FastOp):
    """A `tir` op: its results have the types `inferred()` gives."""

    def inferred(self) -> Sequence[Attribute]:
        raise NotImplementedError

    def verify_(self) -> None:
        try:
            expected = self.inferred()
        except ShapeError as error:
            raise VerifyException(str(error)) from None
        if len(expected) != len(self.results):
            raise VerifyException(f"{len(self.results)} results, expected {len(expected)}")
        for i, (want, result) in enumerate(zip(expected, self.results)):
            got = result.type
            if got is want or got == want:
                continue
            if not (
                isinstance(got, TensorType)
                and isinstance(want, TensorType)
                and got.element_type == want.element_type
                and shapes.matches(want.get_shape(), got.get_shape())
            ):
                raise VerifyException(f"result {i} has type {got}, expected {want}")


class OneInputOp(TirOp):
    """An op of one tensor giving one tensor."""

    input = operand_def(TensorType)
    output = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"


def unary_attr(fn: UnaryFn) -> UnaryFnAttr:
    if type(fn) is not UnaryFn:  # a str would hash as its member: the builders take the enum alone
        raise TypeError(f"tir.unary takes a UnaryFn, not {fn!r}")
    return UNARY_ATTRS[fn]


def binary_attr(fn: BinaryFn) -> BinaryFnAttr:
    if type(fn) is not BinaryFn:
        raise TypeError(f"tir.binary takes a BinaryFn, not {fn!r}")
    return BINARY_ATTRS[fn]


# one attribute per function, made once
UNARY_ATTRS: dict[UnaryFn, UnaryFnAttr] = {fn: UnaryFnAttr(fn) for fn in UnaryFn}
BINARY_ATTRS: dict[BinaryFn, BinaryFnAttr] = {fn: BinaryFnAttr(fn) for fn in BinaryFn}
