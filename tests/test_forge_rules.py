"""Forge's rules are written once (dialects/forge_rules.py): a call that
breaks one is rejected by the `forge` dialect's verifier and by the Forge
stand-in with the same message."""

import numpy as np
import pytest
from xdsl.dialects.builtin import Float64Type, IntegerAttr, TensorType, f32, i64
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from forge_opt import dtypes
from forge_opt.dialects import forge
from forge_opt.dialects.forge_rules import RULES
from forge_opt.interpreters.forge_standin import OP_FUNCTIONS, ForgeCallError, Tensor

F32 = np.dtype(np.float32)

# rule id -> (function, operands as (shape, dtype), keywords breaking the rule)
VIOLATIONS = {
    "dtype-unsupported": ("Exp", [((4,), np.float64)], {}),
    "eltwise-broadcast": ("Add", [((2, 3), F32), ((4,), F32)], {}),
    "matmul-bias": ("Matmul", [((3, 4), F32), ((4, 5), F32), ((2, 3, 5), F32)], {}),
    "attr-variant": ("Clip", [((4,), F32)], {"min": 0, "max": 6.0}),
    "index-start": ("Index", [((10,), F32)], {"dim": -1, "start": 10, "stop": 10}),
    "index-stop": ("Index", [((10,), F32)], {"dim": -1, "start": 0, "stop": 11}),
    "index-stride": ("Index", [((10,), F32)], {"dim": -1, "start": 0, "stop": 4, "stride": 0}),
    "transpose-dims": ("Transpose", [((2, 3), F32)], {"dim0": -1, "dim1": 1}),
    "reshape-volume": ("Reshape", [((2, 3), F32)], {"shape": [4]}),
    "concat-dims": ("Concatenate", [((2, 3), F32), ((3, 3), F32)], {"axis": -1}),
    "broadcast-dim": ("Broadcast", [((2, 3), F32)], {"dim": -1, "shape": 6}),
    "squeeze-dim": ("Squeeze", [((2, 3), F32)], {"dim": 0}),
    "unsqueeze-dim": ("Unsqueeze", [((2, 3), F32)], {"dim": 3}),
    "constantpad-unusable": ("ConstantPad", [((2, 3), F32)], {"padding": [0, 0, 1, 1]}),
    "pad-len": ("Pad", [((2, 3), F32)], {"pad": [1, 1, 1]}),
    "reduce-dim": ("ReduceSum", [((1, 2, 3, 4, 5), F32)], {"dim": -5}),
    "softmax-dim": ("Softmax", [((2, 3), F32)], {"dim": 2}),
    "layernorm-shape": ("Layernorm", [((2, 3), F32), ((2, 3), F32), ((3,), F32)], {"dim": -1, "epsilon": 1e-5}),
    "conv-operands": ("Conv2d", [((1, 2, 4, 4), F32), ((3, 2, 3, 3), F32)], {"padding": [1, 1]}),
    "convtranspose-operands": (
        "Conv2dTranspose", [((1, 2, 4, 4), F32), ((2, 3, 3, 3), F32)], {"padding": (1, 0, 0, 1)}
    ),
    "maxpool-kernel-type": ("MaxPool2d", [((1, 1, 4, 4), F32)], {"kernel_size": [2, 2], "padding": 0}),
    "pool-symmetric": ("MaxPool2d", [((1, 1, 4, 4), F32)], {"kernel_size": 2, "padding": [0, 1, 0, 1]}),
    "pool-flags": ("AvgPool2d", [((1, 1, 4, 4), F32)], {"kernel_size": [2, 2], "padding": 0, "ceil_mode": True}),
    "embedding-table": ("Embedding", [((4,), np.int32), ((2, 3, 4), F32)], {}),
    "advindex-indices": ("AdvIndex", [((4, 3), F32), ((2, 2, 2), np.int32)], {"dim": 0}),
    "cast-dtype": ("Cast", [((4,), F32)], {"dtype": np.dtype(np.float64)}),
}

# The printer writes these keywords as tuples, so IR cannot break the rule.
PYTHON_ONLY = {"maxpool-kernel-type"}


def test_every_rule_has_a_violating_case():
    assert {r.id for r in RULES} == set(VIOLATIONS)


def _standin_error(function, operands, keywords) -> str:
    arrays = [Tensor(np.zeros(shape, dtype)) for shape, dtype in operands]
    with pytest.raises(ForgeCallError) as error:
        OP_FUNCTIONS[function]("probe", *arrays, **keywords)
    return str(error.value)


def _ir_keyword(value):
    if isinstance(value, np.dtype):
        return dtypes.mlir_type_of_numpy(value) if value != np.float64 else Float64Type()
    if isinstance(value, int) and not isinstance(value, bool):
        return IntegerAttr(value, i64)
    return value


def _verifier_error(function, operands, keywords) -> str:
    block = Block(arg_types=[TensorType(dtypes.mlir_type_of_numpy(np.dtype(d)), s) for s, d in operands])
    op = forge.build(
        function, list(block.args), TensorType(f32, operands[0][0]),
        **{k: _ir_keyword(v) for k, v in keywords.items()},
    )
    with pytest.raises(VerifyException) as error:
        op.verify_()
    return str(error.value)


@pytest.mark.parametrize("rule", sorted(VIOLATIONS))
def test_verifier_and_standin_reject_alike(rule):
    function, operands, keywords = VIOLATIONS[rule]
    standin = _standin_error(function, operands, keywords)
    assert standin.startswith(f"[{rule}] forge.op.{function}: "), standin
    if rule not in PYTHON_ONLY:
        assert _verifier_error(function, operands, keywords) == standin


def test_golden_element_types():
    """What Forge's golden computes, not what ONNX means."""
    x = Tensor(np.array([0.5, -1.5, 2.0], np.float32))
    i = Tensor(np.array([7, -7, 6], np.int64))
    d = Tensor(np.array([-3, 2, 4], np.int64))
    equal = OP_FUNCTIONS["Equal"]("eq", x, x).value()
    assert equal.dtype == np.float32 and equal.tolist() == [1.0, 1.0, 1.0]
    quotient = OP_FUNCTIONS["Divide"]("div", i, d).value()
    assert quotient.dtype == np.float32
    cast = OP_FUNCTIONS["Cast"]("cast", x, dtype=np.dtype(bool)).value()
    assert cast.dtype == np.int32 and cast.tolist() == [0, -1, 2]  # truncation, not x != 0
    assert OP_FUNCTIONS["LogicalNot"]("not", x).value().dtype == np.bool_


def test_python_int_operand_is_rejected():
    """Forge wraps a number operand in Constant, which reads a float."""
    x = Tensor(np.zeros((2,), np.float32))
    with pytest.raises(ForgeCallError, match=r"\[attr-variant\] Add: operandB is the int 2"):
        OP_FUNCTIONS["Add"]("add", x, 2)
    assert OP_FUNCTIONS["Add"]("add", x, 2.0).value().shape == (2,)
