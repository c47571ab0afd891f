"""The `forge` dialect: one op per function of Forge's Python op API.

An op is named after its function (`forge.index` for `forge.op.Index`,
`forge.max_pool2d` for `forge.op.MaxPool2d`); its operands are the
function's tensor parameters and its properties its keyword arguments, by
Forge's names. Ops are built from the table in `forge_api.py`; verifiers
enforce the constraints Forge itself asserts. `forge.parameter` and
`forge.constant` are the module's weights (`get_parameter`/`get_constant`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import ClassVar, cast

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
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
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Dialect, OpResult, SpacedOpaqueSyntaxAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    ParsePropInAttrDict,
    irdl_attr_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from forge_opt import dtypes
from forge_opt.data_formats import BLOCK_FORMATS, DataFormat
from forge_opt.dialects import forge_rules, forge_shapes
from forge_opt.dialects.forge_api import BY_NAME, FUNCTIONS, REQUIRED, ForgeFunction
from forge_opt.dialects.irdl_fast import FastOp, op_definition
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
    """Base of the ops that print as one `forge.op.<FORGE_FUNCTION>` call."""

    FORGE_FUNCTION: ClassVar[str] = ""
    # Operand fields in the order of the function's positional parameters.
    FORGE_OPERANDS: ClassVar[tuple[str, ...]] = ()
    # Properties in the order of the function's keyword parameters.
    FORGE_KEYWORDS: ClassVar[tuple[str, ...]] = ()
    # Keywords Forge asserts to be tuples.
    FORGE_TUPLES: ClassVar[tuple[str, ...]] = ()
    # Each operand field's kind: "single", "optional" or "variadic".
    FORGE_KINDS: ClassVar[tuple[str, ...]] = ()
    # Every operand is "single".
    FORGE_PLAIN: ClassVar[bool] = True

    def forge_operands(self) -> list[SSAValue[TensorType]]:
        """The tensors passed to the call, in Forge's order (every operand of
        a `forge` op is a ranked tensor: its definition requires it)."""
        values: list[SSAValue[TensorType]] = []
        for field in self.FORGE_OPERANDS:
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
        props = self.properties
        return {name: _keyword_value(type(self), name, props[name]) for name in self.FORGE_KEYWORDS if name in props}

    @property
    def result(self) -> SSAValue:
        return self.results[0]


def _keyword_value(cls: type[ForgeOp], name: str, attr: Attribute) -> object:
    value = to_python(attr)
    return tuple(value) if name in cls.FORGE_TUPLES and isinstance(value, list) else value


def _field(parameter: str) -> str:
    # `operands` (Concatenate's *operands) is taken by Operation itself.
    return "inputs" if parameter == "operands" else parameter


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
            raise forge_rules.ForgeRuleError(f"forge.op.{fn.name}: the keyword '{name}' is required")
        keywords[name] = _rule_value(value)
    return keywords


def rule_call(op: ForgeOp) -> forge_rules.Call:
    """The op as a call for Forge's rules: every keyword, defaults filled in."""
    operands = op.forge_operands()
    return forge_rules.Call(
        op.FORGE_FUNCTION,
        [v.type.get_shape() for v in operands],
        [_element_dtype(v.type) for v in operands],
        _call_keywords(BY_NAME[op.FORGE_FUNCTION], op.forge_keywords()),
    )


def _verify_forge_call(op: ForgeOp) -> None:
    """Forge's own checks (`forge_rules`), and the result type: the shape
    Forge's `shape()` gives and the element type its golden computes."""
    props = {name: value for name, value in op.properties.items() if name in op.FORGE_KEYWORDS}
    try:
        want = _checked(type(op), [dtypes.tensor(v.type) for v in op.forge_operands()], props)
    except forge_rules.ForgeRuleError as e:
        raise VerifyException(str(e)) from None
    got = item(op.results, 0).type
    if got != want:
        raise VerifyException(f"forge.op.{op.FORGE_FUNCTION} gives {want}, but the result type is {got}")


def checked_type(call: forge_rules.Call, first: TensorType | None = None) -> TensorType:
    """The result type of a call that Forge accepts; `ForgeRuleError` for
    one it rejects. An element type numpy has no dtype for is rejected by
    rule dtype-unsupported, naming it. `first` is operand 0's type, returned
    when the result's is the same (most ops: no type to look up)."""
    if any(d is None for d in call.dtypes):  # not `None in`: numpy's float64 == None
        raise forge_rules.ForgeRuleError(
            f"[dtype-unsupported] forge.op.{call.function}: an operand has an element type Forge cannot hold"
        )
    forge_rules.check_call(call)
    shape = forge_shapes.result_shape(call)
    dtype = forge_rules.result_dtype(call)
    if first is not None and shape == call.shapes[0] and dtype == call.dtypes[0]:
        return first
    return dtypes.tensor_type(dtypes.mlir_type_of_numpy(dtype), shape)


