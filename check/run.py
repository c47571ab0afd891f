"""The one check driver: load the model, make its feeds, ask the oracle,
let the strategy compile and run, compare every output, give the verdict;
errors become statuses here and only here (a user's mistake or a program
that does not compile: NOT_COMPILED; a Forge call that fails at run time:
MISMATCH). The strategies (`model.OneDevice`, `split.Fallback`,
`split.Parallel`, `decode.Decode`) differ only in how they compile and
run, as onnx-mlir's RunONNXModel.py differs by its verify mode."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check.bisect import Divergence, LayerError
from forge_opt.check.conditioning import in_doubt, judge_doubts, unstable_outputs
from forge_opt.check.driver import (
    Loaded,
    compare_outputs,
    dequantized_steps,
    hidden_folder,
    load_checked,
    model_feeds,
    model_outputs,
)
from forge_opt.check.options import CheckOptions
from forge_opt.check.report import MATCH, MISMATCH, NOT_COMPILED, CheckReport, verdict
from forge_opt.check.wide import WideRun
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import Expected, expected_outputs, two_sizes_note
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.plan.graph_infos import Plan
from forge_opt.targets.forge_python import ForgePythonModule
from forge_opt.transforms.stage_cuts import Cut


@dataclass
class Ran:
    """What a strategy's run gives the driver."""

    got: dict[str, np.ndarray] = field(default_factory=dict)  # the model's outputs by name
    returned: int | None = None  # how many outputs the program returned, where it can differ from the model's
    summary: str = ""  # the report's first lines: what was built (the split's layout, the plan's table)
    problems: list[str] = field(default_factory=list)  # what makes it a mismatch whatever the outputs are
    # the oracle's values for `got` where the strategy asked it itself (a decode's, step by step), by the names
    # in `got`; None: the model's outputs on the check's feeds
    expected: dict[str, np.ndarray] | None = None
    notes: list[str] = field(default_factory=list)
    emitted: ForgePythonModule | None = None
    plan: Plan | None = None  # a tensor-parallel run's plan
    cut: Cut | None = None  # a pipeline's stages
    bisect: Callable[[], Divergence | None] | None = None  # the first diverging node, asked on a mismatch
    layers: Callable[[], list[LayerError]] | None = None  # every node output's distance, asked by --layers
    # what still verifies when outputs are ill-conditioned (a split's device sub-models, each on its own
    # inputs): the problems found, and a line saying what was verified
    verify: Callable[[], tuple[list[str], str]] | None = None


class Strategy(Protocol):
    mode: str  # how errors name it: "--fallback", "--devices P", ...
    takes: frozenset[str]  # the flagged options it reads (`CheckOptions` field names)
    failed: str  # what failed, when a Forge call fails at run time
    forge_python: str  # the emitted source, once there is one

    def prepare(self, loaded: Loaded) -> Loaded:
        """Whatever comes before the feeds (one device compiles here, to make
        random inputs from the module's types); the model it compiles (a
        split's is resolved), with the sizes still to choose."""
        ...

    def module(self) -> ModuleOp | None:
        """The compiled module random inputs are made from, if there is one yet."""
        ...

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        """Compile what is left and run it on `feeds`, in `folder` (temporary)."""
        ...


#: a program built for some input shapes: feeds by name in, outputs by name out
Program = Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]]


class Builds(Protocol):
    """A strategy whose program a wrapper builds for the input shapes it
    chooses (`Decode`: one program per cache shape)."""

    def build(self, model: ModelProto, base: Path | None, shapes: InputShapes, folder: Path) -> tuple[Program, str]:
        """The program for `shapes` (its files, if any, in `folder`), and
        its report (a P-device plan's table; "" for one device)."""
        ...


def run_check(source, options: CheckOptions, strategy: Strategy) -> CheckReport:
    """`source` checked as `strategy` compiles and runs it, against the
    oracle on the model as the user gave it."""
    try:
        options.refuse_beyond(strategy.takes, strategy.mode)
        loaded = load_checked(source, options.inputs, freeze=options.freeze, shapes=options.shapes,
                              dims=options.dims)
        with hidden_folder() as tmp:
            prepared = strategy.prepare(loaded)
            model = prepared.model
            feeds, notes = model_feeds(model, loaded.base, loaded.inputs, options.seed, prepared.sizes,
                                       strategy.module())
            # the oracle runs the model the user gave: a freeze is the user's, a split's resolution is ours
            reference = expected_outputs(loaded.model, loaded.base, feeds)
            notes += two_sizes_note(loaded.model, feeds)
            try:
                ran = strategy.run(prepared, feeds, reference, Path(tmp))
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"{strategy.failed}: {e}", forge_python=strategy.forge_python)
            # judged while the strategy's folder exists: what `ran.verify` reads is asked only in doubt
            report = _judged(options, loaded, model, feeds, notes, reference, ran, strategy.forge_python)
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e), forge_python=strategy.forge_python)
    if options.bisect and report.status == MISMATCH and ran.bisect is not None:
        report.bisected = True
        report.divergence = ran.bisect()
    if options.layers and ran.layers is not None:
        report.layers = ran.layers()
    return report


def check_with(source, build: Callable[[], CheckOptions], strategy: Callable[[CheckOptions], Strategy]
               ) -> CheckReport:
    """`run_check` with the options `build` makes and the strategy for them;
    options no run can use are the report's error (NOT_COMPILED), as the
    Python API reports every user's mistake."""
    try:
        options = build()
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    return run_check(source, options, strategy(options))


def _judged(options: CheckOptions, loaded: Loaded, model, feeds: dict[str, np.ndarray], notes: list[str],
            reference: Expected, ran: Ran, forge_python: str) -> CheckReport:
    """The report of a run: every output compared, the verdict, and outputs
    in doubt judged (`conditioning.judge_doubts`)."""
    wide = WideRun(model, loaded.base, feeds)
    own = ran.expected is not None  # the strategy's own oracle values, not the model's outputs on `feeds`
    expected = ran.expected if ran.expected is not None else model_outputs(model, reference.outputs)
    results = compare_outputs(expected, ran.got, options.rule(dequantized_steps(model)),
                              wide=None if own or options.compile.reduced else wide,
                              min_pcc=options.tolerances.min_pcc)
    status, why = verdict(results, len(expected), None if own else ran.returned)
    if ran.problems:
        status = MISMATCH
    ill: dict[str, str] = {}
    if status in (MATCH, MISMATCH) and not ran.problems and not why and not own and \
            reference.oracle == "onnxruntime" and any(in_doubt(r) for r in results):
        status, why, results, ill, verified = judge_doubts(
            status, results, ran.verify,
            lambda compared: unstable_outputs(loaded.model, loaded.base, feeds, reference.outputs, compared, ran.got,
                                              options.rule(), None if options.compile.reduced else wide))
        if verified:
            notes.append(verified)
    return CheckReport(status, results, error="\n".join(filter(None, [*ran.problems, why])), summary=ran.summary,
                       forge_python=forge_python, emitted=ran.emitted, plan=ran.plan, cut=ran.cut,
                       oracle=reference.oracle, oracle_note=reference.why, notes=[*notes, *ran.notes],
                       ill_conditioned=ill)
