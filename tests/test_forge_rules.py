"""Forge's rules are written once, in the records of
dialects/forge_functions/: a call that breaks one is rejected by the `forge`
dialect's verifier and by the Forge stand-in with the same message; the op
classes and builders are generated from the records."""

import numpy as np
import pytest
from xdsl.dialects.builtin import Float64Type, IntegerAttr, StringAttr, TensorType, f32, i64
from xdsl.ir import Block
from xdsl.irdl import AnyAttr
from xdsl.utils.exceptions import VerifyException

from forge_opt import dtypes
from forge_opt.dialects import forge, forge_ops
from forge_opt.dialects.forge_functions import BY_NAME, FUNCTIONS, RULES, ForgeRuleError
from forge_opt.interpreters.forge_standin import OP_FUNCTIONS, ForgeCallError, Tensor
from forge_opt.tools import gen_forge_ops

F32 = np.dtype(np.float32)

# rule id -> (function, operands as (shape, dtype), keywords breaking the rule)
VIOLATIONS = {
    "dtype-unsupported": ("Exp", [((4,), np.float64)], {}),
    "eltwise-broadcast": ("Add", [((2, 3), F32), ((4,), F32)], {}),
    "matmul-shapes": ("Matmul", [((2, 3), F32), ((2, 3), F32)], {}),
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
    """What the builder and the verifier of a parsed op say: the same message."""
    block = Block(arg_types=[TensorType(dtypes.mlir_type_of_numpy(np.dtype(d)), s) for s, d in operands])
    ir_keywords = {k: _ir_keyword(v) for k, v in keywords.items()}
    cls = getattr(forge_ops, f"{function}Op")
    with pytest.raises(ForgeRuleError) as built:
        forge.build(cls, list(block.args), **ir_keywords)
    kinds = list(cls.FUNCTION.kinds)
    grouped = [list(block.args)] if kinds == ["variadic"] else [*block.args, *[[]] * (len(kinds) - len(block.args))]
    op = cls.build(
        operands=grouped, result_types=[TensorType(f32, operands[0][0])],
        properties={k: forge.to_attr(v) for k, v in ir_keywords.items()},
    )
    with pytest.raises(VerifyException) as verified:
        op.verify_()
    assert str(verified.value) == str(built.value)
    return str(verified.value)


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


def test_every_function_is_one_record_and_one_named_class():
    assert [cls.FUNCTION for cls in forge_ops.OPS] == list(FUNCTIONS)
    for fn in FUNCTIONS:
        cls = getattr(forge_ops, f"{fn.name}Op")
        assert cls.FUNCTION is fn and cls.name == fn.op_name
        assert forge_ops.BUILDERS[fn.name] is getattr(forge_ops, fn.name)
        assert fn.kernel is not None or fn.name == "ConstantPad"  # never called: rule constantpad-unusable


def test_standin_asserts_its_value_has_the_shape_forge_gives(monkeypatch):
    """Forge's rule shape-vs-eval: a shape function that disagrees with its
    kernel fails every run of the op, so the two cannot drift apart."""
    monkeypatch.setattr(BY_NAME["Relu"], "shape", lambda call: (*call.shape(0), 1))
    message = r"\[shape-vs-eval\] forge.op.Relu: .* shape \[2, 3\], .* gives \[2, 3, 1\]"
    with pytest.raises(ForgeCallError, match=message):
        OP_FUNCTIONS["Relu"]("probe", Tensor(np.zeros((2, 3), np.float32)))


@pytest.mark.parametrize(
    ("function", "shapes", "keywords", "expected"),
    [
        ("Matmul", [(4,), (2, 4, 3)], {}, (2, 3)),
        ("Matmul", [(5, 2, 4), (4,)], {}, (5, 2)),
        ("Matmul", [(3, 1, 2, 4), (5, 4, 6)], {}, (3, 5, 2, 6)),
        ("Conv2d", [(1, 3, 9, 9), (8, 3, 3, 3)], {"stride": 2, "padding": [1, 1, 1, 1]}, (1, 8, 5, 5)),
        ("Conv2d", [(1, 9, 9, 3), (8, 3, 3, 3)], {"padding": [0, 0, 0, 0], "channel_last": True}, (1, 7, 7, 8)),
        ("Conv2dTranspose", [(1, 4, 5, 5), (4, 2, 3, 3)], {"stride": 2, "padding": 1, "groups": 2}, (1, 4, 9, 9)),
        ("MaxPool2d", [(1, 2, 7, 7)], {"kernel_size": 3, "stride": 2, "padding": [1, 1, 1, 1]}, (1, 2, 4, 4)),
        ("Pad", [(1, 5, 6, 3)], {"pad": [1, 2, 3, 4], "channel_last": True}, (1, 12, 9, 3)),
        ("Broadcast", [(3, 1)], {"dim": -3, "shape": 4}, (4, 3, 1)),
        ("Repeat", [(2, 3)], {"repeats": [2, 1, 2]}, (2, 2, 6)),
        ("AdvIndex", [(7, 3), (2, 2)], {"dim": 0}, (4, 3)),
        ("Argmax", [(2, 3)], {}, ()),
        ("Reshape", [(2, 3, 4)], {"shape": [4, -1]}, (4, 6)),
        ("Index", [(10, 4)], {"dim": -2, "start": 1, "stop": -1, "stride": 3}, (3, 4)),
    ],
)
def test_shape_functions_match_the_kernels(function, shapes, keywords, expected):
    """The stand-in runs the kernel and compares with the shape function; the
    dialect's builder gives the same type."""
    arrays = [np.zeros(s, np.int32 if function == "AdvIndex" and i else np.float32) for i, s in enumerate(shapes)]
    assert OP_FUNCTIONS[function]("probe", *map(Tensor, arrays), **keywords).shape == expected
    block = Block(arg_types=[TensorType(dtypes.mlir_type_of_numpy(a.dtype), a.shape) for a in arrays])
    built = forge_ops.BUILDERS[function](*block.args, **keywords)
    assert dtypes.tensor(built.results[0].type).get_shape() == expected


def test_the_op_classes_and_builders_are_generated_from_the_records():
    assert gen_forge_ops.main(["--check"]) == 0, "run python -m forge_opt.tools.gen_forge_ops"
    assert forge_ops.BUILDERS.keys() == BY_NAME.keys()


def test_a_typed_builder_takes_forges_names_only():
    x = Block(arg_types=[TensorType(f32, [2, 3])]).args[0]
    transposed = forge_ops.Transpose(x, dim0=-2, dim1=-1)
    assert isinstance(transposed, forge_ops.TransposeOp) and transposed.results[0].type == TensorType(f32, [3, 2])
    with pytest.raises(TypeError, match="dim2"):
        forge_ops.Transpose(x, dim0=-2, dim2=-1)  # pyright: ignore[reportCallIssue]


def test_every_keyword_is_typed():
    """Each keyword property admits only the attributes its Python type
    becomes (`_CONSTRAINTS` of the generator), so a parsed op with a keyword
    of the wrong kind fails before any rule reads it."""
    untyped = [
        f"{cls.name}.{name}"
        for cls in forge_ops.OPS
        for name, d in cls.get_irdl_definition().properties.items()
        if d.constr == AnyAttr()
    ]
    assert not untyped
    x = Block(arg_types=[TensorType(f32, [2, 3])]).args[0]
    op = forge_ops.Transpose(x, dim0=-2, dim1=-1)
    op.properties["dim0"] = StringAttr("a")
    with pytest.raises(VerifyException, match=r"property 'dim0' of forge\.transpose"):
        op.verify_()
