"""The base of the `forge` dialect's ops, one per `forge.op` function
(`dialects/forge_ops.py`, generated from the records of
`dialects/forge_functions/`): how an op reads as a call (operands in
Forge's order, keywords as Python values), how a call is built and checked
once, and the verifier that checks it again after parsing or rewriting."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar, TypeVar, cast

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, OpResult, SSAValue, TypeAttribute
from xdsl.irdl import ParsePropInAttrDict, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from forge_opt import dtypes
from forge_opt.dialects.forge_functions import REQUIRED, Call, ForgeFunction, ForgeRuleError
from forge_opt.dialects.irdl_fast import FastOp
from forge_opt.xdsl_internals import item


def to_attr(value: object) -> Attribute:
    """A property for a Python keyword value."""
    if isinstance(value, Attribute):
        return value
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return _scalar_attr(kind, kind(value))
    if isinstance(value, list | tuple):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return _dense_array(i64, tuple(value))
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return _dense_array(f64, tuple(float(v) for v in value))
        return ArrayAttr([to_attr(v) for v in value])
    raise TypeError(f"no property for {value!r}")


@lru_cache(maxsize=4096)
def _scalar_attr(kind: type, value: bool | int | float | str) -> Attribute:
    # Keyword values repeat (dims, strides, flags), and an attribute costs
    # microseconds to build and verify; the type is part of the key, as
    # True == 1 == 1.0 for the cache.
    if kind is bool:
        return IntegerAttr(int(value), i1)
    if kind is int:
        return IntegerAttr(cast(int, value), i64)
    if kind is float:
        return FloatAttr(cast(float, value), f64)
    return StringAttr(cast(str, value))


@lru_cache(maxsize=4096)
def _dense_array(element_type: IntegerType | Float64Type, values: tuple) -> DenseArrayBase:
    # shapes, dims and pads repeat too, and packing one costs tens of µs
    return DenseArrayBase.from_list(element_type, values)


def to_python(attr: Attribute) -> object:
    """The Python keyword value of a property (element types stay types)."""
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
        return [to_python(a) for a in attr.data]
    if isinstance(attr, TypeAttribute):
        return attr
    raise TypeError(f"no Python value for {attr}")


class ForgeOp(FastOp):
    """Base of the ops that print as one `forge.op.<FUNCTION.name>` call:
    operands are the function's tensor parameters (fields by Forge's names),
    properties its keyword arguments."""

    FUNCTION: ClassVar[ForgeFunction]
    output = result_def(TensorType)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "operands attr-dict `:` functional-type(operands, results)"

    def forge_operands(self) -> list[SSAValue[TensorType]]:
        """The tensors passed to the call, in Forge's order (every operand of
        a `forge` op is a ranked tensor: its definition requires it)."""
        values: list[SSAValue[TensorType]] = []
        for field in self.FUNCTION.fields:
            v = getattr(self, field)
            if v is None:
                continue
            if type(v) is OpResult or isinstance(v, SSAValue):  # the type test first: SSAValue is an ABC
                values.append(v)
            else:
                values.extend(v)
        return values

    def forge_keywords(self) -> dict[str, object]:
        """Keyword arguments given, as Python values, in Forge's order (a
        tuple where Forge asserts one)."""
        props, fn = self.properties, self.FUNCTION
        return {name: _keyword_value(fn, name, props[name]) for name in fn.keyword_names if name in props}

    @property
    def result(self) -> SSAValue:
        return self.results[0]

    def verify_(self) -> None:
        """Forge's own checks, and the result type: the shape Forge's
        `shape()` gives and the element type its golden computes."""
        props = {name: value for name, value in self.properties.items() if name in self.FUNCTION.keyword_names}
        try:
            want = _checked(self.FUNCTION, [dtypes.tensor(v.type) for v in self.forge_operands()], props)
        except ForgeRuleError as e:
            raise VerifyException(str(e)) from None
        got = item(self.results, 0).type
        if got != want:
            raise VerifyException(f"forge.op.{self.FUNCTION.name} gives {want}, but the result type is {got}")


def _keyword_value(fn: ForgeFunction, name: str, attr: Attribute) -> object:
    value = to_python(attr)
    return tuple(value) if name in fn.tuple_keywords and isinstance(value, list) else value


def _element_dtype(t: TensorType) -> np.dtype | None:
    try:
        return dtypes.numpy_dtype(t.element_type)
    except dtypes.UnsupportedElementType:
        return None


def _rule_value(value: object) -> object:
    """A keyword as the rules see it: an element type (Cast's dtype) as its numpy dtype."""
    return dtypes.numpy_dtype(value) if isinstance(value, TypeAttribute) else value


def _call_keywords(fn: ForgeFunction, given: dict[str, object]) -> dict[str, object]:
    """Every keyword as the rules see it, Forge's defaults filled in."""
    keywords = {}
    for name, default in fn.keywords:
        value = given.get(name, default)
        if value is REQUIRED:
            raise ForgeRuleError(f"forge.op.{fn.name}: the keyword '{name}' is required")
        keywords[name] = _rule_value(value)
    return keywords


def rule_call(op: ForgeOp) -> Call:
    """The op as a call for Forge's rules: every keyword, defaults filled in."""
    operands = op.forge_operands()
    return Call(
        op.FUNCTION, [v.type.get_shape() for v in operands], [_element_dtype(v.type) for v in operands],
        _call_keywords(op.FUNCTION, op.forge_keywords()),
    )


def checked_type(call: Call, first: TensorType | None = None) -> TensorType:
    """The result type of a call that Forge accepts; `ForgeRuleError` for
    one it rejects. An element type numpy has no dtype for is rejected by
    rule dtype-unsupported, naming it. `first` is operand 0's type, returned
    when the result's is the same (most ops: no type to look up)."""
    fn = call.fn
    if any(d is None for d in call.dtypes):  # not `None in`: numpy's float64 == None
        raise ForgeRuleError(
            f"[dtype-unsupported] forge.op.{fn.name}: an operand has an element type Forge cannot hold"
        )
    fn.check(call)
    shape, dtype = fn.shape(call), fn.dtype(call)
    if first is not None and shape == call.shapes[0] and dtype == call.dtypes[0]:
        return first
    return dtypes.tensor_type(dtypes.mlir_type_of_numpy(dtype), shape)


OpT = TypeVar("OpT", bound=ForgeOp)


def build(cls: type[OpT], operands: Sequence[SSAValue | None], **keywords) -> OpT:
    """An op of `cls`, checked once: `ForgeRuleError` for a call Forge
    rejects. Keywords that are None are left to Forge's default. The result
    type is the one Forge computes (`checked_type`): its element type may
    differ from the `tir` value's (a comparison keeps its first operand's
    type, an integer Divide gives float32)."""
    fn = cls.FUNCTION
    props = {}
    for name, value in keywords.items():
        if value is not None:
            if name not in fn.keyword_names:
                raise TypeError(f"forge.op.{fn.name} has no keyword {name!r}")
            props[name] = to_attr(value)
    if fn.plain and len(operands) == len(fn.kinds):
        present = [v for v in operands if v is not None]
        grouped: list[object] = list(present)
    else:
        grouped, present = _group(fn.kinds, operands)
    types = [dtypes.tensor(v.type) for v in present]
    return cls.build(operands=grouped, result_types=[_checked(fn, types, props)], properties=props)


def _group(kinds: Sequence[str], operands: Sequence[SSAValue | None]) -> tuple[list[object], list[SSAValue]]:
    """The operands grouped by parameter, as `build` takes them (an absent
    optional one is an empty group), and the operands given."""
    grouped: list[object] = []
    present: list[SSAValue] = []
    for i, kind in enumerate(kinds):
        if kind == "variadic":
            grouped.append(list(operands[i:]))
            present.extend(v for v in operands[i:] if v is not None)
            break
        value = operands[i] if i < len(operands) else None
        grouped.append([] if kind == "optional" and value is None else value)
        if value is not None:
            present.append(value)
    return grouped, present


def _checked(fn: ForgeFunction, types: list[TensorType], props: dict[str, Attribute]) -> TensorType:
    """`checked_type` of a call of `fn` on operands of `types` with the
    keyword properties `props`, remembered. It is a pure function of them,
    and types and keyword attributes are shared objects (`dtypes.tensor_type`,
    `to_attr`), so the key is their identity; the entry holds them, so no id
    is reused while it lives. Building and verifying an op both ask."""
    key = (fn.name, *map(id, types), *props.keys(), *map(id, props.values()))
    entry = _CHECKED.get(key)
    if entry is None:
        call = Call(
            fn, [t.get_shape() for t in types], [_element_dtype(t) for t in types],
            _call_keywords(fn, {k: _keyword_value(fn, k, a) for k, a in props.items()}),
        )
        try:
            result: TensorType | str = checked_type(call, types[0] if types else None)
        except ForgeRuleError as e:
            result = str(e)
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        entry = _CHECKED[key] = (types, tuple(props.values()), result)
    if isinstance(entry[2], str):
        raise ForgeRuleError(entry[2])
    return entry[2]


_CHECKED: dict[tuple, tuple[list[TensorType], tuple[Attribute, ...], TensorType | str]] = {}
