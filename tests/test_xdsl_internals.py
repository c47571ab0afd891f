"""Guards of what `xdsl_internals` relies on in xDSL's private state: each
test fails when xDSL changes it, naming what to revisit. And a scan that
keeps private access out of every other module."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    NameLoc,
    StringAttr,
    TensorType,
    UnknownLoc,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Block, SSAValues
from xdsl.irdl import IRDLOperation, VerificationContext
from xdsl.utils.exceptions import VerifyException

from forge_opt import xdsl_internals as internals
from forge_opt.dialects import forge, tir
from forge_opt.dialects.irdl_fast import FastOp
from forge_opt.dialects.onnx import ONNX
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.interpreters.tir import TirFunctions

T = TensorType(f32, [2, 3])
ROOT = Path(internals.__file__).resolve().parent
PRIVATE = re.compile(
    r"\.(_operands|_operand_uses|_successors|_type|_name|_first_op|_next_op|_prev_op|_next_use|_operation|_index|_impls)\b"
    r"|xdsl\.irdl\.operations|xdsl\.irdl\.constraints|object\.__setattr__"
)


def _block(n: int = 2) -> Block:
    return Block(arg_types=[T] * n)


def test_no_private_access_elsewhere():
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in (".venv", "build", "tests") or path.name == "xdsl_internals.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "reach into xDSL only through xdsl_internals:\n" + "\n".join(found)


def test_every_private_access_is_listed():
    text = Path(internals.__file__).read_text()
    doc, code = text.split('"""', 2)[1], text.split('"""', 2)[2]
    for name in set(re.findall(r"# private: (_\w+)", code)):
        assert name in doc, f"{name} is used but not in the module's table"


def test_init_operation_matches_xdsl():
    block = _block()
    a, b = block.args
    fast = tir.BinaryOp(BinaryFn.ADD, a, b)
    slow = IRDLOperation.__new__(tir.BinaryOp)
    IRDLOperation.__init__(slow, operands=[a, b], result_types=[T], properties=dict(fast.properties))
    assert type(fast.operands) is type(slow.operands) and tuple(fast.operands) == tuple(slow.operands)
    assert [(u.operation is fast, u.index) for u in a.uses if u.operation is fast] == [(True, 0)]
    assert internals.operands_of(fast) == tuple(fast.operands) and type(internals.operands_of(fast)) is SSAValues
    assert [r.type for r in fast.results] == [r.type for r in slow.results]
    assert all(r.owner is fast and r.index == i for i, r in enumerate(fast.results))


def test_private_type_is_the_type():
    value = _block().args[0]
    op = tir.UnaryOp(UnaryFn.RELU, value)
    assert internals.types_hold(op, [lambda t: t == T], [None])
    assert not internals.types_hold(op, [lambda t: t != T], [None])


def test_successors_are_private_tuple():
    op = tir.UnaryOp(UnaryFn.RELU, _block().args[0])
    assert internals.plain_operands(op) == tuple(op.operands) and not op.successors


def test_insert_before_matches_xdsl():
    block = _block(1)
    x = block.args[0]
    last = tir.UnaryOp(UnaryFn.RELU, x)
    block.add_op(last)
    first, second = tir.UnaryOp(UnaryFn.EXP, x), tir.UnaryOp(UnaryFn.LOG, x)
    internals.insert_before(block, [first, second], last)
    assert list(block.ops) == [first, second, last] == internals.ops_of(block)
    assert first.parent is block and block.first_op is first and last.prev_op is second
    other = _block(1)
    reference = [tir.UnaryOp(UnaryFn.RELU, other.args[0]) for _ in range(3)]
    other.add_op(reference[2])
    other.insert_ops_before(reference[:2], reference[2])
    assert [op.name for op in other.ops] == [op.name for op in block.ops]


def test_move_uses_matches_xdsl():
    block = _block()
    a, b = block.args
    users = [tir.BinaryOp(BinaryFn.ADD, a, a), tir.UnaryOp(UnaryFn.RELU, a)]
    block.add_ops(users)
    a.name_hint = "a"
    internals.move_uses(a, b)
    assert not a.uses and {(u.operation, u.index) for u in b.uses} == {(users[0], 0), (users[0], 1), (users[1], 0)}
    assert tuple(users[0].operands) == (b, b) and b.name_hint == "a"


def test_set_name_matches_the_setter():
    value = _block().args[0]
    internals.set_name(value, "x")
    assert value.name_hint == "x"
    renamed = _block().args[0]
    renamed.name_hint = "old"
    internals.take_name(renamed, value)
    assert renamed.name_hint == "x"
    op = tir.UnaryOp(UnaryFn.RELU, renamed)
    internals.name_results([op], value)
    assert op.output.name_hint == "x"


def test_name_loc_matches_xdsl():
    assert internals.name_loc("node") == NameLoc(StringAttr("node"), UnknownLoc())


def test_ssavalues_is_a_tuple():
    assert issubclass(SSAValues, tuple)
    op = tir.UnaryOp(UnaryFn.RELU, _block().args[0])
    assert internals.item(op.results, 0) is op.results[0]


@pytest.mark.parametrize("cls", [*tir.TIR.operations, *forge.FORGE.operations], ids=lambda c: c.name)
def test_accessors_match_xdsl(cls):
    """Each named operand and result reads what xDSL's generic accessor reads."""
    op_def = cls.get_irdl_definition()
    for defs in (op_def.operands, op_def.results):
        for i, (name, _) in enumerate(defs):
            accessor = inspect.getattr_static(cls, name)
            if type(accessor).__name__ in ("OperandAccessor", "ResultAccessor"):
                assert accessor.idx == i, f"{cls.name}.{name}"


