"""`forge-check --decode N`: greedy decoding, as a generation loop runs a
decoder exported with its KV cache (Optimum's `text-generation-with-past`),
checked step by step against the same loop on onnxruntime.

Each step feeds the argmax of the last position's logits as the next
`input_ids`, each `present.*` output as the matching `past_key_values.*`
input, `attention_mask` one column longer and `position_ids` one further.
Our loop and onnxruntime's each feed their own outputs forward, so an error
that changes a token shows at that step. The cache grows every step, so
every step has new input shapes and needs a program of its own: programs
are built once per shape and the report says how many were.

A program in a reduced format (`--data-format`, `--weight-format`) is also
run teacher-forced, on the oracle's own feeds at each step, as
Tenstorrent reports LLM accuracy: top-1 and top-5 agreement (the oracle's
token our argmax, or among our five largest logits) and the logits' PCC,
which gives the verdict; the greedy loop says where its first token
differs, which a reduced format may well make happen.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check.compare import ATOL, RTOL, compare_output
from forge_opt.check.driver import Loaded
from forge_opt.check.model import OneDevice
from forge_opt.check.options import CheckOptions, Tolerances
from forge_opt.check.report import CheckReport
from forge_opt.check.run import Builds, Program, Ran, check_with
from forge_opt.check.split import Parallel
from forge_opt.check.stages import Stages
from forge_opt.check.static_cache import (
    MASK,
    POSITION,
    cache_positions,
    from_static,
    past_length,
    to_static,
)
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import Expected, expected_outputs
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.plan.graph_infos import LINE_LAYOUT
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.static_cache import NotStaticError, cache_pairs

Feeds = dict[str, np.ndarray]


def next_feeds(feeds: Feeds, outputs: Mapping[str, np.ndarray], pairs: Mapping[str, str]) -> tuple[Feeds, np.ndarray]:
    """The next step's inputs, and the tokens chosen (greedy: the argmax of
    the last position's logits)."""
    logits = outputs["logits"]
    tokens = np.argmax(logits[:, -1, :], axis=-1)
    ids = feeds["input_ids"]
    new = dict(feeds)
    new["input_ids"] = tokens.astype(ids.dtype).reshape(ids.shape[0], 1)
    for present, past in pairs.items():
        new[past] = np.asarray(outputs[present])
    if MASK in feeds:
        mask = feeds[MASK]
        new[MASK] = np.concatenate([mask, np.ones((mask.shape[0], 1), mask.dtype)], axis=1)
    if "position_ids" in feeds:
        new["position_ids"] = feeds["position_ids"][:, -1:] + 1
    return new, tokens


