"""`partition-for-forge`: the split, in the IR. Each sub-model of the main
function becomes `func.func private @graph_<n>` with `forge.device` "tt" or "cpu",
and the main function calls them in order, so the split prints, parses and
runs on the interpreters as a whole (tt-mlir's shape for CPU-hoisted ops).

Placement and grouping are AutoSplit's (`transforms/placement.py`,
`transforms/partition.py`). Constants and ops that fold belong to no sub-model:
each sub-model that reads one gets its own copy.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError, node_name
from forge_opt.dialects import onnx_ops
from forge_opt.transforms.partition import partition, read_through
from forge_opt.transforms.placement import Where, place

DEVICE_ATTR = "forge.device"


@dataclass(frozen=True)
class PartitionForForgePass(ModulePass):
    """Outline the main function's device and CPU sub-models as functions it calls in order."""

    name = "partition-for-forge"

    cpu_ops: tuple[str, ...] = ()  # op types kept on the CPU
    cpu_nodes: tuple[str, ...] = ()  # node names kept on the CPU
    min_device_ops: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        funcs = [f for f in op.ops if isinstance(f, FuncOp)]
        if len(funcs) != 1:
            raise ForgeOptError(f"partition-for-forge needs a module of one function, not {len(funcs)}")
        placements = place(op, self.cpu_ops, self.cpu_nodes)
        outline(op, funcs[0], placements, self.min_device_ops)


def _free(op: Operation, placements) -> bool:
    """Constants and ops that fold: copied into each sub-model that reads them."""
    if isinstance(op, onnx_ops.ConstantOp):
        return True
    placement = placements.get(node_name(op) or "")
    return placement is not None and placement.where is Where.FOLDED


def _producers(op: Operation) -> list[Operation]:
    return [v.owner for v in op.operands if isinstance(v.owner, Operation)]


def _on_device(op: Operation, placements) -> bool:
    """On the device unless its node is placed elsewhere (an op of no node stays on the device)."""
    placement = placements.get(node_name(op) or "")
    return placement is None or placement.where is Where.DEVICE


def outline(module: ModuleOp, main: FuncOp, placements, min_device_ops: int = 1) -> list[FuncOp]:
    block = main.body.block
    body = [o for o in block.ops if not isinstance(o, ReturnOp)]
    free = {o for o in body if _free(o, placements)}
    placed = [o for o in body if o not in free]

    preds = {o: list(read_through([o], _producers, free)[0]) for o in placed}
    device = {o: _on_device(o, placements) for o in placed}
    groups = partition(placed, preds, device, min_device_ops)
    position = {o: i for i, o in enumerate(body)}
    functions = []
    for n, group in enumerate(groups):
        functions.append(_outline_group(module, main, f"graph_{n}", group.device, group.nodes, free, position))
    return functions


def _outline_group(module, main, name, on_device, ops, free, position) -> FuncOp:
    members = set(ops) | read_through(ops, _producers, free)[1]
    ordered = sorted(members, key=position.__getitem__)
    inputs = list(dict.fromkeys(v for o in ordered for v in o.operands if v.owner not in members))
    outputs = [r for o in ops for r in o.results if any(u.operation not in members for u in r.uses)]
    body = Block(arg_types=[v.type for v in inputs])
    mapping: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args))
    for arg, v in zip(body.args, inputs):
        if v.name_hint:
            arg.name_hint = v.name_hint
    for o in ordered:
        copy = o.clone(value_mapper=mapping)
        body.add_op(copy)
    body.add_op(ReturnOp(*[mapping[r] for r in outputs]))
    func = FuncOp(name, ([v.type for v in inputs], [r.type for r in outputs]), Region(body), visibility="private")
    func.attributes[DEVICE_ATTR] = StringAttr("tt" if on_device else "cpu")
    module.body.block.add_op(func)
    # Calls go at the end, in group order: each one's inputs come from the
    # function's arguments or an earlier call.
    call = CallOp(name, list(inputs), [r.type for r in outputs])
    main.body.block.insert_op_before(call, main.body.block.last_op)
    for old, new in zip(outputs, call.results):
        old.replace_all_uses_with(new)
    block = main.body.block
    for o in sorted(members, key=position.__getitem__, reverse=True):
        if o.parent is block and not any(r.uses for r in o.results):
            block.erase_op(o)
    return func
