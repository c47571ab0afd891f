"""The check strategies of forge-split's products (`run.run_check`):
`forge-check --fallback` checks a model through the split path (device where
Forge can, CPU elsewhere) against onnxruntime on the whole model,
`forge-check --devices P` through the tensor-parallel path."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL
from forge_opt.check.conditioning import unstable_outputs
from forge_opt.check.driver import Loaded, compare_outputs, dequantized_steps, load_checked, model_outputs
from forge_opt.check.model import tt_mlir_line
from forge_opt.check.options import CheckOptions, Tolerances, parse_executor
from forge_opt.check.report import CheckReport
from forge_opt.check.run import Program, Ran, Strategy, check_with
from forge_opt.check.wide import WideRun
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.oracle import Expected, expected_outputs
from forge_opt.execution.xla import executed_by_xla
from forge_opt.frontends.onnx import Resolved, resolve_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.plan.graph_infos import LINE_LAYOUT
from forge_opt.plan.onnx_annotations import annotate, save_annotated
from forge_opt.split.api import (
    convert,
    describe_split,
    require_static_inputs,
    run_split,
    split_resolved,
)
from forge_opt.split.mpi import run_mpi
from forge_opt.split.parallel import compile_parallel, line_program
from forge_opt.split.runner import agreed, assemble, run_parallel
from forge_opt.targets.devices import parallel_report, write_parallel
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.data_formats import saturation_notes


def _differ(differ: list[str], who: str) -> list[str]:
    return [f"{who}' outputs differ ({', '.join(differ)})"] if differ else []


class Fallback:
    """The model split, converted, and run as converted (what ships);
    `devices` > 1: each device sub-model tensor-parallel, simulated or one
    MPI process each, which must all return the same outputs."""

    mode = "--fallback"
    takes = frozenset({"fallback", "freeze", "devices", "mpi", "timeout", "min_device_ops", "executor"})
    failed = "a device sub-model failed on Forge"
    forge_python = ""

    def __init__(self, options: CheckOptions):
        self.options = options
        self.resolved: Resolved | None = None  # the model imported once: its feeds' types, its split

    def prepare(self, loaded: Loaded) -> Loaded:
        if self.options.mpi and self.options.compile.device_count < 2:
            raise ForgeOptError("--mpi runs a split for several devices: give --devices P")
        if self.options.executor == "xla" and self.options.compile.device_count > 1:
            raise ForgeOptError("--fallback --executor xla runs each device sub-model on one XLA device: leave out "
                                "--devices")
        self.resolved = resolve_model(loaded.model, loaded.sizes, loaded.base)
        model = self.resolved.model
        if loaded.inputs is None:
            require_static_inputs(model)  # names each unknown size and the flag that fixes it
        return Loaded(model, loaded.base, loaded.inputs, InputShapes())  # its sizes are fixed

    def module(self) -> ModuleOp | None:
        return None if self.resolved is None else self.resolved.module

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        devices, mpi = self.options.compile.device_count, self.options.mpi
        assert self.resolved is not None
        _, plan = split_resolved(self.resolved, folder / "split", min_device_ops=self.options.min_device_ops,
                                 devices=devices)
        convert(folder / "split")  # the check runs what ships: the converted modules
        layout = describe_split(folder / "split")
        record: list = []  # each device sub-model's outputs and onnxruntime's on its inputs
        if mpi:  # a split's outputs have no split axis: each process's must be the same
            got, differ = assemble(plan, run_mpi(folder / "split", feeds, devices, self.options.timeout))
        else:
            got, differ = run_split(folder / "split", feeds, record=None if devices > 1 else record,
                                    executor=self.options.executor), []
        count = len(plan.graphs)
        summary = f"split into {count} sub-model{'' if count == 1 else 's'} ({layout})"
        verify = None
        if not mpi and devices == 1:  # asked only in doubt, while the split's files exist (`run.run_check`)
            oracle = model_outputs(prepared.model, reference.outputs)
            verify = lambda: self.verify(record, run_split(folder / "split", feeds, mode="cpu"), oracle)  # noqa: E731
        if not re.search(r"\btt\b", layout):
            summary += "; nothing runs on the device: this checks the split, not a Forge program"
        if devices > 1:
            summary += f"; each device sub-model tensor-parallel on {devices} devices" + (
                f" (MPI, --timeout {self.options.timeout:g} s)" if mpi else "")
        notes = [executed_by_xla() + ", each device sub-model"] if self.options.executor == "xla" else []
        return Ran(got, summary=summary, problems=_differ(differ, "the MPI processes"), verify=verify, notes=notes)

    def verify(self, record: list, cpu: dict[str, np.ndarray], oracle: dict[str, np.ndarray]
               ) -> tuple[list[str], str]:
        """Each device sub-model against onnxruntime on the inputs it was given
        in the run (`record`, as `run_split` fills it), and the split run on
        onnxruntime alone (`cpu`, which tells a partitioning error from
        rounding) against the model's outputs (`oracle`): what differs, and
        what was verified."""
        rule = self.options.rule()
        problems = []
        for name, want in oracle.items():
            if not rule(name, np.asarray(want), np.asarray(cpu[name])).ok:
                problems.append(f"the split run on onnxruntime alone differs from the model at output '{name}': "
                                "a partitioning error")
        unsure = []
        for label, names, device, model, base, feeds in record:
            expected = expected_outputs(model, base, feeds).outputs
            got, wide = dict(zip(names, device)), WideRun(model, base, feeds)
            # the sub-model's outputs in order, as the model declares them: the rule, then the budget
            results = compare_outputs(model_outputs(model, expected), got,
                                      self.options.rule(dequantized_steps(model)), wide=wide,
                                      min_pcc=self.options.tolerances.min_pcc)
            if all(r.ok for r in results):
                continue
            unstable = unstable_outputs(model, base, feeds, expected, results, got, rule, wide).ill
            for r in results:
                if r.ok:
                    continue
                if r.name in unstable:  # an ArgMax over near-tied scores on the device: no verdict either
                    unsure.append(f"{label}: output '{r.name}' is ill-conditioned at its inputs: {unstable[r.name]}")
                else:
                    problems.append(f"{label}: output '{r.name}' differs from onnxruntime's on the same inputs "
                                    f"(max abs error {r.max_abs_error:.3e})")
        count = len(record)
        verified = f"each of the {count} device sub-model{'' if count == 1 else 's'} matches onnxruntime on the " \
                   "inputs it is given, and the split on onnxruntime alone matches the model"
        if unsure:
            verified = "\n".join([verified.replace("matches onnxruntime", "matches onnxruntime (or is "
                                                    "ill-conditioned, below)"), *unsure])
        return problems, verified


class Parallel:
    """The model compiled for P devices, run simulated (every device in this
    process) or with one MPI process per device; every device must return
    the same outputs."""

    takes = frozenset({"devices", "mesh", "mesh_layout", "mpi", "timeout", "plan", "min_size", "require_sharded",
                       "data_format", "weight_format", "executor", "tt_mlir", "annotate"})
    failed = "a device segment failed on Forge"
    forge_python = ""

    def __init__(self, options: CheckOptions):
        self.options = options
        c = options.compile
        self.mode = f"--mesh {c.mesh}" if c.mesh else f"--devices {c.devices}"
        self.resolved: Resolved | None = None  # the model imported once: its feeds' types, its program

    def prepare(self, loaded: Loaded) -> Loaded:
        if self.options.mpi and (self.options.executor == "xla" or self.options.tt_mlir):
            raise ForgeOptError("--executor xla and --tt-mlir take the P devices' one SPMD program: leave out --mpi")
        self.resolved = resolve_model(loaded.model, loaded.sizes, loaded.base)
        return loaded

    def module(self) -> ModuleOp | None:
        return None if self.resolved is None else self.resolved.module

    def build(self, model: ModelProto, base: Path | None, shapes: InputShapes, folder: Path) -> tuple[Program, str]:
        o = self.options
        resolved = resolve_model(model, shapes, base)
        written = write_parallel(compile_parallel(resolved, o.compile), folder,
                                 line_module=line_program(resolved, o.compile))
        devices = o.compile.device_count

        def program(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            per_device = run_mpi(folder, feeds, devices, o.timeout) if o.mpi else run_parallel(folder, feeds)
            return agreed(written, per_device, "the program")

        return program, parallel_report(written)

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        o = self.options
        # the program every device runs, written as the plan's per-device modules (which leaves it whole)
        devices = o.compile.device_count
        assert self.resolved is not None
        module = compile_parallel(self.resolved, o.compile)
        plan = write_parallel(module, folder / "tp", line_module=line_program(self.resolved, o.compile))
        summary = parallel_report(plan)
        notes = saturation_notes(module)
        if o.annotate:
            notes.append(save_annotated(prepared.model, prepared.base, o.annotate, lambda m: annotate(m, plan)))
        if o.tt_mlir:
            notes.append(tt_mlir_line(module, o, folder))
        if o.executor == "xla":
            got = run_spmd_on_xla(module, prepared, feeds, devices)
            notes.append(executed_by_xla() + f", on {devices} devices")
            return Ran(got, summary=summary, plan=plan, notes=notes)
        if o.mpi:
            per_device = run_mpi(folder / "tp", feeds, devices, o.timeout)
        else:
            per_device = run_parallel(folder / "tp", feeds)
        got, differ = assemble(plan, per_device)
        if o.mpi:
            summary += f"\nrun under MPI, one process per device (--timeout {o.timeout:g} s)"
        return Ran(got, summary=summary, problems=_differ(differ, "the devices"), plan=plan, notes=notes)


def run_spmd_on_xla(module: ModuleOp, prepared: Loaded, feeds: dict[str, np.ndarray],
                    devices: int) -> dict[str, np.ndarray]:
    """The P-device program as one SPMD StableHLO module on P virtual XLA
    CPU devices: the model's outputs."""
    from forge_opt.execution.engine import program_inputs
    from forge_opt.execution.xla import run_stablehlo
    from forge_opt.interpreters.run import main_func
    from forge_opt.targets.forge_python import input_names
    from forge_opt.targets.stablehlo import stablehlo_text
    from forge_opt.transforms.tp.partition import split_axes, split_blocks

    fn = main_func(module)
    inputs = program_inputs(module, [feeds[n] for n in input_names(fn)])
    results = len(fn.function_type.outputs)
    outs = run_stablehlo(stablehlo_text(module), inputs, devices, split_axes(fn.arg_attrs, len(inputs)),
                         split_axes(fn.res_attrs, results), split_blocks(fn.arg_attrs, len(inputs)),
                         split_blocks(fn.res_attrs, results))
    return dict(zip([out.name for out in prepared.model.graph.output], outs))