def test_accessors_read_the_operand():
    block = _block()
    op = tir.MatmulOp(block.args[0], tir.TransposeOp(block.args[1], [1, 0]).output)
    assert op.lhs is op.operands[0] and op.rhs is op.operands[1] and op.output is op.results[0]
    # xDSL's accessor class is still the one `index_single_accessors` replaces
    assert type(inspect.getattr_static(tir.MatmulOp, "lhs")) is internals.OperandAccessor
    assert type(inspect.getattr_static(tir.MatmulOp, "output")) is internals.ResultAccessor


@pytest.mark.parametrize("cls", [*tir.TIR.operations, *list(ONNX.operations)[:40]], ids=lambda c: c.name)
def test_trait_cache_matches_xdsl(cls):
    from xdsl.traits import ConstantLike, HasParent, IsolatedFromAbove, IsTerminator, NoMemoryEffect, Pure

    if not issubclass(cls, FastOp):
        pytest.skip("not a FastOp")
    for trait in (Pure, NoMemoryEffect, IsTerminator, IsolatedFromAbove, ConstantLike, HasParent):
        assert cls.get_trait(trait) == IRDLOperation.get_trait.__func__(cls, trait)


def test_interpreted_ops_lists_impls():
    ops = internals.interpreted_ops(TirFunctions)
    assert tir.MatmulOp in ops and all(isinstance(op, type) for op in ops)


def test_extend_dialect_adds_ops():
    """A stock context loading xDSL's own `shard` knows our collectives."""
    from xdsl.context import Context
    from xdsl.dialects.shard import Shard

    from forge_opt.dialects import shard

    assert shard.SHARD is Shard
    assert internals.extend_dialect(Shard, [shard.AllGatherOp]) is Shard  # twice: still once
    names = [op.name for op in Shard.operations]
    assert names.count("shard.all_gather") == 1 and "shard.all_slice" in names and "shard.reduce_scatter" in names
    ctx = Context()
    ctx.load_dialect(Shard)
    assert ctx.get_op("shard.all_slice") is shard.AllSliceOp


SAMPLES = [T, TensorType(f32, [4]), TensorType(i64, [2]), TensorType(i1, []), StringAttr("x"), IntegerAttr(3, i64),
           IntegerAttr(1, i1), IntegerAttr(3, i32), FloatAttr(1.0, f64), f32, DenseArrayBase.from_list(i64, [1, 2])]


@pytest.mark.parametrize("cls", [*tir.TIR.operations, *forge.FORGE.operations, *list(ONNX.operations)[:60]],
                         ids=lambda c: c.name)
def test_checks_agree_with_irdl_constraints(cls):
    """The predicates read from IRDL's definitions (`range_check`,
    `attr_check`) accept exactly what IRDL's own constraints accept."""
    op_def = cls.get_irdl_definition()
    ranges = [*(d.constr for _, d in op_def.operands), *(d.constr for _, d in op_def.results)]
    props = [d.constr for _, d in op_def.properties.items()]
    for constr, read in [*((c, internals.range_check) for c in ranges), *((c, internals.attr_check) for c in props)]:
        try:
            check = read(constr)
        except internals.UnsupportedDefinition:
            continue  # the op keeps xDSL's own building and verifying
        for attr in SAMPLES:
            try:
                constr.verify((attr,) if read is internals.range_check else attr, VerificationContext())
                irdl = True
            except VerifyException:
                irdl = False
            assert (check is None or check(attr)) == irdl, (constr, attr)
