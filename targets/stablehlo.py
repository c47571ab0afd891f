"""`-t stablehlo`: the Forge program as a StableHLO module, the interchange
XLA, IREE and tt-xla/tt-mlir read. The module is what `forge-to-stablehlo`
makes of it (a public `@main`, weights as constants), printed with `func`
in its own syntax and the StableHLO ops in MLIR's generic syntax, which
jaxlib's and tt-mlir's parsers read. A module already of StableHLO ops
prints as it is."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.printer import Printer
from xdsl.utils.target import Target

from forge_opt.dialects import forge


def stablehlo_module(module: ModuleOp) -> ModuleOp:
    """`module` in StableHLO: a copy lowered by `forge-to-stablehlo`, or the
    module itself if it is StableHLO already (a program that computes
    nothing, an Identity, has neither: it is lowered, to a `@main`)."""
    from forge_opt.transforms.forge_to_stablehlo import ForgeToStableHLO

    if not any(isinstance(op, forge.ForgeOp | forge.ParameterOp | forge.ConstantOp) for op in module.walk()) and \
            any(op.name.startswith(("stablehlo.", "sdy.")) for op in module.walk()):
        return module
    lowered = module.clone()
    ForgeToStableHLO().apply(Context(), lowered)
    lowered.verify()
    return lowered


def stablehlo_text(module: ModuleOp) -> str:
    """The StableHLO text of a module of `forge` ops."""
    out = io.StringIO()
    Printer(stream=out).print_op(stablehlo_module(module))
    out.write("\n")
    return out.getvalue()


@dataclass(frozen=True)
class StableHLOTarget(Target):
    name = "stablehlo"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(stablehlo_text(module))