def check_fallback(
    source,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float = MIN_PCC,
    seed: int = 0,
    min_device_ops: int = 1,
    freeze: tuple[str, ...] = (),
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    devices: int = 1,
    mpi: bool = False,
    executor: str = "standin",
) -> CheckReport:
    """`forge-check --fallback` (`Fallback`); `freeze` as `check_model`'s."""
    return check_with(source, lambda: CheckOptions(
        inputs, Tolerances(rtol, atol, min_pcc), seed, shapes, dims, CompileOptions(devices), freeze=freeze, mpi=mpi,
        min_device_ops=min_device_ops, executor=parse_executor(executor)), Fallback)


def check_parallel(
    source,
    devices: int,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    mpi: bool = False,
    plan: str = "",
    min_size: int = 0,
    require_sharded: bool = False,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float = MIN_PCC,
    seed: int = 0,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    executor: str = "standin",
    mesh: str = "",
    mesh_layout: str = LINE_LAYOUT,
) -> CheckReport:
    """`forge-check --devices P [--mpi] [--executor xla]` (`Parallel`);
    `mesh="RxC"` (R·C = P): `--mesh RxC` (`mesh_layout`: `--mesh-layout`)."""
    return check_with(source, lambda: CheckOptions(
        inputs, Tolerances(rtol, atol, min_pcc), seed, shapes, dims,
        CompileOptions(devices, min_size, plan, require_sharded, mesh=mesh, mesh_layout=mesh_layout), mpi=mpi,
        executor=parse_executor(executor)),
        Parallel)


