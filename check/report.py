"""A check's verdict and its report: the table of compared outputs, the
oracle, the notes of the run."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from forge_opt.check.bisect import Divergence, LayerError, format_layers
from forge_opt.check.compare import OutputResult, compared_verdict
from forge_opt.plan.graph_infos import Plan
from forge_opt.targets.forge_python import ForgePythonModule
from forge_opt.transforms.stage_cuts import Cut

MATCH, MISMATCH, NOT_COMPILED = 0, 1, 2
#: outputs that differ only where the oracle does not reproduce itself (`conditioning`): no verdict on them
ILL_CONDITIONED = 3
#: each status in words (forge-check's exit status)
VERDICTS = {MATCH: "match", MISMATCH: "mismatch", NOT_COMPILED: "did not compile", ILL_CONDITIONED: "ill-conditioned"}


@dataclass
class CheckReport:
    status: int
    outputs: list[OutputResult] = field(default_factory=list)
    error: str = ""  # why it did not compile, or why it is a mismatch; empty on a match
    summary: str = ""  # what the check built (a split's layout, a plan's table and warnings)
    forge_python: str = ""
    emitted: ForgePythonModule | None = None  # the module and its computed constants, for --emit
    plan: Plan | None = None  # what `--devices P` compiled: its segments, devices and collectives
    cut: Cut | None = None  # what `--stages S` cut: each stage's layers, stored weights and activations sent
    divergence: Divergence | None = None  # with bisect=True
    bisected: bool = False
    layers: list[LayerError] | None = None  # with --layers
    ill_conditioned: dict[str, str] = field(default_factory=dict)  # outputs the oracle does not reproduce, and how
    oracle: str = "onnxruntime"  # what computed the expected outputs
    oracle_note: str = ""  # why that is not onnxruntime
    notes: list[str] = field(default_factory=list)  # how the inputs were made, and other facts of the run

    @property
    def ok(self) -> bool:
        return self.status == MATCH

    def format(self) -> str:
        if self.status == NOT_COMPILED:
            return f"did not compile: {self.error}"
        lines = format_results(self.outputs, set(self.ill_conditioned))
        if self.layers is not None:
            lines.extend(format_layers(self.layers))
        if self.oracle != "onnxruntime":
            lines.append(f"oracle: {self.oracle} ({self.oracle_note})")
        lines.extend(self.notes)
        lines.extend(f"ill-conditioned at these inputs: '{name}': {how}" for name, how in self.ill_conditioned.items())
        if self.status == ILL_CONDITIONED:
            lines.append("ill-conditioned: every output that differs is ill-conditioned at these inputs (above); no "
                         "verdict on them (exit 3), every other output matches")
        else:
            lines.append("match" if self.ok else "mismatch")
        if self.bisected:
            lines.append(self.divergence.format() if self.divergence else "bisect: no intermediate value diverges")
        return "\n".join(lines)


def format_results(results: list[OutputResult], ill: Collection[str] = ()) -> list[str]:
    """The table of compared outputs: error, the tolerance it was held to,
    PCC ("-" where none applies) and verdict; for a program in a reduced
    format, PCC, relative L2 error and the largest difference. `ill`: the
    outputs judged ill-conditioned."""
    if any(o.relative_l2 == o.relative_l2 for o in results):
        return _reduced_results(results)
    lines = [f"{'output':<24} {'shape':<18} {'max abs err':>12} {'tolerance':>10} {'budget':>8} {'pcc':>10}  verdict"]
    for o in results:
        verdict = "ok" if o.ok else "ILL-CONDITIONED" if o.name in ill else f"MISMATCH {o.reason}".rstrip()
        tolerance, budget = (f"{o.tolerance:.1e}", o.budget) if o.tolerance else ("exact", "-")
        p = "-" if o.pcc != o.pcc else f"{o.pcc:.6f}"
        lines.append(f"{o.name:<24} {list(o.shape)!s:<18} {o.max_abs_error:>12.3e} {tolerance:>10} {budget:>8} "
                     f"{p:>10}  {verdict}")
    lines.extend(line for o in results for line in _positions(o, o.name in ill))
    failed = [o for o in results if not o.ok]
    rtols = [o.accepting_rtol for o in failed if o.accepting_rtol == o.accepting_rtol]
    if len(failed) > 1 and len(rtols) == len(failed):
        lines.append(f"--rtol {max(rtols):.1e} would accept every output")
    else:
        lines.extend(f"{o.name}: --rtol {o.accepting_rtol:.1e} would accept it"
                     for o in failed if o.accepting_rtol == o.accepting_rtol)
    return lines


def _positions(o: OutputResult, ill: bool = False) -> list[str]:
    """What the verdict of output `o` rests on, position by position: how
    many positions the budget excused or the oracle's variants showed, and
    where the rest differ (`ill`: the output is ill-conditioned as a whole,
    its positions excused by what the report says below)."""
    size = math.prod(o.shape)
    lines = []
    if o.excused:
        lines.append(f"{o.name}: {o.excused:,} of {size:,} positions beyond the tolerance are within the budget there "
                     "(as far from the model run wider as onnxruntime's own error allows)")
    wrong = int(o.off.sum()) if o.off is not None and not o.ok else 0
    if wrong and o.off is not None:
        first = tuple(int(i) for i in np.argwhere(o.off)[0])
        said = f"{o.name}: {wrong:,} of {size:,} positions {'differ' if ill else 'are off'}, the first at {list(first)}"
        if o.ill and not ill:
            said += f" (onnxruntime's own variants agree with it there; they differ from it at {o.ill:,} other " \
                    f"position{'s' if o.ill > 1 else ''}, ill-conditioned)"
        lines.append(said)
    return lines


def _reduced_results(results: list[OutputResult]) -> list[str]:
    lines = [f"{'output':<24} {'shape':<18} {'pcc':>10} {'rel L2 err':>11} {'max abs err':>12}  verdict"]
    for o in results:
        verdict = "ok" if o.ok else f"MISMATCH {o.reason}".rstrip()
        p = "-" if o.pcc != o.pcc else f"{o.pcc:.6f}"
        rel = "-" if o.relative_l2 != o.relative_l2 else f"{o.relative_l2:.3e}"
        lines.append(f"{o.name:<24} {list(o.shape)!s:<18} {p:>10} {rel:>11} {o.max_abs_error:>12.3e}  {verdict}")
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
