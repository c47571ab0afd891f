"""`tensor-parallel`'s expert case: a matmul on weights stacked over a
mixture's experts (`stack-experts`: `[E, in, out]`) is split by experts,
each device computing its E/P experts whole on every token (expert
parallelism). Its input is the tokens, replicated (or partial, all-reduced
first), or the previous matmul's output split by the same experts (the
down projection after gate and up); the sum over the experts that ends the
layer is then partial (`rules._reduce`), one all-reduce where it is first
needed, as Megatron's MLP costs. Experts that P does not divide (4 on 8
devices) are each split as Megatron splits an MLP, batched: gate and up by
columns, down by rows, the sum over the experts a sum of partial sums."""

from __future__ import annotations

import math

from forge_opt.diagnostics import describe
from forge_opt.dialects import tir
from forge_opt.plan.graph_infos import COLUMN, EXPERTS, REPLICATE, ROW
from forge_opt.transforms.tp.plan_file import Pin
from forge_opt.transforms.tp.rules import REPLICATED, Sharding, TPError, shape, split


def expert_case(op: tir.MatmulOp, x: Sharding, devices: int, pin: Pin | None,
                min_size: int) -> tuple[str, str, int | None]:
    """The case, its reason and the weights' axis split (None: replicated).
    Experts that the devices do not divide are each split as Megatron
    splits an MLP: column-parallel on the tokens, row-parallel after."""
    experts, size = shape(op.rhs)[0], math.prod(shape(op.rhs))
    if pin is not None and pin.axis not in (0, None):
        raise TPError(f"the plan asks for axis {pin.axis} on {describe(op)}, a matmul on the weights of {experts} "
                      "experts: they are split by experts (axis 0) or replicated (null)")
    if pin is not None and pin.axis is None:
        return REPLICATE, "pinned by the plan", None
    if pin is None and size < min_size:
        return REPLICATE, f"{size} weight elements, under min-size {min_size}", None
    # the input's split, if any, must be the experts' axis (as the result's batch axis)
    same_experts = x.axis is not None and x.axis + len(shape(op.output)) - len(shape(op.lhs)) == 0
    if not experts % devices and (x == REPLICATED or x.partial or same_experts):
        why = "pinned by the plan" if pin is not None else f"each device {experts // devices} of {experts} experts"
        return EXPERTS, why, 0
    if pin is not None:  # the user asked for this case: say why it cannot be
        raise TPError(f"{describe(op)}: an expert-parallel matmul needs " + (
            f"its experts ({experts}) to divide by the {devices} devices" if experts % devices else
            f"its input whole or split by its experts, not {x}"))
    inputs, outputs = shape(op.rhs)[1:]
    last = len(shape(op.lhs)) - 1
    if (x == REPLICATED or x.partial) and not outputs % devices:
        return COLUMN, f"its {experts} experts do not divide by {devices} devices: each expert's columns", 2
    if x == split(last) and not inputs % devices:
        return ROW, f"its {experts} experts do not divide by {devices} devices: each expert's rows", 1
    return REPLICATE, f"its {experts} experts do not divide by {devices} devices, nor their widths", None