class SizedDevices:
    """`--device-memory`: the smallest device count whose per-device share
    (parameters and KV cache) fits, chosen from the model as loaded; then
    the check `make` builds for the options at that count (one device keeps
    no plan: it has no layers to pin). The table of the counts tried leads
    the summary."""

    failed = "a device program failed on Forge"
    forge_python = ""  # the inner strategy's, once it has one

    def __init__(self, options: CheckOptions, make: Callable[[CheckOptions], Strategy]):
        self.options, self.make = options, make
        self.mode = "--device-memory"
        # it chooses the count, for a tensor-parallel program (not a split's)
        at_two = make(replace(options, compile=options.compile.at(2))).takes
        self.takes = at_two - {"devices", "fallback"} | {"device_memory", "max_devices"}
        self.inner: Strategy | None = None
        self.table: list[str] = []

    def prepare(self, loaded: Loaded) -> Loaded:
        o = self.options
        if o.stages > 1:
            devices, self.table = _sized_stages(loaded, o)
        else:
            sizing = _sized(loaded, o.compile, steps=o.steps, max_length=o.max_length, growing_cache=o.growing_cache)
            devices, self.table = sizing.devices, [*sizing.table, f"devices: {sizing.devices}"]
        self.inner = self.make(replace(o, compile=o.compile.at(devices)))
        self.failed = self.inner.failed
        try:
            return self.inner.prepare(loaded)
        finally:
            self.forge_python = self.inner.forge_python

    def module(self) -> ModuleOp | None:
        return self.inner.module() if self.inner is not None else None

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        assert self.inner is not None
        try:
            ran = self.inner.run(prepared, feeds, reference, folder)
        finally:
            self.forge_python = self.inner.forge_python
        ran.summary = "\n".join(filter(None, [*self.table, ran.summary]))
        return ran


