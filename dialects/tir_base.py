"""What every `tir` op shares: the base classes (result types from each
op's `infer`, for its builder and its verifier alike), and helpers building
their properties."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AnyAttr,
    ParsePropInAttrDict,
    VarConstraint,
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


def tied(var: str = "T"):
    """A ranked tensor of the same element type as every other operand and
    result of the op tied to `var` (xDSL's `VarConstraint`): a matmul of
    f32 and f16, or a concat of f32 and i64, does not verify."""
    return TensorType.constr(VarConstraint(var, AnyAttr()))


def like_elem(t: Attribute) -> Attribute:
    return t.element_type if isinstance(t, TensorType) else t


class TirOp(FastOp):
    """A `tir` op: its results have the types `infer` gives.

    `infer` is a static method whose parameters are named for the op's
    operands (each read as its type: None when an optional one is absent, a
    list for a variadic one) and properties (each read as a Python value:
    ints, a float, a tuple of ints, an enum member). The builder (`init_inferred`)
    and the verifier (`inferred`) both call it by those names, so each op
    states its inputs once. An op whose result type is itself an input (a
    reshape's shape, a cast's element type) overrides `inferred`."""

    @staticmethod
    def infer(*args) -> Attribute | Sequence[Attribute]:
        raise NotImplementedError

    @classmethod
    def infer_names(cls) -> tuple[str, ...]:
        names = cls.__dict__.get("_infer_names")
        if names is None:
            names = tuple(inspect.signature(cls.infer).parameters)
            cls._infer_names = names
        return names

    def inferred(self) -> Sequence[Attribute]:
        return _as_list(self.infer(*[python_value(getattr(self, name)) for name in self.infer_names()]))

    def init_inferred(
        self, operands: Mapping[str, SSAValue | Sequence[SSAValue] | None], **properties: Attribute | None
    ) -> None:
        """Build the op from its operands (by name, in the definition's
        order) and properties, with the result types `infer` gives."""
        given = {**operands, **properties}
        result = self.infer(*[python_value(given.get(name)) for name in self.infer_names()])
        # a list of types is one variadic group of results
        FastOp.__init__(self, operands=list(operands.values()), result_types=[result], properties=properties)

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


def python_value(value):
    """What `infer` reads for an operand or a property (see `TirOp`)."""
    if isinstance(value, SSAValue):
        return value.type
    if isinstance(value, DenseArrayBase):
        return value.get_values()
    if isinstance(value, IntegerAttr | FloatAttr):
        return value.value.data
    if isinstance(value, EnumAttribute):
        return value.data
    if isinstance(value, list | tuple):
        return [python_value(v) for v in value]
    return value


def _as_list(result: Attribute | Sequence[Attribute]) -> Sequence[Attribute]:
    return result if isinstance(result, Sequence) else [result]


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