def _make_op(fn: ForgeFunction) -> type[ForgeOp]:
    defs = {"single": operand_def, "optional": opt_operand_def, "variadic": var_operand_def}
    body: dict[str, object] = {
        "name": fn.op_name,
        "__doc__": f"`forge.op.{fn.name}`.",
        "__annotations__": {
            "FORGE_FUNCTION": ClassVar[str],
            "FORGE_OPERANDS": ClassVar[tuple[str, ...]],
            "FORGE_KEYWORDS": ClassVar[tuple[str, ...]],
            "FORGE_TUPLES": ClassVar[tuple[str, ...]],
            "FORGE_KINDS": ClassVar[tuple[str, ...]],
            "FORGE_PLAIN": ClassVar[bool],
        },
        "FORGE_FUNCTION": fn.name,
        "FORGE_OPERANDS": tuple(_field(n) for n, _ in fn.operands),
        "FORGE_KEYWORDS": tuple(n for n, _ in fn.keywords),
        "FORGE_TUPLES": fn.tuple_keywords,
        "FORGE_KINDS": tuple(kind for _, kind in fn.operands),
        "FORGE_PLAIN": all(kind == "single" for _, kind in fn.operands),
        "output": result_def(TensorType),
        "traits": traits_def(Pure()),
        "irdl_options": (ParsePropInAttrDict(),),
        "assembly_format": "operands attr-dict `:` functional-type(operands, results)",
        "verify_": _verify_forge_call,
    }
    for name, kind in fn.operands:
        body[_field(name)] = defs[kind](TensorType)
    for name, default in fn.keywords:
        body[name] = prop_def(Attribute) if default is REQUIRED else opt_prop_def(Attribute)
    return op_definition(type(f"{fn.name}Op", (ForgeOp,), body))


FORGE_OPS: dict[str, type[ForgeOp]] = {fn.name: _make_op(fn) for fn in FUNCTIONS}


def build(function: str, operands: Sequence[SSAValue | None], **keywords) -> ForgeOp:
    """A `forge.<function>` op, checked once: `forge_rules.ForgeRuleError`
    for a call Forge rejects. Keywords that are None are left to Forge's
    default. The result type is the one Forge computes (`checked_type`): its
    element type may differ from the `tir` value's (a comparison keeps its
    first operand's type, an integer Divide gives float32)."""
    cls = FORGE_OPS[function]
    props = {}
    for name, value in keywords.items():
        if value is not None:
            if name not in cls.FORGE_KEYWORDS:
                raise TypeError(f"forge.op.{function} has no keyword {name!r}")
            props[name] = to_attr(value)
    if cls.FORGE_PLAIN and len(operands) == len(cls.FORGE_KINDS):
        present = [v for v in operands if v is not None]
        grouped: list[object] = list(present)
    else:
        grouped, present = _group(cls.FORGE_KINDS, operands)
    types = [dtypes.tensor(v.type) for v in present]
    return cls.build(operands=grouped, result_types=[_checked(cls, types, props)], properties=props)


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


def _checked(cls: type[ForgeOp], types: list[TensorType], props: dict[str, Attribute]) -> TensorType:
    """`checked_type` of a call of `cls` on operands of `types` with the
    keyword properties `props`, remembered. It is a pure function of them,
    and types and keyword attributes are shared objects (`dtypes.tensor_type`,
    `to_attr`), so the key is their identity; the entry holds them, so no id
    is reused while it lives. Building and verifying an op both ask."""
    key = (cls, *map(id, types), *props.keys(), *map(id, props.values()))
    entry = _CHECKED.get(key)
    if entry is None:
        call = forge_rules.Call(
            cls.FORGE_FUNCTION, [t.get_shape() for t in types], [_element_dtype(t) for t in types],
            _call_keywords(BY_NAME[cls.FORGE_FUNCTION], {k: _keyword_value(cls, k, a) for k, a in props.items()}),
        )
        try:
            result: TensorType | str = checked_type(call, types[0] if types else None)
        except forge_rules.ForgeRuleError as e:
            result = str(e)
        if len(_CHECKED) >= 4096:
            _CHECKED.clear()
        entry = _CHECKED[key] = (types, tuple(props.values()), result)
    if isinstance(entry[2], str):
        raise forge_rules.ForgeRuleError(entry[2])
    return entry[2]


