"""The rewrite walk keeps xDSL's use lists exact: it links new ops and
moves uses itself rather than through xDSL's own methods."""

from xdsl.dialects.builtin import ModuleOp, TensorType, f32
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.lowering import erase_dead_ops, rewrite_in_order

T = TensorType(f32, [2, 3])


def _module():
    """relu(x) used twice by one add and once by an abs."""
    block = Block(arg_types=[T])
    x = block.args[0]
    relu = tir.UnaryOp(UnaryFn.RELU, x)
    relu.results[0].name_hint = "r"
    add = tir.BinaryOp(BinaryFn.ADD, relu.results[0], relu.results[0])
    absolute = tir.UnaryOp(UnaryFn.ABS, relu.results[0])
    block.add_ops([relu, add, absolute, ReturnOp(add.results[0], absolute.results[0])])
    func = FuncOp("f", ([T], [T, T]), Region(block))
    return ModuleOp([func]), block


def _uses_match_operands(block: Block) -> None:
    """Each value's use list holds exactly the (op, index) slots that read it."""
    slots = {}
    for op in block.ops:
        for i, value in enumerate(op.operands):
            slots.setdefault(value, set()).add((id(op), i))
    values = list(block.args) + [r for op in block.ops for r in op.results]
    for value in values:
        uses = [(id(u.operation), u.index) for u in value.uses]
        assert len(uses) == len(set(uses))
        assert set(uses) == slots.get(value, set()), value
        for use in value.uses:
            assert use.operation.operands[use.index] is value


def _replace_relu(module, build):
    """Rewrite the relu into the ops `build(x)` makes; the last one's result replaces it."""

    def rewrite(op):
        if isinstance(op, tir.UnaryOp) and op.fn.data == "relu":
            new_ops = build(op.input)
            return new_ops, [new_ops[-1].results[0]]
        return None

    rewrite_in_order(module, rewrite)
    module.verify()


def test_replacing_a_value_read_twice_by_one_op_moves_every_use():
    module, block = _module()
    old = block.first_op
    _replace_relu(module, lambda x: [tir.UnaryOp(UnaryFn.SIGMOID, x)])
    _uses_match_operands(block)
    new = block.first_op
    assert isinstance(old, tir.UnaryOp) and isinstance(new, tir.UnaryOp)
    assert new.fn.data == "sigmoid" and old.parent is None and not old.results[0].uses
    assert [u.index for u in new.results[0].uses] and new.results[0].name_hint == "r"
    assert [op.name for op in block.ops] == ["tir.unary", "tir.binary", "tir.unary", "func.return"]


def test_replacing_with_several_new_ops_keeps_their_order():
    module, block = _module()

    def exp_then_log(x):
        first = tir.UnaryOp(UnaryFn.EXP, x)
        return [first, tir.UnaryOp(UnaryFn.LOG, first.results[0])]

    _replace_relu(module, exp_then_log)
    _uses_match_operands(block)
    assert [op.fn.data for op in list(block.ops)[:2] if isinstance(op, tir.UnaryOp)] == ["exp", "log"]
    assert [r.name_hint for op in list(block.ops)[:2] for r in op.results] == ["r", "r"]


def test_erased_dead_ops_leave_no_uses_behind():
    module, block = _module()
    x = block.args[0]
    dead = tir.UnaryOp(UnaryFn.EXP, x)
    deader = tir.UnaryOp(UnaryFn.LOG, dead.results[0])
    first = block.first_op
    assert first is not None
    block.insert_ops_before([dead, deader], first)
    erase_dead_ops(module)
    module.verify()
    _uses_match_operands(block)
    assert dead.parent is None and deader.parent is None
    assert all(u.operation is not dead for u in x.uses)
