"""Where each ONNX node runs: on the device when the lowering turns it into
Forge calls that pass Forge's rules, on the CPU otherwise.

There is no second list of supported ops: a copy of the module goes
through the whole lowering, with every op that cannot be lowered left in
place and its reason kept. A node is on the device when every op made from
it (they carry its location) ended as a `forge` op. A node whose value is
known at compile time folds into a constant and needs no placement.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

from xdsl.dialects.builtin import ModuleOp, TensorType, UnrankedTensorType
from xdsl.ir import Attribute

from forge_opt.diagnostics import ForgeOptError, node_name
from forge_opt.dialects import onnx_ops
from forge_opt.dialects.onnx import INITIALIZER_ATTR, CustomOp, OnnxOp
from forge_opt.transforms.fold_constants import fold_constant_op
from forge_opt.transforms.lower_split import split_to_strided_slices
from forge_opt.transforms.lowering import erase_dead_ops, leaving_failures, rewrite_in_order, table_rewrite
from forge_opt.transforms.onnx_lowerings.table import ONNX_LOWERINGS
from forge_opt.transforms.tir_builder import TirEmitter
from forge_opt.transforms.tir_to_forge import tir_to_forge_rewrite

_LOWERED = ("forge.", "func.", "builtin.")


class Where(Enum):
    DEVICE = "tt"
    CPU = "cpu"
    FOLDED = "folded"  # a compile-time constant: runs nowhere


@dataclass
class Placement:
    op_type: str
    where: Where
    reason: str = ""  # why the CPU: the lowering's error, or the user's pin


def place(
    module: ModuleOp, cpu_ops: Collection[str] = (), cpu_nodes: Collection[str] = (), check_pins: bool = True
) -> dict[str, Placement]:
    """The placement of each node of an imported model, by node name (as
    diagnostics name it). `cpu_ops` (op types) and `cpu_nodes` (names) pin
    nodes to the CPU; with `check_pins`, a pin naming nothing in the model
    is an error. `module` itself is left as it is."""
    placements: dict[str, Placement] = {}
    for op in module.walk():
        name = node_name(op)
        if isinstance(op, OnnxOp) and name and INITIALIZER_ATTR not in op.attributes:
            placements[name] = Placement(op.ONNX_OP_TYPE, Where.DEVICE)
        elif isinstance(op, CustomOp) and name:  # another domain's op: onnxruntime's to run
            placements[name] = Placement(op.op_type.data, Where.CPU, f"ops of domain '{op.domain.data}' run on the CPU")
    trial = module.clone()
    failures: dict = {}
    rewrite_in_order(trial, fold_constant_op)
    folded = {node_name(op) for op in trial.walk() if isinstance(op, onnx_ops.ConstantOp)}
    rewrite_in_order(trial, leaving_failures(table_rewrite(ONNX_LOWERINGS, TirEmitter), failures))
    erase_dead_ops(trial)
    rewrite_in_order(trial, split_to_strided_slices)
    rewrite_in_order(trial, leaving_failures(tir_to_forge_rewrite(), failures))
    erase_dead_ops(trial)
    reasons = {node_name(op): reason for op, reason in failures.items()}
    for op in trial.walk():
        name = node_name(op)
        placement = placements.get(name) if name else None
        if placement is None or placement.where is Where.CPU or op.name.startswith(_LOWERED):
            continue
        placement.where = Where.CPU
        placement.reason = reasons.get(name) or f"{op.name} has no lowering to Forge"
    _run_time_sized_on_the_cpu(module, placements)
    if check_pins:
        _check_pins(placements, cpu_ops, cpu_nodes)
    for name, placement in placements.items():
        if placement.where is Where.DEVICE and name in folded:
            placement.where = Where.FOLDED
        if placement.op_type in cpu_ops or name in cpu_nodes:
            placement.where, placement.reason = Where.CPU, "pinned to the CPU"
    return placements


def _run_time_sized_on_the_cpu(module: ModuleOp, placements: dict[str, Placement]) -> None:
    """A node that reads or makes a value whose sizes are known only at run
    time goes to the CPU, whatever its lowering made of it: a device
    sub-model is compiled for fixed sizes (`convert` refuses any other),
    and an op that lowers to nothing (an Identity, a no-op Cast) would
    otherwise carry such a value onto the device."""
    for op in module.walk():
        name = node_name(op)
        placement = placements.get(name) if name else None
        if placement is None or placement.where is not Where.DEVICE or not isinstance(op, OnnxOp):
            continue
        sized = next((v for v in (*op.operands, *op.results) if _run_time_sized(v.type)), None)
        if sized is not None:
            placement.where = Where.CPU
            placement.reason = (f"its {'input' if sized in op.operands else 'result'} {sized.type} has sizes known "
                                "only at run time, and a device sub-model is compiled for fixed sizes")


def _run_time_sized(t: Attribute) -> bool:
    return isinstance(t, UnrankedTensorType) or (isinstance(t, TensorType) and any(d < 0 for d in t.get_shape()))


def _check_pins(placements: dict[str, Placement], cpu_ops: Collection[str], cpu_nodes: Collection[str]) -> None:
    """A pin that names nothing in the model is a typo, not a no-op: an
    error naming it and the closest names there are."""
    import difflib

    for pins, known, what in (
        (cpu_ops, {p.op_type for p in placements.values()}, "--cpu-ops: no node has the op type"),
        (cpu_nodes, set(placements), "--cpu-nodes: the model has no node named"),
    ):
        for pin in pins:
            if pin not in known:
                close = difflib.get_close_matches(pin, sorted(known), n=3)
                hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
                raise ForgeOptError(f"{what} '{pin}'{hint}")
