"""The `forge` dialect: one op per function of Forge's Python op API.

An op is named after its function (`forge.index` for `forge.op.Index`,
`forge.max_pool2d` for `forge.op.MaxPool2d`); its operands are the
function's tensor parameters and its properties its keyword arguments, by
Forge's names. The op classes are generated (`forge_ops.py`, one named class
per record of `forge_functions/`) on the base of `forge_op.py`, whose
verifier enforces the constraints Forge itself asserts. `forge.parameter`
and `forge.constant`, here, are the module's weights
(`get_parameter`/`get_constant`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DictionaryAttr,
    StringAttr,
    TensorType,
    i64,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Dialect, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import ParsePropInAttrDict, irdl_attr_definition, opt_prop_def, prop_def, result_def, traits_def
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from forge_opt import dtypes
from forge_opt.data_formats import BLOCK_FORMATS, FormatName
from forge_opt.dialects.forge_op import ForgeOp, build, rule_call, to_attr
from forge_opt.dialects.forge_ops import OPS
from forge_opt.dialects.irdl_fast import FastOp, op_definition

# what the passes, writers and interpreters take from here as `forge.<name>`
__all__ = [
    "FORGE", "LAYOUT_STEPS", "OPS", "ConstantOp", "DataFormatAttr", "ForgeOp", "ParameterOp", "build", "layout_step",
    "rule_call", "to_attr",
]


# -- weights ----------------------------------------------------------------------


@irdl_attr_definition
class DataFormatAttr(EnumAttribute[FormatName], SpacedOpaqueSyntaxAttribute):
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


FORGE = Dialect("forge", [*OPS, ParameterOp, ConstantOp], [DataFormatAttr])
