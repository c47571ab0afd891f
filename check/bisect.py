"""`forge-check --bisect`: find the first ONNX node whose output the compiled
module gets wrong; `--layers`: how far each node's output is from
onnxruntime's, in order, so a user sees where a reduced format loses
accuracy.

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

from forge_opt import dtypes
from forge_opt.check.compare import NON_FINITE_ELSEWHERE, OutputResult, compare_output, compare_reduced
from forge_opt.execution.engine import program_inputs
from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.frontends.onnx.names import ambiguous, ssa_name
from forge_opt.interpreters.run import interpreter, main_func


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
    """Every node output of the model, computed as the oracle computes its
    outputs (`onnxruntime_outputs`)."""
    exposed = ModelProto()
    exposed.CopyFrom(model)
    present = {o.name for o in exposed.graph.output}
    for node in exposed.graph.node:
        for out in node.output:
            if out and out not in present:
                exposed.graph.output.append(helper.make_empty_tensor_value_info(out))
                present.add(out)
    return dict(zip((o.name for o in exposed.graph.output), onnxruntime_outputs(exposed, None, feeds)))


def compiled_all_values(module, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Every named result of a module's function, computed by the interpreters."""
    values: dict[str, np.ndarray] = {}

    class Record(Interpreter.Listener):
        def did_interpret_op(self, op, results):
            for r, v in zip(op.results, results):
                if r.name_hint:
                    values[r.name_hint] = np.asarray(v)

    interp = interpreter(module)
    interp.listeners = (*interp.listeners, Record())
    func = main_func(module)
    inputs = program_inputs(module, [np.asarray(x) for x in inputs])  # as the program takes them (bfloat16)
    for arg, x in zip(func.body.block.args, inputs):
        if arg.name_hint:
            values[arg.name_hint] = np.asarray(x)
    interp.call_op(func.sym_name.data, tuple(inputs))
    return values


def _node_outputs(model: ModelProto, module, feeds: dict[str, np.ndarray]):
    """Each ONNX node output both runs computed, in the model's order: the
    node's label, its op type, onnxruntime's value and ours."""
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
            yield node.name or f"{node.op_type}:{out}", node.op_type, out, np.asarray(expected[out]), actual[hint]


def first_divergence(
    model: ModelProto, module, feeds: dict[str, np.ndarray], *, rtol: float, atol: float,
    reduced_pcc: float | None = None,
) -> Divergence | None:
    """The first node output off by more than the tolerances; with
    `reduced_pcc` (a program in a reduced format), the first whose PCC is
    below it."""
    for label, op_type, out, want, got in _node_outputs(model, module, feeds):
        result = compare_output(out, want, got, rtol=rtol, atol=atol, formats=False) if reduced_pcc is None else \
            compare_reduced(out, want, got, min_pcc=reduced_pcc, atol=atol)
        if not result.ok:
            return Divergence(label, op_type, out, result.shape, want.shape, result.max_abs_error, result.pcc)
    return None


@dataclass
class LayerError:
    node: str
    op_type: str
    result: OutputResult  # its PCC, relative L2 error and largest difference


def layer_errors(model: ModelProto, module, feeds: dict[str, np.ndarray]) -> list[LayerError]:
    """`--layers`: every float node output's distance from onnxruntime's
    (float32, unoptimized), in the model's order."""
    return [LayerError(label, op_type, compare_reduced(out, want, got))
            for label, op_type, out, want, got in _node_outputs(model, module, feeds)
            if dtypes.is_float(want.dtype) and op_type != "Constant"]


def format_layers(layers: list[LayerError]) -> list[str]:
    width = max([len("node"), *(len(layer.node) for layer in layers)])
    lines = [f"layers: {len(layers)} float node outputs against onnxruntime's, in order",
             f"{'node':<{width}} {'op':<18} {'shape':<18} {'pcc':>10} {'rel L2 err':>11} {'max abs err':>12}"]
    for layer in layers:
        r = layer.result
        p = "-" if r.pcc != r.pcc else f"{r.pcc:.6f}"
        rel = "-" if r.relative_l2 != r.relative_l2 else f"{r.relative_l2:.3e}"
        lines.append(f"{layer.node:<{width}} {layer.op_type:<18} {list(r.shape)!s:<18} {p:>10} {rel:>11} "
                     f"{r.max_abs_error:>12.3e}")
    # where a value beyond the format's range (bfloat16's, say) first becomes an infinity or NaN
    first = next((layer for layer in layers if layer.result.reason == NON_FINITE_ELSEWHERE), None)
    if first is not None:
        lines.append(f"first non-finite: node '{first.node}' ({first.op_type}) gives infinities or NaN where "
                     "onnxruntime's values are finite (out of the format's range?)")
    return lines


__all__ = ["Divergence", "LayerError", "first_divergence", "format_layers", "layer_errors"]
