"""`forge-check --stages S`: the model as a pipeline of S stages
(`split/stages.py`), each converted and run as forge-split runs it, checked
against onnxruntime and, bit for bit, against the one-stage program: a
pipeline moves activations between devices and computes nothing else, so
any difference is an error of the cut."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL
from forge_opt.check.driver import Loaded
from forge_opt.check.model import OneDevice
from forge_opt.check.options import CheckOptions, Tolerances, parse_executor
from forge_opt.check.report import CheckReport
from forge_opt.check.run import Program, Ran, check_with
from forge_opt.check.split import Parallel
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.engine import compile_model
from forge_opt.execution.oracle import Expected, graph_inputs
from forge_opt.execution.xla import executed_by_xla
from forge_opt.frontends.onnx import Resolved, load_model, resolve_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.plan.folder import read_split
from forge_opt.plan.graph_infos import Plan
from forge_opt.plan.onnx_annotations import annotate_stages, save_annotated, stage_pins
from forge_opt.split.api import convert, require_static_inputs, run_split, split_resolved
from forge_opt.split.micro_batches import cut_inputs, join_outputs, micro_shapes
from forge_opt.split.mpi import run_mpi
from forge_opt.split.parallel import compile_parallel
from forge_opt.split.partition import Partition
from forge_opt.split.runner import agreed
from forge_opt.split.stages import schedule_report, stage_of_nodes
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.stage_cuts import Cut
from forge_opt.transforms.tp.plan_file import model_and_name


class Stages:
    """The pipeline's stages, each a device sub-model of contiguous nodes,
    run in turn on the stand-in as converted."""

    takes = frozenset({"stages", "freeze", "devices", "mesh", "mesh_layout", "mpi", "timeout", "annotate", "plan",
                       "executor", "tt_mlir", "micro_batches"})
    failed = "a stage failed on Forge"
    forge_python = ""

    def __init__(self, options: CheckOptions):
        self.options = options
        self.mode = f"--stages {options.stages}"
        self.resolved: Resolved | None = None
        self.given: Loaded | None = None  # the model as the user gave it: what --annotate annotates
        self.part: dict[str, tuple[int, ...]] = {}  # with --micro-batches: each input's shape in one part
        self.in_parts: Resolved | None = None  # and the model resolved for it, which the stages are cut from
        self.cut: Cut | None = None  # where the stages were cut, and what each holds and sends

    def prepare(self, loaded: Loaded) -> Loaded:
        o = self.options
        if o.executor == "xla" and (o.mpi or o.compile.device_count > 1):
            raise ForgeOptError("--stages --executor xla runs each stage on one XLA device: leave out --devices, "
                                "--mesh and --mpi")
        self.given = loaded
        self.resolved = resolve_model(loaded.model, loaded.sizes, loaded.base)
        if loaded.inputs is None:
            require_static_inputs(self.resolved.model)
        prepared = Loaded(self.resolved.model, loaded.base, loaded.inputs, InputShapes())  # its sizes are fixed
        if o.micro_batches > 1:  # the stages are compiled for one part of the batch
            whole = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph_inputs(prepared.model)}
            self.part = micro_shapes(whole, o.micro_batches)
            fixed = [i.name for i in graph_inputs(loaded.model) if i.type.tensor_type.shape.dim[:1]
                     and i.type.tensor_type.shape.dim[0].HasField("dim_value")]
            if fixed:
                raise ForgeOptError(f"--micro-batches {o.micro_batches}: the model's input '{fixed[0]}' has a fixed "
                                    f"batch of {whole[fixed[0]][0]} (axis 0), and the stages are compiled for "
                                    f"{self.part[fixed[0]][0]}: export it with a symbolic batch")
            self.in_parts = resolve_model(loaded.model, InputShapes(self.part), loaded.base)
        return prepared

    def module(self) -> ModuleOp | None:
        return None if self.resolved is None else self.resolved.module

    def build(self, model: ModelProto, base: Path | None, shapes: InputShapes, folder: Path) -> tuple[Program, str]:
        """The pipeline for `shapes` (a decode's step), run here or as S·P
        MPI processes, which must agree; and its schedule."""
        report, _, plan = self._split(resolve_model(model, shapes, base), folder)
        o = self.options
        if not o.mpi:
            return (lambda feeds: run_split(folder, feeds)), report
        processes = o.stages * o.compile.device_count

        def program(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            per_process = run_mpi(folder, feeds, processes, o.timeout)
            return agreed(plan, per_process, "the pipeline's MPI processes")

        return program, report + f"\nunder MPI: {processes} processes"

    def run(self, prepared: Loaded, feeds: dict[str, np.ndarray], reference: Expected, folder: Path) -> Ran:
        ran = self._ran(prepared, feeds, folder)
        ran.cut = self.cut
        return ran

    def _ran(self, prepared: Loaded, feeds: dict[str, np.ndarray], folder: Path) -> Ran:
        assert self.resolved is not None
        summary, partition, _ = self._split(self.in_parts or self.resolved, folder / "split")
        self.cut = partition.cut
        notes = [self._annotate(partition)] if self.options.annotate else []
        if self.options.tt_mlir:
            notes.append(self._tt_mlir(folder))
        if self.options.executor == "xla":
            notes.append(executed_by_xla() + ", each stage, and the one-stage program")
        m = self.options.micro_batches
        got = run_split(folder / "split", feeds, executor=self.options.executor, micro_batches=m)
        s, devices = self.options.stages, self.options.compile.device_count
        if m > 1:
            b = next(iter(self.part.values()))[0]
            summary += f"\n{m} micro-batches of {b} through the stages, their outputs joined (a batch of {m * b})"
        if self.options.mpi:  # one process per device of each stage: each must return what this process computed
            per_process = run_mpi(folder / "split", feeds, s * devices, self.options.timeout, m)
            differ = [str(rank) for rank, outputs in enumerate(per_process)
                      if outputs.keys() != got.keys() or not all(np.array_equal(outputs[k], got[k], equal_nan=True)
                                                                  for k in got)]
            if differ:
                return Ran(got, summary=summary, notes=notes, problems=[
                    f"the MPI processes {', '.join(differ)} of {s * devices} return other outputs than the pipeline "
                    "run in this process"])
            summary += (f"\nunder MPI: {s * devices} processes, each returning the outputs of the run in this "
                        f"process ({len(partition.graphs)} stages)")
        # the same program in one stage: on one device, or tensor-parallel on the stages' P devices
        same = Parallel(self.options) if devices > 1 else OneDevice(self.options)
        if m > 1:  # built for one part too, and run on the same parts
            assert self.given is not None
            program = same.build(self.given.model, self.given.base, InputShapes(self.part), folder / "one")[0]
            one = join_outputs([program(part) for part in cut_inputs(self.part, feeds, m)])
        else:
            one = same.build(prepared.model, prepared.base, InputShapes(), folder / "one")[0](feeds)
        differ = {name: _distance(value, one[name]) for name, value in got.items()
                  if name in one and not np.array_equal(value, one[name], equal_nan=True)}
        if not differ:
            return Ran(got, summary=summary, notes=[*notes, f"every output of the {s} stages equals the one-stage "
                                                    "program's, bit for bit"])
        listed = ", ".join(f"{name} by up to {d:.3g}" for name, d in differ.items())
        if devices == 1:  # stages on one device each compute exactly what the one program computes
            return Ran(got, summary=summary, notes=notes, problems=[
                f"the {s} stages' outputs differ from the one-stage program's ({listed}): the cut changed what is "
                "computed"])
        # a stage boundary all-reduces the residual stream, which the one program carries on as partial sums
        # into the next layer: the same sums, added in another order
        return Ran(got, summary=summary, notes=[
            *notes, f"the {s} stages differ from the one-stage program on {devices} devices ({listed}): a stage "
            "boundary sums the partial residual stream, which the one program sums a layer later"])

    def _split(self, resolved: Resolved, folder: Path) -> tuple[str, Partition, Plan]:
        """The stages written into `folder` and converted (where the model's
        annotations cut them, with --plan-from-onnx); their report, the
        partition and the plan written."""
        s, devices, plan = self.options.stages, self.options.compile.device_count, self.options.compile.plan
        if s < 2:
            raise ForgeOptError(f"--stages {s}: a pipeline has 2 stages or more")
        stage_of = None
        if plan:
            model, name = model_and_name(plan)
            if not model:
                raise ForgeOptError(f"--plan {plan}: a pipeline's cuts come from a model's annotations "
                                    "(--plan-from-onnx), not from a plan file")
            stage_of = stage_pins(load_model(model)[0], name)
        mesh = self.options.compile.mesh
        partition, written = split_resolved(resolved, folder, stages=s, devices=devices, stage_of=stage_of,
                                            static_cache=self.options.compile.static_cache,
                                            mesh=self.options.compile.mesh_shape,
                                            mesh_layout=self.options.compile.mesh_layout)
        convert(folder)
        assert partition.cut is not None
        m = self.options.micro_batches  # the schedule of the run, beside the usual counts
        report = schedule_report(partition.cut, sorted({1, s, 4 * s, m}))
        if devices > 1:
            on = f"a {mesh} mesh of " if mesh else ""
            report += f"\neach stage tensor-parallel on {on}{devices} devices ({s} x {devices} = {s * devices} devices)"
        return report, partition, written

    def _tt_mlir(self, folder: Path) -> str:
        """tt-mlir on each stage's program (its StableHLO form, for its P
        devices): the report's line, naming the first stage it refuses."""
        from forge_opt.execution.tt_mlir import compile_stablehlo
        from forge_opt.targets.stablehlo import stablehlo_text

        kept = self.options.tt_mlir_dumps
        dumps = Path(kept) if kept else folder / "tt_mlir"
        results = []
        for g in read_split(folder / "split")[1]:
            model = onnx.load(g.model_path, load_external_data=False)  # the importer reads the weights' files
            options, base = self.options.compile, g.model_path.parent
            module = compile_model(model, base, options).module if options.device_count == 1 else \
                compile_parallel(resolve_model(model, InputShapes(), base), options)
            result = compile_stablehlo(stablehlo_text(module), dumps / f"stage_{g.entry.stage}")
            if not result.compiled:
                return result.line(f"stage {g.entry.stage} ")
            results.append(result)
        return results[0].line(f"each of the {len(results)} stages ") + (f"; its IR in {dumps}" if kept else "")

    def _annotate(self, partition: Partition) -> str:
        """`--annotate OUT`: the pipeline as a configuration of the model the
        user gave (each node the first stage that runs it)."""
        assert self.given is not None
        stage_of = stage_of_nodes(partition.graphs)
        s, devices = self.options.stages, self.options.compile.device_count
        return save_annotated(self.given.model, self.given.base, self.options.annotate,
                              lambda m: annotate_stages(m, stage_of, s, devices), what="nodes")


def check_stages(
    source,
    stages: int,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    devices: int = 1,
    mpi: bool = False,
    rtol: float = RTOL,
    atol: float = ATOL,
    min_pcc: float = MIN_PCC,
    seed: int = 0,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    mesh: str = "",
    executor: str = "standin",
    tt_mlir: bool = False,
    micro_batches: int = 1,
) -> CheckReport:
    """`forge-check --stages S [--devices P | --mesh RxC] [--mpi] [--executor xla] [--tt-mlir]
    [--micro-batches M]` (`Stages`)."""
    return check_with(source, lambda: CheckOptions(
        inputs, Tolerances(rtol, atol, min_pcc), seed, shapes, dims, CompileOptions(devices, mesh=mesh), mpi=mpi,
        stages=stages, executor=parse_executor(executor), tt_mlir=tt_mlir, micro_batches=micro_batches), Stages)


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.dtype.kind not in "fc":
        return float(np.count_nonzero(a != b))
    return float(np.nanmax(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
