"""`tensor-parallel`'s expert case: a matmul on weights stacked over a
mixture's experts (`stack-experts`: `[E, in, out]`) is split by experts,
each device computing its E/P experts whole on every token (expert
parallelism). Its input is the tokens, replicated (or partial, all-reduced
first), or the previous matmul's output split by the same experts (the
down projection after gate and up); the sum over the experts that ends the
layer is then partial (`rules._reduce`), one all-reduce where it is first
needed, as Megatron's MLP costs."""

from __future__ import annotations

import math

from forge_opt.diagnostics import describe
from forge_opt.dialects import tir
from forge_opt.transforms.tp.plan_file import Pin
from forge_opt.transforms.tp.rules import REPLICATED, Sharding, TPError, shape

EXPERTS = "expert"


def expert_case(op: tir.MatmulOp, x: Sharding, devices: int, pin: Pin | None, min_size: int) -> tuple[bool, str]:
    """Whether the experts are split among the devices, and why."""
    experts, size = shape(op.rhs)[0], math.prod(shape(op.rhs))
    if pin is not None and pin.axis not in (0, None):
        raise TPError(f"the plan asks for axis {pin.axis} on {describe(op)}, a matmul on the weights of {experts} "
                      "experts: they are split by experts (axis 0) or replicated (null)")
    if pin is not None and pin.axis is None:
        return False, "pinned by the plan"
    if pin is None and size < min_size:
        return False, f"{size} weight elements, under min-size {min_size}"
    if experts % devices:
        if pin is not None:
            raise TPError(f"{describe(op)}: an expert-parallel matmul needs its experts ({experts}) to divide by the "
                          f"{devices} devices")
        return False, f"its {experts} experts do not divide by {devices} devices"
    # the input's split, if any, must be the experts' axis (as the result's batch axis)
    same_experts = x.axis is not None and x.axis + len(shape(op.output)) - len(shape(op.lhs)) == 0
    if not (x == REPLICATED or x.partial or same_experts):
        return False, f"its input is {x}"
    return True, "pinned by the plan" if pin is not None else f"each device {experts // devices} of {experts} experts"
