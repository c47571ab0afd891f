"""The `onnx` dialect: one op per ONNX operator (generated, `onnx_ops.py`),
plus what the importer needs around them."""

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Dialect
from xdsl.irdl import (
    prop_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import IsTerminator

from forge_opt.dialects import onnx_verifiers  # noqa: F401  (registers the checks)
from forge_opt.dialects.irdl_fast import FastOp, op_definition
from forge_opt.dialects.onnx_base import OnnxOp, OptType, SeqType, StringType
from forge_opt.dialects.onnx_ops import ONNX_OPS, ONNX_VERSION

#: Discardable attribute naming the graph initializer an `onnx.Constant` holds.
INITIALIZER_ATTR = "onnx.initializer"


@op_definition
class CustomOp(FastOp):
    """A node of another domain (e.g. com.microsoft), kept so the model still
    imports; its ONNX attributes are the op's attributes."""

    name = "onnx.Custom"
    domain = prop_def(StringAttr)
    op_type = prop_def(StringAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    assembly_format = (
        "$domain $op_type `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs)"
    )


@op_definition
class YieldOp(FastOp):
    """Returns the outputs of a graph attribute's body (If, Loop, Scan)."""

    name = "onnx.Yield"
    inputs = var_operand_def()
    traits = traits_def(IsTerminator())
    assembly_format = "attr-dict ($inputs^ `:` type($inputs))?"


OPS_BY_TYPE: dict[str, type[OnnxOp]] = {op.ONNX_OP_TYPE: op for op in ONNX_OPS}

ONNX = Dialect(
    "onnx",
    [*ONNX_OPS, CustomOp, YieldOp],
    [StringType, SeqType, OptType],
)

__all__ = ["ONNX", "ONNX_VERSION", "OPS_BY_TYPE", "CustomOp", "OnnxOp", "YieldOp"]
