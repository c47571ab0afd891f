"""`irdl_fast`: for every op of our dialects, the fast builder makes the op
xDSL's IRDL builder makes, and the fast verifier never accepts what xDSL's
verifier of the definition rejects."""

import pytest
from xdsl.dialects.builtin import DenseArrayBase, StringAttr, TensorType, f32, i32, i64
from xdsl.ir import Block
from xdsl.irdl import IRDLOperation, OptionalDef, VariadicDef
from xdsl.utils.exceptions import VerifyException

from forge_opt.dialects import forge, forge_ops, tir
from forge_opt.dialects.irdl_fast import FastOp, layout_of
from forge_opt.dialects.onnx import ONNX
from forge_opt.dialects.tir_functions import UnaryFn

T = TensorType(f32, [2, 3])
OPS = [op for d in (ONNX, tir.TIR, forge.FORGE) for op in d.operations]
FAST = [op for op in OPS if layout_of(op) is not None]


def _args(defs, one):
    """Grouped builder arguments: one item per single def, a list of one
    or two per optional or variadic def (alternating, to vary the sizes)."""
    grouped = []
    for i, (_, d) in enumerate(defs):
        if isinstance(d, OptionalDef):
            grouped.append([one] if i % 2 else [])
        elif isinstance(d, VariadicDef):
            grouped.append([one, one] if i % 2 else [one])
        else:
            grouped.append(one)
    return grouped


def _build_both(cls):
    value = Block(arg_types=[T]).args[0]
    op_def = cls.get_irdl_definition()
    operands, result_types = _args(op_def.operands, value), _args(op_def.results, T)
    fast = cls.build(operands=operands, result_types=result_types)
    reference = cls.__new__(cls)
    IRDLOperation.__init__(reference, operands=operands, result_types=result_types)
    return fast, reference


def _generic_accepts(op) -> bool:
    try:
        op.get_irdl_definition().verify(op)
    except VerifyException:
        return False
    return True


def test_most_ops_take_the_fast_paths():
    assert {tir.UnaryOp, tir.BinaryOp, forge_ops.IndexOp, forge.ParameterOp} <= set(FAST)
    assert len(FAST) > 0.9 * len(OPS)


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.name)
def test_fast_build_matches_irdl(cls):
    fast, reference = _build_both(cls)
    assert fast.operands == reference.operands
    assert fast.result_types == reference.result_types
    assert fast.properties == reference.properties
    assert fast.attributes == reference.attributes
    assert not fast.successors and not fast.regions
    if fast.operands:  # every operand is the same value: it has one use per operand
        uses = [u for u in fast.operands[0].uses if u.operation is fast]
        assert sorted(u.index for u in uses) == list(range(len(fast.operands)))


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.name)
def test_fast_verifier_agrees_with_xdsl(cls):
    """On valid ops and on mutants of them, the fast check and xDSL's give
    the same verdict (and some mutant is invalid)."""
    layout = layout_of(cls)
    op, _ = _build_both(cls)
    mutants = [op]
    if op.results:
        wrong_type = cls.build(
            operands=_args(cls.get_irdl_definition().operands, Block(arg_types=[T]).args[0]),
            result_types=_args(cls.get_irdl_definition().results, i32),
        )
        mutants.append(wrong_type)
    for mutate in (
        lambda o: o.properties.update(unknown=StringAttr("x")),
        lambda o: o.properties.update(operandSegmentSizes=StringAttr("x")),
        lambda o: setattr(o, "operands", list(o.operands)[:-1]),
        lambda o: setattr(o, "operands", [*o.operands, o.operands[0]] if o.operands else []),
        lambda o: o.properties.clear(),
    ):
        mutant, _ = _build_both(cls)
        mutate(mutant)
        mutants.append(mutant)
    assert layout is not None
    verdicts = [(layout.holds(m), _generic_accepts(m), m) for m in mutants]
    for fast, generic, mutant in verdicts:
        assert fast == generic, f"the fast verifier says {fast}, xDSL's says {generic}: {mutant}"
    assert not all(generic for _, generic, _ in verdicts), "no mutant is invalid: the test would prove nothing"


def test_fast_verifier_reports_xdsls_message():
    x = Block(arg_types=[T]).args[0]
    op = tir.UnaryOp(UnaryFn.RELU, x)
    op.properties["fn"] = i32
    with pytest.raises(VerifyException, match="fn"):
        op.verify()


def test_plain_ops_pass_the_fast_verifier():
    x = Block(arg_types=[T]).args[0]
    for op in (tir.UnaryOp(UnaryFn.RELU, x), forge_ops.Index(x, dim=-1, start=0, stop=1)):
        layout = layout_of(type(op))
        assert layout is not None and layout.holds(op)
        op.verify()


def test_fast_ops_are_fast_ops():
    assert all(issubclass(op, FastOp) for op in FAST)


def test_fast_verify_reports_what_operation_verify_reports():
    from xdsl.ir import Operation
    from xdsl.utils.exceptions import DiagnosticException

    block = Block(arg_types=[T])
    op = tir.TransposeOp(block.args[0], [1, 0])
    block.add_ops([op, tir.UnaryOp(UnaryFn.RELU, op.output)])  # `op` does not end the block
    op.properties["perm"] = DenseArrayBase.from_list(i64, [0, 0])
    messages = []
    for verify in (op.verify, lambda: Operation.verify(op)):
        with pytest.raises(DiagnosticException) as info:
            verify()
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "perm [0, 0] is not a permutation" in messages[0]