class Programs:
    """Our side of the loop: one program per set of input shapes, built on
    first use by `builder` (the strategy of one device, or of P
    tensor-parallel ones)."""

    def __init__(self, model, base, builder: Builds, folder: Path, pairs: Mapping[str, str], length: int = 0):
        self.model, self.base, self.builder, self.folder = model, base, builder, folder
        self.pairs, self.length = pairs, length  # a static cache of `length` positions (0: growing)
        self.built: dict[tuple, Program] = {}
        self.report = ""  # the first program's report (a P-device plan's table and warnings)

    def run(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """The step's outputs for a growing cache's `feeds`, as the growing
        model gives them (a static cache's converted both ways)."""
        given = to_static(feeds, self.pairs, self.length) if self.length else feeds
        key = tuple((name, a.shape) for name, a in given.items())
        if key not in self.built:
            # the model's own inputs' shapes: `cache_position` is the program's
            shapes = InputShapes.of({name: a.shape for name, a in given.items() if name != POSITION})
            program, report = self.builder.build(self.model, self.base, shapes,
                                                 self.folder / f"program_{len(self.built)}")
            self.built[key], self.report = program, self.report or report
        outputs = self.built[key](given)
        if not self.length:
            return outputs
        return from_static(outputs, self.pairs, past_length(feeds, self.pairs) + feeds["input_ids"].shape[1])


def step_programs(options: CheckOptions) -> Builds:
    """What builds a decode's step programs for `options`: the strategy of
    one device, of P tensor-parallel ones, or of a pipeline's stages."""
    if options.stages > 1:
        return Stages(options)
    return Parallel(options) if options.compile.device_count > 1 else OneDevice(options)


class Decode:
    """`steps` greedy decode steps on the stand-in and on the oracle, each
    loop feeding its own outputs forward; the strategy `make` gives (one
    device, or P tensor-parallel ones, simulated or under MPI) builds each
    step's program, this one keeps the loop and the static cache. A match:
    every step's token equal to the oracle's and its logits within
    tolerance."""

    takes = frozenset({"steps", "devices", "mesh", "mesh_layout", "mpi", "timeout", "plan", "min_size",
                       "require_sharded", "data_format", "weight_format", "max_length", "growing_cache", "stages"})
    failed = "the program failed on Forge"
    forge_python = ""

    def __init__(self, options: CheckOptions, make: Callable[[CheckOptions], Builds] = step_programs):
        self.options, self.make = options, make
        self.mode = f"--decode {options.steps}"
        self.pairs: dict[str, str] = {}

    def prepare(self, loaded: Loaded) -> Loaded:
        if self.options.steps < 1:
            raise ForgeOptError(f"--decode {self.options.steps}: decode at least one step")
        if self.options.max_length and self.options.growing_cache:
            raise ForgeOptError("--max-length sizes a static cache: --growing-cache has none")
        model = loaded.model
        in_names = [i.name for i in model.graph.input]
        out_names = [o.name for o in model.graph.output]
        self.pairs = cache_pairs(in_names, out_names)
        if "input_ids" not in in_names or "logits" not in out_names or not self.pairs:
            raise ForgeOptError(
                "--decode runs a decoder with its KV cache: inputs 'input_ids' and 'past_key_values.*', outputs "
                "'logits' and 'present.*' (as Optimum exports a text-generation-with-past model)"
            )
        return loaded

    def module(self) -> ModuleOp | None:
        return None

    def run(self, prepared: Loaded, feeds: Feeds, reference: Expected, folder: Path) -> Ran:
        o, pairs, steps, model = self.options, self.pairs, self.options.steps, prepared.model
        out_names = [x.name for x in model.graph.output]
        ours, theirs = feeds, dict(feeds)
        lines = [f"{'step':<6} {'token':>10} {'oracle':>12}"]
        judged: Feeds = {}  # each step's logits (teacher-forced in a reduced format) and the last step's cache
        oracle: Feeds = {}  # the oracle's, by the same names: the driver compares them by the one rule
        equal = 0
        length = 0 if o.growing_cache else self.cache_length(feeds)
        if length:
            self.padding_ignored(prepared, feeds, reference, length)
        # the step programs' options: the compile options with the cache made static, and nothing of the loop's
        each = replace(o, steps=0, max_length=0, growing_cache=False, compile=replace(o.compile, static_cache=length))
        programs = Programs(model, prepared.base, self.make(each), folder, pairs, length)
        agree = Agreement()

        def keep(name: str, value: np.ndarray, want: np.ndarray) -> None:
            judged[name], oracle[name] = value, want

        def run(feeds: Feeds, step: int) -> dict[str, np.ndarray]:
            try:
                return programs.run(feeds)
            except ForgeCallError as e:
                raise ForgeCallError(f"step {step}: {e}") from None
            except NotStaticError as e:
                raise ForgeOptError(f"{e} (--growing-cache decodes with the cache as exported)") from None

        for step in range(steps):
            step_outputs = run(ours, step)
            if step:  # the first step's is the driver's
                reference = expected_outputs(model, prepared.base, theirs)
            want = dict(zip(out_names, reference.outputs))
            # teacher-forced, where a reduced format may part the loops: on the oracle's feeds
            forced = run(theirs, step) if o.compile.reduced and step else step_outputs
            keep(f"logits (step {step})", forced["logits"], want["logits"])
            agree.add(want["logits"], forced["logits"])
            ours, token = next_feeds(ours, step_outputs, pairs)
            theirs, expected = next_feeds(theirs, want, pairs)
            same = bool(np.array_equal(token, expected))
            equal += same
            lines.append(f"{step:<6} {_tokens(token):>10} {_tokens(expected):>12}{'' if same else '  differs'}")
        # the last step's cache, which no later step reads: compared here, or an error in it passes
        for present in pairs:
            keep(f"{present} (step {steps - 1})", forced[present], want[present])
        built = len(programs.built)
        devices = o.compile.device_count
        where = f"{devices} devices" if devices > 1 else "one device"
        if o.stages > 1:
            where = f"{o.stages} pipeline stages" + (f" of {devices} devices each" if devices > 1 else "")
        where += " under MPI" if o.mpi else ""
        how = f"a static KV cache of {length} positions" if length else "one per input shape"
        lines.append(f"decode: {equal}/{steps} tokens equal to {reference.oracle}'s ({where}; "
                     f"{built} program{'' if built == 1 else 's'} built, {how})")
        problems = [] if equal == steps else [f"decode: {steps - equal} of {steps} tokens differ from the oracle's"]
        if o.compile.reduced:
            differs = next((i for i, line in enumerate(lines[1:]) if line.endswith("differs")), None)
            lines.append(agree.format(reference.oracle) + "; greedy: " + (
                "every token the oracle's" if differs is None else f"the first token that differs is step {differs}"))
            problems = []  # a reduced format is judged by its teacher-forced logits, not by where greedy parts
        return Ran(judged, expected=oracle, summary=programs.report, problems=problems, notes=lines)

    def padding_ignored(self, prepared: Loaded, feeds: Feeds, reference: Expected, length: int) -> None:
        """A static cache pads the past with positions the attention mask
        hides. An export whose logits move with them on the oracle itself
        (ALiBi by key index, as MPT's; Gemma's as Optimum exports it) cannot
        run from one: said as that, not as a mismatch of ours."""
        padded = to_static(feeds, self.pairs, length)
        padded.pop(POSITION)
        names = [x.name for x in prepared.model.graph.output]
        want = reference.outputs[names.index("logits")]
        got = expected_outputs(prepared.model, prepared.base, padded).outputs[names.index("logits")]
        t = self.options.tolerances
        padded_result = compare_output("logits", want, got, rtol=t.rtol, atol=t.atol, min_pcc=t.min_pcc)
        if not padded_result.ok:
            difference = padded_result.max_abs_error
            # an encoder-decoder's decoder (Optimum's decoder_with_past) has no mask over its own cache
            hidden = "ones its attention mask hides" if MASK in feeds else "ones it has no 'attention_mask' to hide"
            raise ForgeOptError(
                f"the export's logits change when its KV cache is padded to {length} positions with {hidden} "
                f"(by up to {difference:.3g} on {reference.oracle} itself): it cannot run from a static cache "
                "(--growing-cache decodes with the cache as exported)")

    def cache_length(self, feeds: Feeds) -> int:
        return cache_positions(past_length(feeds, self.pairs), feeds["input_ids"].shape[1], self.options.steps,
                               self.options.max_length)


class Agreement:
    """Teacher-forced token agreement: at each step, whether the oracle's
    next token is our argmax (top-1) or among our five largest logits
    (top-5), as tt_transformers reports accuracy."""

    def __init__(self):
        self.steps = self.top1 = self.top5 = 0

    def add(self, want: np.ndarray, got: np.ndarray) -> None:
        token = np.argmax(want[:, -1, :], axis=-1)
        ours = np.asarray(got[:, -1, :], np.float32)
        five = np.argsort(-ours, axis=-1, kind="stable")[:, :5]
        for b in range(token.shape[0]):
            self.steps += 1
            self.top1 += int(five[b, 0] == token[b])
            self.top5 += int(token[b] in five[b])

    def format(self, oracle: str) -> str:
        pct = (lambda n: f"{100 * n / self.steps:.0f}%") if self.steps else (lambda n: "-")
        return (f"accuracy (teacher-forced, against {oracle}'s tokens): top-1 {self.top1}/{self.steps} "
                f"({pct(self.top1)}), top-5 {self.top5}/{self.steps} ({pct(self.top5)})")


def check_decode(
    source,
    steps: int,
    inputs: Feeds | None = None,
    *,
    devices: int = 1,
    mpi: bool = False,
    plan: str = "",
    min_size: int = 0,
    require_sharded: bool = False,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float | None = None,
    seed: int = 0,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    data_format: str = "float32",
    weight_format: str = "",
    max_length: int = 0,
    growing_cache: bool = False,
    stages: int = 1,
    mesh: str = "",
    mesh_layout: str = LINE_LAYOUT,
) -> CheckReport:
    """`forge-check --decode N` (`Decode`), from `inputs` (random ones if
    None); in reduced formats as `check_model` takes them; with a static KV
    cache of `max_length` positions (by default the prompt and the steps),
    or with the cache as exported (`growing_cache`); through a pipeline of
    `stages`, each keeping its own layers' cache; on a `mesh` (`RxC`, laid
    out as `mesh_layout`)."""
    return check_with(source, lambda: CheckOptions(
        inputs, Tolerances(rtol, atol), seed, shapes, dims,
        CompileOptions(devices, min_size, plan, require_sharded, data_format, weight_format, mesh=mesh,
                       mesh_layout=mesh_layout), mpi=mpi,
        steps=steps,
        max_length=max_length, growing_cache=growing_cache, stages=stages).with_pcc(min_pcc), Decode)


def _tokens(t: np.ndarray) -> str:
    return str(int(t[0])) if t.size == 1 else ",".join(str(int(x)) for x in t)