def size_devices(
    source,
    options: CompileOptions,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    steps: int = 0,
    max_length: int = 0,
    growing_cache: bool = False,
):
    """`--device-memory BYTES` (`options.device_memory`): the smallest device
    count up to `options.max_devices` whose per-device parameters and KV
    cache fit (`transforms/tp/sizing.py`), at the sizes the inputs or
    `shapes`/`dims` give, compiled as `options` say; for `--decode steps`,
    with the static cache that decode runs (unless `growing_cache`)."""
    return _sized(load_checked(source, inputs, shapes=shapes, dims=dims), options, steps=steps,
                  max_length=max_length, growing_cache=growing_cache)


def _sized_stages(loaded: Loaded, options: CheckOptions) -> tuple[int, list[str]]:
    """`--stages S --device-memory`: the smallest P whose share of every
    stage fits, each stage measured as it is cut (its own layers' weights
    and KV cache, a decode's at its static cache's length); the table of
    each stage."""
    import tempfile

    from forge_opt.frontends.onnx import load_model
    from forge_opt.plan.folder import read_split

    o = options
    resolved, positions = resolve_model(loaded.model, loaded.sizes, loaded.base), o.compile.static_cache
    if o.steps and not o.growing_cache:  # a decode's stages hold its static cache's positions
        static = _static_decode(resolved.module, loaded.model, o.steps, o.max_length)
        if static is not None:
            positions, resolved = static[0], resolve_model(loaded.model, InputShapes.of(static[1]), loaded.base)
    with tempfile.TemporaryDirectory() as tmp:
        split_resolved(resolved, Path(tmp), stages=o.stages, static_cache=positions)
        stages = [Loaded(*load_model(g.model_path), None, InputShapes()) for g in read_split(Path(tmp))[1]]

        def size(k: int, start: int = 1, table: list[str] | None = None):
            try:
                return _sized(stages[k], o.compile, steps=0, max_length=0, growing_cache=True, start=start,
                              table=table)
            except ForgeOptError as e:
                raise ForgeOptError(f"--stages {o.stages}, stage {k}: {e}") from None

        sizings = [size(k) for k in range(len(stages))]
        devices = max(s.devices for s in sizings)
        while any(s.devices < devices for s in sizings):  # a stage that fit on fewer, measured at this count
            sizings = [s if s.devices >= devices else size(k, devices, s.table) for k, s in enumerate(sizings)]
            devices = max(s.devices for s in sizings)
    table = [line for k, s in enumerate(sizings) for line in (f"stage {k}:", *s.table)]
    return devices, [*table, f"devices: {devices} a stage"]


