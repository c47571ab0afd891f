"""`forge-check` on one device: the model compiled with onnx-to-forge, the
emitted Forge Python run on the stand-in (`OneDevice`, a strategy of
`run.run_check`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check.bisect import first_divergence, layer_errors
from forge_opt.check.compare import ATOL, RTOL
from forge_opt.check.driver import Loaded
from forge_opt.check.options import CheckOptions, Tolerances, parse_executor
from forge_opt.check.report import CheckReport
from forge_opt.check.run import Program, Ran, check_with
from forge_opt.execution.engine import Compiled, compile_model, run_compiled, run_compiled_on_xla
from forge_opt.execution.oracle import Expected
from forge_opt.execution.xla import executed_by_xla
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.interpreters.run import main_func
from forge_opt.targets.forge_python import output_names
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.data_formats import saturation_notes


class OneDevice:
    mode = "a check on one device (--devices P checks several)"
    takes = frozenset({"freeze", "bisect", "layers", "stem", "data_format", "weight_format", "executor", "tt_mlir"})
    failed = "the Forge module failed"

    def __init__(self, options: CheckOptions):
        self.options = options
        self.compiled: Compiled | None = None
        self.forge_python = ""

    def prepare(self, loaded: Loaded) -> Loaded:
        self.compiled = compile_model(loaded.model, loaded.base, self.options.compile, shapes=loaded.sizes,
                                      stem=self.options.stem)
        self.forge_python = self.compiled.emitted.source
        return loaded

    def module(self) -> ModuleOp | None:
        return None if self.compiled is None else self.compiled.module

    def build(self, model: ModelProto, base: Path | None, shapes: InputShapes, folder: Path) -> tuple[Program, str]:
        compiled = compile_model(model, base, self.options.compile, shapes=shapes)
        outs = output_names(main_func(compiled.module))

        run = run_compiled_on_xla if self.options.executor == "xla" else run_compiled

        def program(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            return dict(zip(outs, run(compiled, [feeds[n] for n in compiled.input_names])))

        return program, ""

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        model, compiled = prepared.model, self.compiled
        assert compiled is not None
        run = run_compiled_on_xla if self.options.executor == "xla" else run_compiled
        actual = run(compiled, [feeds[n] for n in compiled.input_names])
        tolerances = self.options.tolerances
        reduced_pcc = tolerances.min_pcc if self.options.compile.reduced else None
        notes = [executed_by_xla()] if self.options.executor == "xla" else []
        notes += saturation_notes(compiled.module)
        if self.options.tt_mlir:
            notes.append(tt_mlir_line(compiled.module, self.options, folder))
        return Ran(dict(zip([o.name for o in model.graph.output], actual)), returned=len(actual),
                   emitted=compiled.emitted, notes=notes,
                   bisect=lambda: first_divergence(model, compiled.module, feeds, rtol=tolerances.rtol,
                                                   atol=tolerances.atol, reduced_pcc=reduced_pcc),
                   layers=lambda: layer_errors(model, compiled.module, feeds))


def tt_mlir_line(module: ModuleOp, options: CheckOptions, folder: Path) -> str:
    """The report's line on tt-mlir compiling the program's StableHLO form
    for the program's devices as mock chips; its dumps are kept in
    `options.tt_mlir_dumps` (named in the line), or in the check's `folder`."""
    from forge_opt.execution.tt_mlir import compile_stablehlo
    from forge_opt.targets.stablehlo import stablehlo_text

    kept = options.tt_mlir_dumps
    dumps = Path(kept) if kept else folder / "tt_mlir"
    result = compile_stablehlo(stablehlo_text(module), dumps)
    return result.line() + (f"; its IR in {dumps}" if kept and result.dumps else "")


def check_model(
    source,
    inputs: list[np.ndarray] | dict[str, np.ndarray] | None = None,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float | None = None,
    seed: int = 0,
    freeze: tuple[str, ...] = (),
    bisect: bool = False,
    layers: bool = False,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    stem: str = "",
    data_format: str = "float32",
    weight_format: str = "",
    executor: str = "standin",
    tt_mlir: bool = False,
) -> CheckReport:
    """Compile `source` with onnx-to-forge, run the emitted Forge Python on the
    stand-in, run the model on onnxruntime, and compare every output.

    `freeze` names graph inputs to compile as constants, with their values
    taken from `inputs` (a dict). With `bisect`, a mismatch also names the
    first ONNX node whose output diverges; with `layers`, the report gives
    every float node output's PCC, relative L2 error and largest difference
    from onnxruntime's, in order (`report.layers`). `shapes` and `dims` fix symbolic
    input sizes (as `import_onnx`); given inputs fix the others. `stem`:
    the name of the emitted module's file without `.py`, which names its
    constants file. `data_format` (bfloat16) and `weight_format` (bfp8_b,
    bfp4_b) compile the program in reduced formats; it is then judged by
    Forge's PCC rule (`compare.compare_reduced`), `min_pcc` being its
    threshold (by default `compare.MIN_PCC`, or Forge's `REDUCED_PCC` for a
    reduced format). `executor="xla"` runs the program's StableHLO form on
    XLA CPU (jaxlib) instead of the emitted Forge Python on the stand-in;
    `tt_mlir` also compiles that form with tt-mlir (jax-tt-plugin, a mock
    Blackhole p150) and says in the report whether it lowered to TTNN."""
    return check_with(source, lambda: CheckOptions(
        inputs, Tolerances(rtol, atol), seed, shapes, dims,
        CompileOptions(data_format=data_format, weight_format=weight_format), freeze=freeze, bisect=bisect,
        layers=layers, stem=stem, executor=parse_executor(executor), tt_mlir=tt_mlir).with_pcc(min_pcc), OneDevice)