_CHECKED: dict[tuple, tuple[list[TensorType], tuple[Attribute, ...], TensorType | str]] = {}


# -- weights ----------------------------------------------------------------------


@irdl_attr_definition
class DataFormatAttr(EnumAttribute[DataFormat], SpacedOpaqueSyntaxAttribute):
    """A data format of `data_formats.FORMATS`: `#forge<data_format bfp8_b>`."""

    name = "forge.data_format"


def _verify_weight_format(op: ParameterOp | ConstantOp) -> None:
    if op.weight_format is not None and op.weight_format.data not in BLOCK_FORMATS:
        raise VerifyException(f"a weight's format is one of {', '.join(BLOCK_FORMATS)}, not {op.weight_format.data}")


#: the load-time steps a parameter's `layout` may list: each takes the shape before it to the shape after
LAYOUT_STEPS = ("transpose", "reshape")


@op_definition
class ParameterOp(FastOp):
    """A model weight, loaded by name from the ONNX model by the emitted
    `process_framework_parameters` (`self.get_parameter(name)`). `layout`
    lists steps applied once as it loads, in order: `{transpose = array<i64:
    perm>}` or `{reshape = array<i64: shape>}` (`fold-weight-layouts`).
    `weight_format`: the block float the device stores it in, as the B
    operand of a matmul (`mark-weight-formats`)."""

    name = "forge.parameter"
    output = result_def(TensorType)
    parameter_name = prop_def(StringAttr)
    value = prop_def(Attribute)
    layout = opt_prop_def(ArrayAttr)
    weight_format = opt_prop_def(DataFormatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$parameter_name attr-dict `:` type($output)"

    def steps(self) -> list[tuple[str, tuple[int, ...]]]:
        """`layout` as (kind, ints) pairs."""
        steps = []
        for step in self.layout.data if self.layout is not None else ():
            ((kind, ints),) = step.data.items() if isinstance(step, DictionaryAttr) and len(step.data) == 1 else (
                ("", None),)
            if kind not in LAYOUT_STEPS or not isinstance(ints, DenseArrayBase):
                raise VerifyException(f"a layout step is one of {{{', '.join(LAYOUT_STEPS)} = array<i64: ...>}}")
            steps.append((kind, tuple(cast(Sequence[int], ints.get_values()))))
        return steps

    def verify_(self) -> None:
        _verify_weight_format(self)
        if not isinstance(self.value, DenseIntOrFPElementsAttr):
            return
        shape = list(self.value.get_shape())
        for kind, ints in self.steps():
            if kind == "transpose" and sorted(ints) != list(range(len(shape))):
                raise VerifyException(f"layout: transpose {list(ints)} is no permutation of {len(shape)} dims")
            if kind == "reshape" and math.prod(ints) != math.prod(shape):
                raise VerifyException(f"layout: reshape of {shape} to {list(ints)} changes the element count")
            shape = [shape[i] for i in ints] if kind == "transpose" else list(ints)
        if shape != list(dtypes.tensor(self.output.type).get_shape()):
            raise VerifyException(
                f"the weight laid out has shape {shape}, but the result is {self.output.type}"
            )


def layout_step(kind: str, ints: Sequence[int]) -> DictionaryAttr:
    assert kind in LAYOUT_STEPS
    return DictionaryAttr({kind: DenseArrayBase.from_list(i64, list(ints))})


@op_definition
class ConstantOp(FastOp):
    """A tensor the compiler computed (`self.get_constant(name)`): either
    `value`, saved beside the module, or one repeated `fill` value.
    `weight_format` as a parameter's."""

    name = "forge.constant"
    output = result_def(TensorType)
    constant_name = prop_def(StringAttr)
    value = opt_prop_def(Attribute)
    fill = opt_prop_def(Attribute)
    weight_format = opt_prop_def(DataFormatAttr)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$constant_name attr-dict `:` type($output)"

    def verify_(self) -> None:
        _verify_weight_format(self)
        if (self.value is None) == (self.fill is None):
            raise VerifyException("exactly one of value and fill must be given")


FORGE = Dialect("forge", [*FORGE_OPS.values(), ParameterOp, ConstantOp], [DataFormatAttr])
