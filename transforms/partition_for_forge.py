"""`partition-for-forge`: the split, in the IR. Each sub-model of the main
function becomes `func.func private @graph_<n>` with `forge.device` "tt" or "cpu",
and the main function calls them in order, so the split prints, parses and
runs on the interpreters as a whole (tt-mlir's shape for CPU-hoisted ops).

Placement and grouping are AutoSplit's (`transforms/placement.py`,
`transforms/partition.py`). Constants and ops that fold belong to no sub-model:
each sub-model that reads one gets its own copy.

With `stages=S`, a pipeline: the ops, every one on the device, are cut into
S contiguous stages where forge-split cuts them (`transforms/stage_cuts.py`:
where a layer starts, balancing the weights each stage stores); stage k is
`@graph_<k>` with `forge.stage = k`. Each activation a later stage reads
crosses the `shard.grid @pipeline` of S devices as MLIR's point-to-point
pair: `shard.send` after the stage that makes it (`destination = [j]`),
whose result `shard.recv` takes before stage j (`source = [k]`); one pair
per reading stage, as `graph_infos.json` lists its `sends`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import BytesAttr, DenseArrayBase, IntegerAttr, ModuleOp, StringAttr, SymbolRefAttr, i64
from xdsl.dialects.func import CallOp, FuncOp, ReturnOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError, node_name
from forge_opt.dialects import onnx_ops, shard
from forge_opt.dtypes import tensor_nbytes
from forge_opt.transforms.partition import partition, read_through
from forge_opt.transforms.placement import Where, place
from forge_opt.transforms.stage_cuts import choose_cuts, crossing_bytes

DEVICE_ATTR = "forge.device"
STAGE_ATTR = "forge.stage"
PIPELINE_GRID = "pipeline"


@dataclass(frozen=True)
class PartitionForForgePass(ModulePass):
    """Outline the main function's device and CPU sub-models as functions it calls in order."""

    name = "partition-for-forge"

    cpu_ops: tuple[str, ...] = ()  # op types kept on the CPU
    cpu_nodes: tuple[str, ...] = ()  # node names kept on the CPU
    min_device_ops: int = 1
    stages: int = 1  # above 1: a pipeline of that many device functions

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        funcs = [f for f in op.ops if isinstance(f, FuncOp)]
        if len(funcs) != 1:
            raise ForgeOptError(f"partition-for-forge needs a module of one function, not {len(funcs)}")
        if self.stages < 1:
            raise ForgeOptError(f"partition-for-forge{{stages={self.stages}}}: a pipeline has 1 stage or more")
        placements = place(op, self.cpu_ops, self.cpu_nodes)
        if self.stages > 1:
            outline_stages(op, funcs[0], placements, self.stages)
        else:
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


def _body(main: FuncOp, placements) -> tuple[list[Operation], set[Operation], list[Operation]]:
    """The main function's ops in order, those free, and the others (placed)."""
    body = [o for o in main.body.block.ops if not isinstance(o, ReturnOp)]
    free = {o for o in body if _free(o, placements)}
    return body, free, [o for o in body if o not in free]


def outline(module: ModuleOp, main: FuncOp, placements, min_device_ops: int = 1) -> list[FuncOp]:
    body, free, placed = _body(main, placements)

    preds = {o: list(read_through([o], _producers, free)[0]) for o in placed}
    device = {o: _on_device(o, placements) for o in placed}
    groups = partition(placed, preds, device, min_device_ops)
    position = {o: i for i, o in enumerate(body)}
    functions = []
    for n, group in enumerate(groups):
        functions.append(_outline_group(module, main, f"graph_{n}", group.device, group.nodes, free, position)[0])
    return functions


def _outline_group(module, main, name, on_device, ops, free, position) -> tuple[FuncOp, CallOp]:
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
    return func, call


def outline_stages(module: ModuleOp, main: FuncOp, placements, stages: int) -> None:
    """Cut the main function's ops into `stages` functions it calls in
    order, with a send and a receive for each activation a later stage reads."""
    body, free, placed = _body(main, placements)
    asked = f"partition-for-forge{{stages={stages}}}"
    off = next((o for o in placed if not _on_device(o, placements)), None)
    if off is not None:
        name = node_name(off) or off.name
        raise ForgeOptError(f"{asked}: every stage runs on a device, but node {name} ({off.name}) cannot: "
                            f"{placements[name].reason}")
    cut = choose_cuts([node_name(o) or "" for o in placed], _weights(placed, free), _crossing(placed), stages, asked)
    bounds = [0, *cut.positions, len(placed)]
    position = {o: i for i, o in enumerate(body)}
    calls = []
    for k in range(stages):
        func, call = _outline_group(module, main, f"graph_{k}", True, placed[bounds[k]:bounds[k + 1]], free, position)
        func.attributes[STAGE_ATTR] = IntegerAttr(k, i64)
        calls.append(call)
    top = module.body.block
    top.insert_op_before(shard.grid(PIPELINE_GRID, [stages]), top.first_op)  # type: ignore[arg-type]
    _send_between(calls)


def _weights(placed: Sequence[Operation], free: set[Operation]) -> list[int]:
    """The constant bytes each op stores: those it is the first to read
    (through what folds)."""
    seen: set[Operation] = set()
    out = []
    for o in placed:
        found = read_through([o], _producers, free)[1] - seen
        seen |= found
        out.append(sum(tensor_nbytes(r.type) for c in found if not c.operands for r in c.results))
    return out


def _crossing(placed: Sequence[Operation]) -> list[int]:
    """For each cut position c, the bytes of values placed[:c] make and placed[c:] read."""
    at = {o: c for c, o in enumerate(placed)}
    return crossing_bytes(len(placed), (
        (c, max((at[u.operation] for u in r.uses if u.operation in at), default=c), tensor_nbytes(r.type))
        for c, o in enumerate(placed) for r in o.results))


def _send_between(calls: list[CallOp]) -> None:
    """For each result of stage k that stage j > k reads: a send to j after
    stage k's call, a receive from k before stage j's."""
    stage: dict[Operation, int] = {call: k for k, call in enumerate(calls)}
    for k, call in enumerate(calls):
        after = call
        for r in call.results:
            readers = sorted({stage[u.operation] for u in r.uses if stage.get(u.operation, k) > k})
            for j in readers:
                sent = _point_to_point(shard.SendOp, "destination", r, j)
                call.parent_block().insert_op_after(sent, after)  # type: ignore[union-attr]
                after = sent
                got = _point_to_point(shard.RecvOp, "source", sent.results[0], k)
                calls[j].parent_block().insert_op_before(got, calls[j])  # type: ignore[union-attr]
                for use in [u for u in r.uses if u.operation is calls[j]]:
                    calls[j].operands[use.index] = got.results[0]


def _point_to_point(kind: type[shard.SendOp | shard.RecvOp], key: str, value: SSAValue, peer: int
                    ) -> shard.SendOp | shard.RecvOp:
    """MLIR's `shard.send` (`destination`) or `shard.recv` (`source`) of
    `value` on the pipeline's grid, to or from stage `peer`."""
    op = kind.build(operands=[value, []], result_types=[value.type], properties={
        "grid": SymbolRefAttr(PIPELINE_GRID), "grid_axes": shard.axes_attr([0]),
        key: DenseArrayBase(i64, BytesAttr(i64.pack([peer])))})
    op.results[0].name_hint = value.name_hint
    return op
