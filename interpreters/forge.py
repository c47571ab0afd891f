"""numpy implementations of the `forge` ops (through `forge_kernels`)."""

from __future__ import annotations

from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt.dialects import forge
from forge_opt.interpreters import forge_kernels as k


@register_impls
class ForgeFunctions(InterpreterFunctions):
    @impl(forge.IndexOp)
    def run_index(self, interp: Interpreter, op: forge.IndexOp, args: tuple):
        kw = op.forge_keywords()
        return (k.index(args[0], kw["dim"], kw["start"], kw["stop"], kw["stride"]),)
