"""`forge-check --bisect`: find the first ONNX node whose output the compiled
module gets wrong.

onnxruntime runs the model with every intermediate value exposed; the
compiled `forge` module runs on the interpreters with every result recorded.
Values are matched by ONNX value name (lowerings keep the names of the
values they replace) and compared in the model's topological order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import ModelProto, helper
from xdsl.interpreter import Interpreter
from xdsl.interpreters.func import FuncFunctions

from forge_opt.check.compare import compare_output
from forge_opt.frontends.onnx.names import ambiguous, ssa_name
from forge_opt.interpreters.forge import ForgeFunctions
from forge_opt.interpreters.onnx import OnnxFunctions
from forge_opt.interpreters.run import main_func
from forge_opt.interpreters.tir import TirFunctions


@dataclass
class Divergence:
    node: str
    op_type: str
    output: str
    shape: tuple[int, ...]
    expected_shape: tuple[int, ...]
    max_abs_error: float
    pcc: float

    def format(self) -> str:
        shape = list(self.shape)
        if self.shape != self.expected_shape:
            return (
                f"first divergence: node '{self.node}' ({self.op_type}), output '{self.output}': "
                f"shape {shape}, onnxruntime has {list(self.expected_shape)}"
            )
        return (
            f"first divergence: node '{self.node}' ({self.op_type}), output '{self.output}' {shape}: "
            f"max abs error {self.max_abs_error:.3e}, pcc {self.pcc:.6f}"
        )


def onnxruntime_all_values(model: ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of the model, computed by onnxruntime."""
    import onnxruntime as ort

    exposed = ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        for out in node.output:
            if out and out not in present:
                exposed.graph.output.append(helper.make_empty_tensor_value_info(out))
                present.add(out)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exposed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return {name: np.asarray(value) for name, value in zip(names, session.run(None, feeds))}


def compiled_all_values(module, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every named result of a module's function, computed by the interpreters."""
    values: dict[str, np.ndarray] = {}

    class Record(Interpreter.Listener):
        def did_interpret_op(self, op, results):
            for r, v in zip(op.results, results):
                if r.name_hint:
                    values[r.name_hint] = np.asarray(v)

    interp = Interpreter(module)
    for functions in (FuncFunctions(), OnnxFunctions(), TirFunctions(), ForgeFunctions()):
        interp.register_implementations(functions)
    interp.listeners = (*interp.listeners, Record())
    func = main_func(module)
    for arg, x in zip(func.body.block.args, inputs):
        if arg.name_hint:
            values[arg.name_hint] = np.asarray(x)
    interp.call_op(func.sym_name.data, tuple(inputs))
    return values


def first_divergence(
    model: ModelProto, module, feeds: dict[str, np.ndarray], *, rtol: float, atol: float
) -> Divergence | None:
    expected = onnxruntime_all_values(model, feeds)
    names = [i.name for i in model.graph.input if i.name in feeds]
    actual = compiled_all_values(module, [feeds[n] for n in names])
    g = model.graph
    # values whose SSA name another ONNX value shares cannot be told apart: compare neither
    shared = ambiguous([*(i.name for i in g.input), *(t.name for t in g.initializer),
                        *(out for node in g.node for out in node.output if out)])
    for node in g.node:
        for out in node.output:
            hint = ssa_name(out) if out else None
            if hint is None or hint in shared or out not in expected or hint not in actual:
                continue
            label = node.name or f"{node.op_type}:{out}"
            want = np.asarray(expected[out])
            result = compare_output(out, want, actual[hint], rtol=rtol, atol=atol, formats=False)
            if not result.ok:
                return Divergence(label, node.op_type, out, result.shape, want.shape, result.max_abs_error, result.pcc)
    return None


__all__ = ["Divergence", "first_divergence"]
