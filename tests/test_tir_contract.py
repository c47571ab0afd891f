"""`tir` as a contract: every op has a builder, a verifier, an interpreter and
a Forge lowering; every function kind has a numpy meaning and a Forge form,
and the two compute the same."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType, f32, i1
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from forge_opt.dialects import forge_functions, tir
from forge_opt.dialects import forge_ops as F
from forge_opt.dialects.onnx import ONNX
from forge_opt.dialects.tir_functions import TABLES, BinaryFn, PoolKind, ReduceFn, UnaryFn
from forge_opt.interpreters.forge_standin import run_forge_module
from forge_opt.interpreters.run import run_module
from forge_opt.interpreters.tir import TirFunctions
from forge_opt.interpreters.tir_kinds import NUMPY
from forge_opt.targets.forge_python import emit_module
from forge_opt.transforms import tir_to_forge
from forge_opt.transforms.onnx_lowerings.table import ONNX_LOWERINGS
from forge_opt.transforms.tir_forge_calls import CALLS
from forge_opt.transforms.tir_to_forge import TirToForgePass
from forge_opt.xdsl_internals import interpreted_ops

TIR_OPS = list(tir.TIR.operations)


def test_every_lowering_key_is_an_op_of_its_dialect():
    assert set(ONNX_LOWERINGS) <= set(ONNX.operations)
    assert set(tir_to_forge.LOWERINGS) <= set(TIR_OPS)


@pytest.mark.parametrize("op", TIR_OPS, ids=lambda op: op.name)
def test_every_tir_op_has_a_builder_an_interpreter_and_a_forge_lowering(op):
    assert any("__init__" in vars(c) for c in op.__mro__ if issubclass(c, tir.TirOp) and c is not tir.TirOp)
    assert op.infer is not tir.TirOp.infer, "its builder and verifier must infer its result types"
    definition = op.get_irdl_definition()
    fields = {name for name, _ in definition.operands} | set(definition.properties)
    assert op.inferred is not tir.TirOp.inferred or set(op.infer_names()) <= fields, (
        "infer's parameters are named for the op's operands and properties, or the op reads them itself"
    )
    assert op in interpreted_ops(TirFunctions), f"{op.name} has no numpy implementation"
    assert op in tir_to_forge.LOWERINGS or op.name in tir_to_forge.DECOMPOSED_BY


@pytest.mark.parametrize(
    "enum, member",
    [(enum, m) for enum in TABLES for m in enum],
    ids=lambda v: getattr(v, "value", getattr(v, "__name__", "")),
)
def test_every_function_kind_has_a_meaning_and_a_forge_form(enum, member):
    entry, forge_call = TABLES[enum][member], CALLS[enum][member]
    assert callable(NUMPY[enum][member]) and entry.doc
    assert (forge_call.builder is None) != (not forge_call.instead), "one Forge function, or how it is done instead"
    if forge_call.builder is not None:
        function = forge_functions.BY_NAME[forge_call.builder.__name__]
        assert F.BUILDERS[function.name] is forge_call.builder
        assert set(forge_call.keywords) <= set(function.keyword_names)


def _inputs(fn, shape, rng):
    if fn in (UnaryFn.NOT, BinaryFn.AND, BinaryFn.OR):
        return rng.integers(0, 2, shape).astype(bool)
    if fn in (UnaryFn.LOG, UnaryFn.SQRT, UnaryFn.RECIPROCAL, BinaryFn.POW, BinaryFn.DIV, BinaryFn.MOD):
        return rng.uniform(0.5, 2.0, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def _build(fn, types):
    """A module whose function applies `fn` to its arguments."""
    block = Block(arg_types=types)
    args = block.args
    if isinstance(fn, UnaryFn):
        op = tir.UnaryOp(fn, args[0])
    elif isinstance(fn, BinaryFn):
        op = tir.BinaryOp(fn, *args)
    elif isinstance(fn, ReduceFn):
        op = tir.ReduceOp(fn, args[0], [1], keepdims=False)
    else:
        op = tir.Pool2dOp(fn, args[0], [2, 2], [1, 1], [0, 0, 0, 0], [1, 1], False, False)
    block.add_ops([op, ReturnOp(op.results[0])])
    func = FuncOp("main", (types, [op.results[0].type]), Region(block))
    module = ModuleOp([func])
    module.verify()
    return module


@pytest.mark.parametrize("fn", [m for enum in TABLES for m in enum], ids=str)
def test_tir_and_forge_compute_the_same(fn):
    """The table's numpy meaning (the tir interpreter) and the Forge calls
    tir-to-forge makes of it (run on the stand-in) agree."""
    rng = np.random.default_rng(0)
    shape = [1, 2, 4, 4] if isinstance(fn, PoolKind) else [3, 4]
    arity = 2 if isinstance(fn, BinaryFn) else 1
    arrays = [_inputs(fn, shape, rng) for _ in range(arity)]
    types = [TensorType(i1 if a.dtype == bool else f32, shape) for a in arrays]
    module = _build(fn, types)
    want = run_module(module, arrays)[0]
    TirToForgePass().apply(Context(), module)
    module.verify()
    emitted = emit_module(module)
    got = run_forge_module(emitted.source, arrays, None, emitted)[0]
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_an_enum_property_takes_its_enum_not_a_string():
    """`ReduceFnAttr("sum")` builds an attribute whose data is a plain string
    (and `"bogus"` one that fails only when printed): the builders refuse it."""
    x = Block(arg_types=[TensorType(f32, [1, 2, 4, 4])]).args[0]
    with pytest.raises(TypeError, match="takes a ReduceFn, not 'sum'"):
        tir.ReduceOp("sum", x, [1], False)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="takes a PoolKind, not 'max'"):
        tir.Pool2dOp("max", x, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False, False)  # pyright: ignore[reportArgumentType]
    assert tir.ReduceOp(ReduceFn.SUM, x, [1], False).fn.data is ReduceFn.SUM
    assert tir.Pool2dOp(PoolKind.MAX, x, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], False, False).kind.data is PoolKind.MAX
