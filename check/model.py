"""`forge-check`: prove that the emitted Forge module computes what
onnxruntime computes for a model."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from forge_opt.check.bisect import Divergence, first_divergence
from forge_opt.check.compare import ATOL, MIN_PCC, RTOL, OutputResult, compared_verdict
from forge_opt.check.driver import Tolerances, bounded_note, compare_outputs, load_checked
from forge_opt.check.engine import compile_model, index_bounds, random_inputs, run_compiled
from forge_opt.check.oracle import expected_outputs
from forge_opt.diagnostics import ForgeOptError
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.targets.forge_python import ForgePythonModule

MATCH, MISMATCH, NOT_COMPILED = 0, 1, 2


@dataclass
class CheckReport:
    status: int
    outputs: list[OutputResult] = field(default_factory=list)
    error: str = ""
    forge_python: str = ""
    emitted: ForgePythonModule | None = None  # the module and its computed constants, for --emit
    divergence: Divergence | None = None  # with bisect=True
    bisected: bool = False
    oracle: str = "onnxruntime"  # what computed the expected outputs
    oracle_note: str = ""  # why that is not onnxruntime
    notes: list[str] = field(default_factory=list)  # how the inputs were made, and other facts of the run

    @property
    def ok(self) -> bool:
        return self.status == MATCH

    def format(self) -> str:
        if self.status == NOT_COMPILED:
            return f"did not compile: {self.error}"
        lines = format_results(self.outputs)
        if self.oracle != "onnxruntime":
            lines.append(f"oracle: {self.oracle} ({self.oracle_note})")
        lines.extend(self.notes)
        lines.append("match" if self.ok else "mismatch")
        if self.bisected:
            lines.append(self.divergence.format() if self.divergence else "bisect: no intermediate value diverges")
        return "\n".join(lines)


def format_results(results: list[OutputResult]) -> list[str]:
    """The table of compared outputs: error, the tolerance it was held to,
    PCC ("-" where none applies) and verdict."""
    lines = [f"{'output':<24} {'shape':<18} {'max abs err':>12} {'tolerance':>10} {'budget':>8} {'pcc':>10}  verdict"]
    for o in results:
        verdict = "ok" if o.ok else f"MISMATCH {o.reason}".rstrip()
        tolerance, budget = (f"{o.tolerance:.1e}", o.budget) if o.tolerance else ("exact", "-")
        p = "-" if o.pcc != o.pcc else f"{o.pcc:.6f}"
        lines.append(f"{o.name:<24} {list(o.shape)!s:<18} {o.max_abs_error:>12.3e} {tolerance:>10} {budget:>8} "
                     f"{p:>10}  {verdict}")
    failed = [o for o in results if not o.ok]
    rtols = [o.accepting_rtol for o in failed if o.accepting_rtol == o.accepting_rtol]
    if len(failed) > 1 and len(rtols) == len(failed):
        lines.append(f"--rtol {max(rtols):.1e} would accept every output")
    else:
        lines.extend(f"{o.name}: --rtol {o.accepting_rtol:.1e} would accept it"
                     for o in failed if o.accepting_rtol == o.accepting_rtol)
    return lines


def verdict(results: list[OutputResult], expected: int, actual: int | None = None) -> tuple[int, str]:
    """MATCH only when every expected output was compared and is ok; with
    the reason why not, when it is not."""
    why = compared_verdict(results, expected)
    if why is None and actual is not None and actual != expected:
        why = f"the program returns {actual} outputs where the model has {expected}"
    if why is not None:
        return MISMATCH, why
    return (MATCH if all(r.ok for r in results) else MISMATCH), ""


def check_model(
    source,
    inputs: list[np.ndarray] | dict[str, np.ndarray] | None = None,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float = MIN_PCC,
    seed: int = 0,
    freeze: tuple[str, ...] = (),
    bisect: bool = False,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    stem: str = "",
) -> CheckReport:
    """Compile `source` with onnx-to-forge, run the emitted Forge Python on the
    stand-in, run the model on onnxruntime, and compare every output.

    `freeze` names graph inputs to compile as constants, with their values
    taken from `inputs` (a dict). With `bisect`, a mismatch also names the
    first ONNX node whose output diverges. `shapes` and `dims` fix symbolic
    input sizes (as `import_onnx`); given inputs fix the others. `stem`:
    the name of the emitted module's file without `.py`, which names its
    constants file."""
    try:
        loaded = load_checked(source, inputs, freeze=freeze, shapes=shapes, dims=dims)
        model, base, inputs = loaded.model, loaded.base, loaded.inputs
        compiled = compile_model(model, base, shapes=loaded.sizes, stem=stem)
        names = compiled.input_names
        notes = []
        if inputs is None:
            bounds = index_bounds(model)
            arrays = random_inputs(compiled.module, seed, bounds)
            notes = bounded_note(bounds, names, [a.dtype for a in arrays])
        else:
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ForgeOptError(f"no value given for input '{missing[0]}'")
            arrays = [np.asarray(inputs[n]) for n in names]
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))

    text = compiled.emitted.source
    feeds = dict(zip(names, arrays))
    try:
        reference = expected_outputs(model, base, feeds)
    except ForgeOptError as e:  # the inputs are ones the model itself cannot take
        return CheckReport(NOT_COMPILED, error=str(e), forge_python=text)
    expected = reference.outputs
    try:
        actual = run_compiled(compiled, arrays)
    except ForgeCallError as e:
        return CheckReport(MISMATCH, error=f"the Forge module failed: {e}", forge_python=text)

    got = dict(zip([o.name for o in model.graph.output], actual))
    results = compare_outputs(model, expected, got, Tolerances(rtol, atol, min_pcc), base=base, feeds=feeds)
    status, why = verdict(results, len(expected), len(actual))
    report = CheckReport(status, results, error=why, forge_python=text, emitted=compiled.emitted,
                         oracle=reference.oracle, oracle_note=reference.why, notes=notes)
    if bisect and status == MISMATCH:
        report.bisected = True
        report.divergence = first_divergence(model, compiled.module, feeds, rtol=rtol, atol=atol)
    return report
