"""The one compile → emit → run flow: a check on one device, `--bisect`,
the conformance run, the decode loop and forge-split's `run --recompile`.

`compile_model` raises `ForgeOptError` for what does not compile;
`run_compiled` raises `ForgeCallError` for a call the stand-in (Forge's
rules) rejects. Callers decide what each means for them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp, TensorType

from forge_opt import dtypes
from forge_opt.data_formats import device_values
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import import_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.frontends.onnx.values import as_loaded, release_mapped_pages
from forge_opt.interpreters.forge_standin import run_forge_module
from forge_opt.interpreters.run import main_func
from forge_opt.targets.forge_python import ForgePythonModule, emit_module, input_names
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.pipelines import run_pipeline


@dataclass
class Compiled:
    """A model compiled to Forge: the `forge` module, the emitted Python
    (with its computed constants) and the graph inputs it takes, in order."""

    model: ModelProto
    module: ModuleOp
    emitted: ForgePythonModule
    input_names: list[str]
    base: Path | None = None  # the folder of the model's external data


def compile_model(
    model: ModelProto, base: Path | None = None, pipeline: str | CompileOptions = "onnx-to-forge",
    shapes: InputShapes | None = None, stem: str = "",
) -> Compiled:
    """`pipeline`: a pass pipeline, or onnx-to-forge's compile options;
    `shapes`: sizes for symbolic input dims (`--dim`/`--shape`); `stem`:
    the name of the module's file without `.py`, which names its constants."""
    module = import_model(model, base, shapes=shapes)
    run_pipeline(module, pipeline)
    # the program's inputs: a pipeline may add one (a static cache's `cache_position`)
    return Compiled(model, module, emit_module(module, stem=stem), input_names(main_func(module)), base)


def run_compiled(compiled: Compiled, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The emitted module's outputs on the Forge stand-in, its parameters
    loaded from the model."""
    model = as_loaded(compiled.model, compiled.base)  # as the user's `onnx.load` gives it to Forge
    try:
        return run_forge_module(compiled.emitted.source, program_inputs(compiled.module, inputs), model,
                                compiled.emitted)
    finally:
        release_mapped_pages()


def run_compiled_on_xla(compiled: Compiled, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The program's outputs on XLA CPU: its StableHLO form (`-t stablehlo`)
    compiled and run by jaxlib, an executor independent of the stand-in."""
    return on_xla(compiled)(inputs)


def on_xla(compiled: Compiled) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """The program compiled once for XLA CPU, to run on many inputs."""
    from forge_opt.execution.xla import xla_program
    from forge_opt.targets.stablehlo import stablehlo_text

    program = xla_program(stablehlo_text(compiled.module))
    return lambda inputs: program(program_inputs(compiled.module, inputs))


#: what `--executor` takes: the Forge stand-in (numpy goldens), or XLA CPU from the StableHLO program
EXECUTORS = ("standin", "xla")


def program_inputs(module: ModuleOp, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs, in the main function's order, each as its argument takes
    it (`as_program_input`)."""
    args = main_func(module).body.block.args
    return [as_program_input(x, dtypes.numpy_dtype(dtypes.tensor(a.type).element_type)) for x, a in zip(inputs, args)]


def as_program_input(value: np.ndarray, dtype) -> np.ndarray:
    """A float32 or float16 input as a program compiled for bfloat16
    (`dtype`) takes it: cast, as the user casts a model's inputs; any other
    as it is."""
    if value.dtype in (np.float32, np.float16) and np.dtype(dtype) == np.dtype("bfloat16"):
        return device_values(value, "bfloat16")
    if value.dtype in (np.float32, np.float16) and dtypes.is_narrow_float(dtype):
        return value.astype(dtype)
    return value


#: random integer inputs are below this (valid as small indices and sizes)
RANDOM_INT_LIMIT = 10


def random_inputs(module: ModuleOp, seed: int = 0, bounds: Mapping[str, int] | None = None) -> list[np.ndarray]:
    """Seeded random inputs for the module's function arguments; an integer
    input named in `bounds` (`index_bounds`) stays below its bound."""
    rng = np.random.default_rng(seed)
    arrays = []
    func = main_func(module)
    for name, arg in zip(input_names(func), func.body.block.args):
        t = arg.type
        if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
            raise ForgeOptError(f"input '{name}' of type {t} has unknown sizes: choose them with --dim SYMBOL=N or "
                                f"--shape {name}=D0,D1,..., or pass --inputs")
        dtype = dtypes.numpy_dtype(t.element_type)
        if is_mask(name, dtype):
            arrays.append(np.ones(t.get_shape(), dtype))
        else:
            arrays.append(random_array(t.get_shape(), dtype, rng, (bounds or {}).get(name)))
    return arrays


def is_mask(name: str, dtype) -> bool:
    """An integer or bool input named as an attention mask (`attention_mask`,
    `encoder_attention_mask`): random ones would mask at random, or (an
    additive mask of 0..9) overflow; a random input for it is all ones."""
    return "mask" in name.lower() and (np.dtype(dtype) == np.bool_ or np.issubdtype(dtype, np.integer))


def random_array(shape, dtype: np.dtype, rng: np.random.Generator, bound: int | None = None) -> np.ndarray:
    """Bools, small non-negative integers (valid as indices and sizes; below
    `bound` where given), or normal floats."""
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, min(RANDOM_INT_LIMIT, bound) if bound else RANDOM_INT_LIMIT, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


#: ops that pass indices through unchanged on their way to a Gather
_INDEX_CARRIERS = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"}


def index_bounds(model: ModelProto) -> dict[str, int]:
    """Per integer graph input that indexes a weight table (a Gather on an
    initializer, such as an embedding, directly or through a Cast or a
    reshape), the table's size along the gathered axis; the smallest where
    it indexes several. Random inputs stay below it, so `token_type_ids`
    of a 2-row table get 0 and 1, never an index onnxruntime refuses."""
    g = model.graph
    tables = {t.name: list(t.dims) for t in g.initializer}
    inputs = {i.name for i in g.input} - set(tables)
    producer = {out: n for n in g.node for out in n.output}
    bounds: dict[str, int] = {}
    for node in g.node:
        if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or node.input[0] not in tables:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        dims = tables[node.input[0]]
        if not dims:
            continue
        source = node.input[1]
        while source in producer and producer[source].op_type in _INDEX_CARRIERS:
            source = producer[source].input[0]
        if source in inputs:
            size = dims[axis % len(dims)]
            bounds[source] = min(size, bounds.get(source, size))
    return bounds