def _sized(loaded: Loaded, options: CompileOptions, *, steps: int, max_length: int, growing_cache: bool,
           start: int = 1, table: list[str] | None = None):
    """`size_devices` of a model loaded, from `start` devices up (a search
    resumed: its `table`)."""
    import tempfile

    from xdsl.context import Context

    from forge_opt.transforms.pipelines import OnnxToForgePass
    from forge_opt.transforms.tp.sizing import choose_devices

    if not options.device_memory:
        raise ForgeOptError("size_devices sizes for a device's memory: give options with device_memory")
    resolved = resolve_model(loaded.model, loaded.sizes, loaded.base)
    static_cache = 0
    if steps and not growing_cache:
        static = _static_decode(resolved.module, loaded.model, steps, max_length)
        if static is not None:
            static_cache = static[0]
            resolved = resolve_model(loaded.model, InputShapes.of(static[1]), loaded.base)
    sized = OnnxToForgePass.of(replace(options, static_cache=static_cache))
    module = resolved.module.clone()  # the passes before sharing run on it
    sizing = sized.size(Context(), module, start)
    if table is not None:
        sizing.table = [*table, *sizing.table[1:]]
    # the estimate counts the program's weights; what a device stores is what the writer writes (the
    # constants its modules compute, a block each segment declares): each count chosen is written to see
    while sizing.devices > 1:
        with tempfile.TemporaryDirectory() as tmp:
            written = write_parallel(compile_parallel(resolved, sized.at(sizing.devices)), Path(tmp) / "tp")
        stored = max(d.stored_bytes for d in written.devices)
        if stored + sizing.cache <= sized.memory:
            break
        sizing.table.append(f"{sizing.devices:<8} {stored:>14,} {sizing.cache:>12,} {stored + sizing.cache:>14,}  "
                            "no: as the writer stores it")
        # the next count that fits by the estimate (past max_devices: none, and the error with the table)
        sizing = choose_devices(module, sized, start=sizing.devices + 1, table=sizing.table)
    return sizing


def _static_decode(module: ModuleOp, model, steps: int, max_length: int) -> tuple[int, dict] | None:
    """The positions of the static cache `--decode steps` runs `module`'s
    decoder with, and the input shapes its program takes; None where the
    model has no cache to make static (--decode says why)."""
    from forge_opt.check.static_cache import cache_positions, past_length, to_static
    from forge_opt.dialects.tir_base import shape_of
    from forge_opt.interpreters.run import main_func
    from forge_opt.targets.forge_python import input_names
    from forge_opt.transforms.static_cache import POSITION, cache_pairs

    func = main_func(module)
    # zeros of the inputs' shapes, taking no memory: to_static gives the static program's
    feeds = {name: np.broadcast_to(np.zeros((), np.int64), shape_of(arg.type))
             for name, arg in zip(input_names(func), func.args)}
    pairs = cache_pairs(feeds, (o.name for o in model.graph.output))
    if not pairs or "input_ids" not in feeds:
        return None
    length = cache_positions(past_length(feeds, pairs), feeds["input_ids"].shape[1], steps, max_length)
    return length, {name: a.shape for name, a in to_static(feeds, pairs, length).items() if name != POSITION}
