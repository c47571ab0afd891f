"""`split_model`, `convert` and `run_split`: AutoSplit's split, convert and run
steps over a folder."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from onnx import ModelProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import write_text
from forge_opt.frontends.onnx import Resolved, load_model, resolve_model
from forge_opt.frontends.onnx.shapes import InputShapes, is_known, symbols_hint
from forge_opt.plan.folder import check_folder, clear_folder, read_split
from forge_opt.plan.graph_infos import DEVICE, INFOS, LINE_LAYOUT, MESH_LAYOUTS, Branches, Loop, Plan
from forge_opt.split.control_flow import control_flow_entry, is_host_control_flow, subgraph_models
from forge_opt.split.folder import SOURCE, converted_module, model_digest, parallel_dir, write_split
from forge_opt.split.parallel import tensor_parallel
from forge_opt.split.partition import Partition, make_partition
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.placement import place
from forge_opt.transforms.tp.mesh import mesh_grid


def split_model(
    source: str | os.PathLike | bytes | ModelProto,
    folder: str | os.PathLike,
    *,
    cpu_ops: tuple[str, ...] = (),
    cpu_nodes: tuple[str, ...] = (),
    min_device_ops: int = 1,
    layout: str = "NCHW",
    force: bool = False,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    devices: int = 1,
    base: Path | None = None,
    stages: int = 1,
    stage_of: Mapping[str, int] | None = None,
    static_cache: int = 0,
    mesh: str = "",
    mesh_layout: str = LINE_LAYOUT,
) -> tuple[Partition, Plan]:
    """Split the model into `folder`: its sub-models and `graph_infos.json`
    (the partition, and the plan as written).
    `shapes` and `dims` fix symbolic input sizes (as `import_onnx`); the
    split is of the model with its shapes folded and known control flow
    resolved. `devices` (P > 1): each device sub-model is converted for P
    devices, tensor-parallel (the plan's `parallel`); `mesh` (`RxC`): on
    an R×C mesh of them (`collectives-on-mesh`), laid out as `mesh_layout`
    says (`--mesh-layout`). `base`: the folder of
    the model's external data, for a model given as a `ModelProto`.
    `stages` (S > 1): a pipeline, S device sub-models of contiguous nodes
    (`stages.py`), cut where `stage_of` (a stage by node name) says if given.
    `static_cache` (L > 0, the past's size among `dims`): each device
    sub-model keeps its layers' KV cache of L positions."""
    if devices < 1:
        raise ForgeOptError(f"--devices {devices}: a split runs on 1 device or more")
    grid = mesh_grid(devices, mesh, flags=True) if mesh else None
    if mesh_layout not in MESH_LAYOUTS or (mesh_layout != LINE_LAYOUT and grid is None):
        raise ForgeOptError(f"--mesh-layout {mesh_layout}: give one of {', '.join(MESH_LAYOUTS)}, with --mesh")
    if grid is not None:
        devices = grid[0] * grid[1]
    if stages < 1:
        raise ForgeOptError(f"--stages {stages}: a pipeline has 1 stage or more")
    model, loaded_from = load_model(source)
    if not model.graph.output:
        raise ForgeOptError("the model has no outputs: a split of it would compute nothing")
    resolved = resolve_model(model, InputShapes.of(shapes, dims), base or loaded_from)
    out = Path(folder)
    check_folder(out, resolved.base, force, "--force replaces its split")
    return split_resolved(resolved, out, cpu_ops=cpu_ops, cpu_nodes=cpu_nodes, min_device_ops=min_device_ops,
                          layout=layout, devices=devices, stages=stages, stage_of=stage_of, static_cache=static_cache,
                          mesh=grid, mesh_layout=mesh_layout)


def split_resolved(resolved: Resolved, folder: Path, *, cpu_ops: tuple[str, ...] = (), cpu_nodes: tuple[str, ...] = (),
                   min_device_ops: int = 1, layout: str = "NCHW", devices: int = 1, stages: int = 1,
                   stage_of: Mapping[str, int] | None = None, static_cache: int = 0,
                   mesh: list[int] | None = None, mesh_layout: str = LINE_LAYOUT) -> tuple[Partition, Plan]:
    """`split_model` of a model resolved (`resolve_model`) into `folder`,
    which is checked; `static_cache` (L > 0): the device sub-models keep
    their layers' KV cache at L positions (the model resolved with its past
    at L), as `convert` compiles them."""
    require_static_inputs(resolved.model)
    return _split(resolved, folder, cpu_ops, cpu_nodes, min_device_ops, layout, check_pins=True, devices=devices,
                  stages=stages, stage_of=stage_of, static_cache=static_cache, mesh=mesh, mesh_layout=mesh_layout)


def _split(
    resolved: Resolved, folder: Path, cpu_ops: tuple[str, ...], cpu_nodes: tuple[str, ...], min_device_ops: int,
    layout: str, check_pins: bool, devices: int = 1, stages: int = 1, stage_of: Mapping[str, int] | None = None,
    static_cache: int = 0, mesh: list[int] | None = None, mesh_layout: str = LINE_LAYOUT,
) -> tuple[Partition, Plan]:
    """The split of a resolved model into `folder`; each run-time If's
    branches, or Loop's body, split in turn into folders beside its
    sub-model (`control_flow.py`)."""
    model, base = resolved.model, resolved.base
    placements = place(resolved.module, cpu_ops, cpu_nodes, check_pins=check_pins)
    partition = make_partition(model, placements, resolved.types, min_device_ops, base, stages, stage_of)
    if check_pins:  # the whole model's split, now known to be made: what an older one left goes
        clear_folder(folder)
    control: dict[int, Branches | Loop] = {}
    for n, sub in enumerate(partition.graphs):
        if len(sub.nodes) != 1 or not is_host_control_flow(sub.nodes[0]):
            continue
        node = sub.nodes[0]
        models = subgraph_models(model, node, partition.types)
        folders = {which: f"graph_{n}_{which}" for which in models}
        for which, sub_model in models.items():
            # pins name nodes of the whole model: a subgraph holds some of them
            _split(resolve_model(sub_model, base=base), folder / folders[which], cpu_ops, cpu_nodes, min_device_ops,
                   layout, False, devices, mesh=mesh, mesh_layout=mesh_layout)
        control[n] = control_flow_entry(node, folders, models)
    plan = write_split(folder, model, partition, base=base, force=True, layout=layout, control=control,
                       parallel=devices, static_cache=static_cache, mesh=mesh, mesh_layout=mesh_layout)
    return partition, plan


def describe_split(folder: str | os.PathLike) -> str:
    """Each sub-model's device, in order; a run-time If or Loop as its
    branches' or body's splits: `tt, cpu If[then: tt; else: tt, cpu], tt`."""
    parts = []
    for g in read_split(Path(folder))[1]:
        if g.subgraphs:
            kind = "If" if g.entry.branches is not None else "Loop"
            parts.append(f"cpu {kind}[" + "; ".join(f"{w}: {describe_split(p)}" for w, p in g.subgraphs.items()) + "]")
        else:
            parts.append(g.device)
    return ", ".join(parts)


def require_static_inputs(model: ModelProto) -> None:
    """A split of unknown sizes would place every op whose lowering needs
    them on the CPU and still run: refuse it, as forge-opt does, with the
    flags that fix the sizes."""
    initializers = {t.name for t in model.graph.initializer}
    unknown: list[tuple[str, list[str | int]]] = []
    for i in model.graph.input:
        tp = i.type
        if i.name in initializers or tp.WhichOneof("value") != "tensor_type":
            continue
        if not tp.tensor_type.HasField("shape"):
            unknown.append((i.name, ["?", "..."]))
        elif any(not is_known(d) for d in tp.tensor_type.shape.dim):
            unknown.append((i.name, [d.dim_value if is_known(d) else (d.dim_param or "?")
                                     for d in tp.tensor_type.shape.dim]))
    if unknown:
        raise ForgeOptError(symbols_hint(unknown))


def convert(folder: str | os.PathLike) -> list[Path]:
    """Compile each device sub-model to Forge Python in its `context_dir`
    (the module, its computed constants and its `forge` IR), one that keeps
    some of the plan's static KV cache with it; the modules written."""
    from forge_opt.execution.engine import compile_model
    from forge_opt.targets.forge_python import save_constants

    written = []
    plan, graphs = read_split(Path(folder))
    if plan.is_parallel:
        raise ForgeOptError(f"{folder}: is a tensor-parallel plan, whose modules forge-opt compiled already: "
                            "`forge-split run` runs it")
    for g in graphs:
        for sub_folder in g.subgraphs.values():
            written += convert(sub_folder)
        if g.device != DEVICE or g.context_dir is None:
            continue
        mesh = f"{plan.mesh[0]}x{plan.mesh[1]}" if plan.mesh else ""
        options = CompileOptions(plan.parallel, static_cache=plan.cache_of(g.entry), mesh=mesh,
                                 mesh_layout=plan.mesh_layout if mesh else LINE_LAYOUT)
        if plan.parallel > 1:  # a tensor-parallel plan of its own, run by the host runner
            tensor_parallel(g.model_path, parallel_dir(g), options, force=True, base=g.model_path.parent)
            written.append(parallel_dir(g) / INFOS)
            continue
        compiled = compile_model(load_model(g.model_path)[0], g.model_path.parent, options, stem=f"graph_{g.index}")
        g.context_dir.mkdir(parents=True, exist_ok=True)
        path = converted_module(g)
        assert path is not None
        write_text(path, compiled.emitted.source)
        save_constants(compiled.emitted, g.context_dir)
        write_text(g.context_dir / f"graph_{g.index}.mlir", str(compiled.module) + "\n")
        write_text(g.context_dir / SOURCE, json.dumps({"model_sha256": model_digest(g.model_path)}) + "\n")
        written.append(path)
    return written


def run_split(folder: str | os.PathLike, inputs, mode: str = "device", recompile: bool = False,
              loop_seconds: float | None = None, record: list | None = None, executor: str = "standin",
              micro_batches: int = 1):
    """The model's outputs, by name, from its split in `folder`
    (`runner.run_split`): device sub-models run as `convert` wrote them, or
    compiled anew from their ONNX with `recompile`, or (`executor="xla"`)
    compiled anew and run as StableHLO on XLA CPU; a run-time Loop may run
    `loop_seconds` (default 60); `record` collects each device sub-model's
    inputs and outputs; `micro_batches` M: the inputs are M times the
    split's batch, run in M parts (`split/micro_batches.py`)."""
    from forge_opt.split import runner  # the interpreters and onnxruntime: only to run

    if not isinstance(inputs, dict):
        raise ForgeOptError("run_split takes the inputs as a dict by input name")
    return runner.run_split(Path(folder), inputs, mode, recompile,
                            loop_seconds=runner.LOOP_SECONDS if loop_seconds is None else loop_seconds,
                            record=record, executor=executor, micro_batches=micro_batches)


def run_parallel(folder: str | os.PathLike, inputs, member=None) -> list[dict]:
    """Each device's outputs, by name, from the tensor-parallel plan in
    `folder` (`runner.run_parallel`: simulated devices, or `member`, this
    process's device of an MPI job)."""
    from forge_opt.split import runner

    return runner.run_parallel(Path(folder), inputs, member)


__all__ = [
    "convert", "describe_split", "run_parallel", "run_split", "split_model", "tensor_parallel",
]
