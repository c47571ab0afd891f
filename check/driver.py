"""The steps every check shares (`run.run_check` takes them in order): load
the model, fix its sizes, make its feeds, compare every output."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from xdsl.dialects.builtin import ModuleOp

from forge_opt import dtypes
from forge_opt.check.compare import OutputResult, within_budget
from forge_opt.check.wide import WideRun
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.engine import RANDOM_INT_LIMIT, index_bounds, is_mask, random_inputs
from forge_opt.execution.oracle import check_feeds
from forge_opt.frontends.onnx import freeze_inputs, import_model, load_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.interpreters.run import main_func
from forge_opt.targets.forge_python import input_names


@dataclass
class Loaded:
    """A model to check, its inputs with `--freeze`'s compiled in, and the
    sizes chosen for its symbolic dims (the user's, and those the given
    inputs fix)."""

    model: onnx.ModelProto
    base: Path | None  # the folder external data is read from
    inputs: dict[str, np.ndarray] | None
    sizes: InputShapes


def load_checked(
    source,
    inputs: Sequence[np.ndarray] | dict[str, np.ndarray] | None,
    *,
    freeze: tuple[str, ...] = (),
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> Loaded:
    """`inputs` by name, or a list in the order of the graph's inputs."""
    model, base = load_model(source)
    if not model.graph.output:
        raise ForgeOptError("the model has no outputs: there is nothing to compare")
    model, inputs = frozen(model, inputs, freeze)
    if inputs is not None and not isinstance(inputs, dict):
        initializers = {t.name for t in model.graph.initializer}
        inputs = dict(zip([i.name for i in model.graph.input if i.name not in initializers], inputs))
    sizes = InputShapes.of(shapes, dims)
    if inputs is not None:
        check_feeds(model, inputs)  # before anything runs: a wrong input is the user's, never a mismatch
        sizes = sizes.with_arrays(model.graph, inputs)
    return Loaded(model, base, inputs, sizes)


@contextlib.contextmanager
def hidden_folder():
    """A temporary folder for a check's own split or plan, whose path no
    error names: the user never saw it (`tp/graph_infos.json: ...` reads
    as the check's plan, not as a path to look for)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            yield tmp
        except ForgeOptError as e:
            raise ForgeOptError(str(e).replace(tmp + os.sep, "the check's ")) from None


def frozen(model, inputs, freeze: tuple[str, ...]):
    """`--freeze`: the model with the named graph inputs compiled as
    constants (their values from `inputs`, a dict), and the other inputs."""
    if not freeze:
        return model, inputs
    if isinstance(freeze, str):
        raise ForgeOptError("freeze takes a tuple of input names, not one string")
    if not isinstance(inputs, dict):
        raise ForgeOptError("freezing inputs needs their values: pass inputs by name (--inputs x.npz)")
    missing = [n for n in freeze if n not in inputs]
    if missing:
        raise ForgeOptError(f"no value given for the frozen input '{missing[0]}'")
    check_feeds(model, {n: inputs[n] for n in freeze}, partial=True)  # a frozen value is an input like any other
    model = freeze_inputs(model, {n: inputs[n] for n in freeze})
    return model, {k: v for k, v in inputs.items() if k not in freeze}


def bounded_note(bounds: dict[str, int], names: list[str], dtypes: list) -> list[str]:
    """The report's lines saying how random inputs were shaped by what they
    feed: indices inside the tables they index, attention masks all ones."""
    notes = []
    listed = ", ".join(f"{name} < {size}" for name, size in bounds.items() if size < RANDOM_INT_LIMIT)
    if listed:
        notes.append(f"random inputs: integer inputs that index a table stay inside it ({listed})")
    masks = [name for name, dtype in zip(names, dtypes) if is_mask(name, dtype)]
    if masks:
        notes.append(f"random inputs: attention masks are all ones ({', '.join(masks)})")
    return notes


def model_feeds(model, base, inputs: dict[str, np.ndarray] | None, seed: int, shapes: InputShapes | None = None,
                module: ModuleOp | None = None):
    """The model's inputs by name: those given (each one there), or seeded
    random ones (indices inside the tables they index), typed as `module`
    (the model compiled, or else imported here) types them; and the
    report's note on how random ones were made."""
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    notes = []
    if inputs is None:
        bounds = index_bounds(model)
        module = module if module is not None else import_model(model, base, shapes=shapes)
        inputs = dict(zip(input_names(main_func(module)), random_inputs(module, seed, bounds)))
        # a program in a reduced format takes its float inputs narrower; the model's are its own type's
        declared = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
        for n, x in inputs.items():
            want = dtypes.mlir_type(declared.get(n, 0))
            if want is not None and x.dtype != dtypes.numpy_dtype(want):
                inputs[n] = x.astype(dtypes.numpy_dtype(want))
        notes = bounded_note(bounds, names, [inputs[n].dtype for n in names])
    missing = [n for n in names if n not in inputs]
    if missing:
        raise ForgeOptError(f"no value given for input '{missing[0]}'")
    return {n: np.asarray(inputs[n]) for n in names}, notes


def compare_outputs(
    expected: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    rule: Callable[[str, np.ndarray, np.ndarray], OutputResult],
    *,
    wide: WideRun | None = None,
    min_pcc: float | None = None,
) -> list[OutputResult]:
    """Each expected output the run returned, compared by `rule` (the
    options' one rule, `CheckOptions.rule`); the verdict (`report.verdict`)
    counts the ones missing. With `wide`, the model's wide run (`expected`
    being the model's outputs in order), a float output it widens that fails
    the rule is measured against it position by position
    (`compare.within_budget`)."""
    results = [rule(name, want, got[name]) for name, want in expected.items() if name in got]
    if wide is None:
        return results
    wants = list(expected.values())
    at = {name: i for i, name in enumerate(expected)}
    measured = {r.name for r in results if not r.ok and np.asarray(wants[at[r.name]]).dtype in wide.widened}
    if not measured or (exact := wide.outputs) is None:
        return results
    return [within_budget(r, wants[at[r.name]], got[r.name], exact[at[r.name]], min_pcc=min_pcc)
            if r.name in measured else r for r in results]


def model_outputs(model: onnx.ModelProto, values: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """A run's outputs by the model's output names."""
    return dict(zip([o.name for o in model.graph.output], values))


#: ops that move a dequantized value without computing anything new
_MOVES = {"Identity", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Gather", "Concat",
          "MaxPool", "Split"}


def dequantized_steps(model: onnx.ModelProto) -> dict[str, float]:
    """Each graph output that a DequantizeLinear computes (through ops that
    only move values), with the largest step of its scale."""
    producer = {out: n for n in model.graph.node for out in n.output}
    constants = {t.name: t for t in model.graph.initializer}
    constants.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                      for a in n.attribute if a.name == "value"})
    steps = {}
    for o in model.graph.output:
        node = producer.get(o.name)
        while node is not None and node.op_type in _MOVES and node.input:
            node = producer.get(node.input[0])
        if node is not None and node.op_type == "DequantizeLinear" and node.input[1] in constants:
            scale = onnx.numpy_helper.to_array(constants[node.input[1]])
            steps[o.name] = float(np.max(np.abs(scale.astype(np.float64))))
    return steps
