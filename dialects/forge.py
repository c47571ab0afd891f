"""The `forge` dialect: one op per function of Forge's Python op API.

An op is named after its function (`forge.index` for `forge.op.Index`,
`forge.max_pool2d` for `forge.op.MaxPool2d`); its operands are the
function's tensor parameters and its properties its keyword arguments, by
Forge's names. Ops are built from the table in `forge_api.py`; verifiers
enforce the constraints Forge itself asserts. `forge.parameter` and
`forge.constant` are the module's weights (`get_parameter`/`get_constant`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, OpResult, SSAValue, TypeAttribute
from xdsl.irdl import (
    ParsePropInAttrDict,
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

from forge_opt.dialects.irdl_fast import FastOp, op_definition
from forge_opt.dialects.forge_api import BY_NAME, FUNCTIONS, ForgeFunction


def to_attr(value: object) -> Attribute:
    """A property for a Python keyword value."""
    if isinstance(value, Attribute):
        return value
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return _scalar_attr(kind, kind(value))
    if isinstance(value, list | tuple):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return DenseArrayBase.from_list(i64, list(value))
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return DenseArrayBase.from_list(f64, [float(v) for v in value])
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
        return IntegerAttr(value, i64)
    if kind is float:
        return FloatAttr(value, f64)
    return StringAttr(value)


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

    def forge_operands(self) -> list[SSAValue]:
        values: list[SSAValue] = []
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
        """Keyword arguments given, as Python values, in Forge's order."""
        return {
            name: to_python(self.properties[name])
            for name in self.FORGE_KEYWORDS
            if name in self.properties
        }

    @property
    def result(self) -> SSAValue:
        return self.results[0]


#: Checks Forge itself asserts, by function name.
_VERIFIERS: dict[str, Callable[[ForgeOp], None]] = {}


def _verifies(name: str):
    def register(fn):
        _VERIFIERS[name] = fn
        return fn

    return register


def _field(parameter: str) -> str:
    # `operands` (Concatenate's *operands) is taken by Operation itself.
    return "inputs" if parameter == "operands" else parameter


def _make_op(fn: ForgeFunction) -> type[ForgeOp]:
    defs = {"single": operand_def, "optional": opt_operand_def, "variadic": var_operand_def}
    body: dict[str, object] = {
        "name": fn.op_name,
        "__doc__": f"`forge.op.{fn.name}`.",
        "__annotations__": {
            "FORGE_FUNCTION": ClassVar[str],
            "FORGE_OPERANDS": ClassVar[tuple[str, ...]],
            "FORGE_KEYWORDS": ClassVar[tuple[str, ...]],
        },
        "FORGE_FUNCTION": fn.name,
        "FORGE_OPERANDS": tuple(_field(n) for n, _ in fn.operands),
        "FORGE_KEYWORDS": tuple(n for n, _ in fn.keywords),
        "output": result_def(TensorType),
        "traits": traits_def(Pure()),
        "irdl_options": (ParsePropInAttrDict(),),
        "assembly_format": "operands attr-dict `:` functional-type(operands, results)",
    }
    for name, kind in fn.operands:
        body[_field(name)] = defs[kind](TensorType)
    for name, _ in fn.keywords:
        body[name] = opt_prop_def(Attribute)
    check = _VERIFIERS.get(fn.name)
    if check is not None:
        body["verify_"] = lambda self, check=check: check(self)
    return op_definition(type(f"{fn.name}Op", (ForgeOp,), body))


def _kw(op: ForgeOp, name: str) -> object:
    attr = op.properties.get(name)
    return None if attr is None else to_python(attr)


def _shape(value: SSAValue) -> tuple[int, ...]:
    return value.type.get_shape()


@_verifies("Index")
def _verify_index(op: ForgeOp) -> None:
    shape = _shape(op.operandA)
    rank = len(shape)
    dim, start, stop, stride = (_kw(op, k) for k in ("dim", "start", "stop", "stride"))
    if dim is None or start is None or stop is None:
        raise VerifyException("dim, start and stop are required")
    stride = 1 if stride is None else stride
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
    if list(_shape(op.output)) != expected:
        raise VerifyException(f"result has shape {list(_shape(op.output))}, expected {expected}")


@_verifies("Transpose")
def _verify_transpose(op: ForgeOp) -> None:
    rank = len(_shape(op.operandA))
    for k in ("dim0", "dim1"):
        d = _kw(op, k)
        if d is None or not -rank <= d < rank:
            raise VerifyException(f"{k} {d} is out of range for rank {rank}")


def _verify_single_dim(op: ForgeOp) -> None:
    rank = len(_shape(op.operandA))
    dim = _kw(op, "dim")
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise VerifyException(f"dim {dim} must be one dimension within rank {rank}")


for _name in ("ReduceSum", "ReduceAvg", "ReduceMax"):
    _VERIFIERS[_name] = _verify_single_dim


@_verifies("Conv2d")
def _verify_conv2d(op: ForgeOp) -> None:
    padding = _kw(op, "padding")
    if not (isinstance(padding, list) and len(padding) == 4):
        raise VerifyException("padding must be an explicit [top, left, bottom, right] list")


FORGE_OPS: dict[str, type[ForgeOp]] = {fn.name: _make_op(fn) for fn in FUNCTIONS}


def build(function: str, operands: Sequence[SSAValue | None], result_type: Attribute, **keywords) -> ForgeOp:
    """A `forge.<function>` op; keywords that are None are left to Forge's default."""
    cls = FORGE_OPS[function]
    fn = BY_NAME[function]
    grouped: list[object] = []
    it = list(operands)
    for i, (_, kind) in enumerate(fn.operands):
        if kind == "variadic":
            grouped.append(list(it[i:]))
            break
        value = it[i] if i < len(it) else None
        grouped.append([] if kind == "optional" and value is None else value)
    props = {k: to_attr(v) for k, v in keywords.items() if v is not None}
    if not props.keys() <= set(cls.FORGE_KEYWORDS):
        unknown = sorted(set(props) - set(cls.FORGE_KEYWORDS))
        raise TypeError(f"forge.op.{function} has no keyword {unknown}")
    return cls.build(operands=grouped, result_types=[result_type], properties=props)



# -- weights ----------------------------------------------------------------------


@op_definition
class ParameterOp(FastOp):
    """A model weight, loaded by name from the ONNX model by the emitted
    `process_framework_parameters` (`self.get_parameter(name)`)."""

    name = "forge.parameter"
    output = result_def(TensorType)
    parameter_name = prop_def(StringAttr)
    value = prop_def(Attribute)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$parameter_name attr-dict `:` type($output)"


@op_definition
class ConstantOp(FastOp):
    """A tensor the compiler computed (`self.get_constant(name)`): either
    `value`, saved beside the module, or one repeated `fill` value."""

    name = "forge.constant"
    output = result_def(TensorType)
    constant_name = prop_def(StringAttr)
    value = opt_prop_def(Attribute)
    fill = opt_prop_def(Attribute)
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$constant_name attr-dict `:` type($output)"

    def verify_(self) -> None:
        if (self.value is None) == (self.fill is None):
            raise VerifyException("exactly one of value and fill must be given")


FORGE = Dialect("forge", [*FORGE_OPS.values(), ParameterOp, ConstantOp], [])
