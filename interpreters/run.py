"""Run a module at any stage (onnx, tir, forge) on numpy arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.interpreter import Interpreter, InterpreterFunctions

from forge_opt.diagnostics import ForgeOptError
from forge_opt.interpreters.forge import ForgeFunctions
from forge_opt.interpreters.onnx import OnnxFunctions
from forge_opt.interpreters.shard import Collectives, ShardFunctions, ThreadGroup, run_threads
from forge_opt.interpreters.tir import TirFunctions


def main_func(module: ModuleOp) -> FuncOp:
    funcs = [op for op in module.ops if isinstance(op, FuncOp)]
    if not funcs:
        raise ForgeOptError("the module has no function to run")
    return funcs[0]


def interpreter(module: ModuleOp, *more: InterpreterFunctions) -> Interpreter:
    """An interpreter of `module` that runs func and our dialects (and `more`)."""
    # here, not at the top: xdsl.interpreters imports all of xDSL's interpreters (0.2 s), which only a run needs
    from xdsl.interpreters.func import FuncFunctions

    interp = Interpreter(module)
    for functions in (FuncFunctions(), OnnxFunctions(), TirFunctions(), ForgeFunctions(), *more):
        interp.register_implementations(functions)
    return interp


def run_module(module: ModuleOp, inputs: Sequence[np.ndarray], member: Collectives | None = None) -> list[np.ndarray]:
    """Outputs of the module's first function on `inputs`; `member` is the
    device it runs as when it is a per-device (`tp-partition`) program."""
    interp = interpreter(module, ShardFunctions(member or ThreadGroup(1).member(0)))
    func = main_func(module)
    try:
        results = interp.call_op(func.sym_name.data, tuple(inputs))
    except Exception as e:  # an op without an implementation
        if "No implementation" in str(e) or "not implemented" in str(e).lower():
            raise ForgeOptError(f"cannot run the module: {e}") from None
        raise
    return [np.asarray(r) for r in results]


def run_devices(module: ModuleOp, inputs: Sequence[np.ndarray], devices: int) -> list[list[np.ndarray]]:
    """Each simulated device's outputs of a per-device program (one thread
    per device, collectives between them)."""
    return run_threads(devices, lambda member: run_module(module, inputs, member))
