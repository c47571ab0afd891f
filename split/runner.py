"""Running a split (AutoSplit's AutoRunner): the sub-models one after
another, CPU ones on onnxruntime and device ones as the Forge modules
`convert` wrote into their `context_dir` (what ships), run on the stand-in,
each fed only tensors `graph_infos.json` lists. A device sub-model with no
converted module, or one that fails to load, is an error naming it;
`recompile=True` compiles each from its ONNX instead (for debugging the
compiler, not for checking a deployment).

`mode="cpu"` runs the device sub-models' ONNX on onnxruntime too, which
tells a partitioning bug (the outputs differ in this mode) from a lowering
bug (they differ only in the device mode).

A tensor-parallel plan (`graph_infos.json` with a `grid`) runs its
segments device by device and its collectives between them
(`run_parallel`): simulated here, or one MPI process per device. A split
for several devices (`parallel`: P) runs each device sub-model as its own
tensor-parallel plan. Under MPI every process walks the split: the host's
work (CPU sub-models, the choices of control flow's) is done by process 0
and given to all, and each device sub-model's outputs are joined from all.
A pipeline's stage (`stage` in `graph_infos.json`) runs on its own P
processes only, which send each later stage's same device the activations
it reads (the plan's `sends`), point to point; the model's outputs go to
every process at the end.
"""

from __future__ import annotations

import functools
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError
from forge_opt.execution.engine import as_program_input, compile_model, on_xla, run_compiled
from forge_opt.execution.oracle import check_feeds, expected_outputs, graph_inputs
from forge_opt.frontends.onnx.values import as_loaded
from forge_opt.interpreters.forge_standin import ForgeCallError, forge_instance, run_instance
from forge_opt.interpreters.shard import Collectives, MpiMember, block, run_threads
from forge_opt.plan.folder import SplitGraph, read_split
from forge_opt.plan.graph_infos import BRANCHES, DEVICE, INFOS, Branches, Collective, Loop, Plan
from forge_opt.split.folder import converted_from_this, converted_module, host_weights, parallel_dir, returned
from forge_opt.split.micro_batches import cut_inputs, join_outputs
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.static_cache import POSITION


def _load_converted(g: SplitGraph, model: onnx.ModelProto):
    """Device sub-model `g`'s converted Forge module, instantiated with its
    parameters; an error naming the module where it is missing or broken."""
    path = converted_module(g)
    if path is None or not path.is_file():
        raise ForgeOptError(
            f"graph_{g.index} ({g.device}): no converted Forge module"
            + (f" at {path}" if path is not None else " (no context_dir)")
            + ": run `forge-split convert` first (or `run --recompile` to compile the ONNX instead)"
        )
    if not converted_from_this(g):
        raise ForgeOptError(
            f"graph_{g.index} ({g.device}): its converted module {path} was not converted from {g.model_path.name} "
            "as it is now: run `forge-split convert` again (or `run --recompile`)"
        )
    try:
        return forge_instance(path.read_text(), str(path), as_loaded(model, g.model_path.parent))
    except ForgeCallError as e:
        raise ForgeOptError(f"graph_{g.index}: the converted module {path} does not load: {e}") from None
    except Exception as e:  # whatever the module's own code raises: it is the user's file now
        raise ForgeOptError(f"graph_{g.index}: the converted module {path} does not load: "
                            f"{type(e).__name__}: {e}") from None


def _run_module(g: SplitGraph, module, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """A device sub-model's module on its inputs; a failure of its own code
    (not a Forge rule: those stay ForgeCallError) is an error naming it."""
    try:
        return run_instance(module, inputs)
    except ForgeCallError:
        raise
    except Exception as e:  # whatever the module's calls raise on these inputs
        raise ForgeOptError(f"graph_{g.index} ({g.device}): its Forge module failed on its inputs: "
                            f"{type(e).__name__}: {e}") from None


#: seconds a run-time Loop may run before the run stops it (a while loop whose condition never falls)
LOOP_SECONDS = 60.0


@dataclass(frozen=True)
class _How:
    mode: str = "device"
    recompile: bool = False
    member: MpiMember | None = None  # this process's device in an MPI job; else all simulated here
    loop_seconds: float = LOOP_SECONDS  # how long a run-time Loop may run
    # with a list: each device sub-model's outputs and what made them, appended as (label, output names,
    # device outputs, its model, its folder, its inputs), for a check to compare with onnxruntime
    record: list | None = None
    executor: str = "standin"  # what runs a device sub-model: its converted module, or XLA (recompiled)
    micro_batches: int = 1  # the inputs cut along axis 0 into this many parts, run one after another
    # each device sub-model's program, made once a run: a Loop's body runs its sub-models at every iteration
    programs: dict = field(default_factory=dict)

    def on_host(self, compute, *args):
        """`compute(*args)`, done once by the host."""
        if self.member is None:
            return compute(*args)
        return self.member.from_host(lambda: compute(*args))

    def every_device(self, folder: Path, inputs: dict[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
        """Each device's outputs of the tensor-parallel plan in `folder`."""
        if self.member is None:
            return run_parallel(folder, inputs)
        return self.member.from_each(run_parallel(folder, inputs, self.member)[0])


def run_split(
    folder: Path, inputs: dict[str, np.ndarray], mode: str = "device", recompile: bool = False,
    member: MpiMember | None = None, loop_seconds: float = LOOP_SECONDS, record: list | None = None,
    executor: str = "standin", micro_batches: int = 1,
) -> dict[str, np.ndarray]:
    """The model's outputs (by name) from its split in `folder`; with
    `member`, as one process of an MPI job with one process per device;
    a run-time Loop stops the run after `loop_seconds`; with `record`, each
    device sub-model's inputs and outputs are kept (`_How.record`); with
    `executor="xla"`, each device sub-model is compiled again and its
    StableHLO form run on XLA CPU; with `micro_batches` M, the inputs are
    M times the split's batch, run in M parts (`micro_batches.py`)."""
    if mode not in ("device", "cpu"):
        raise ForgeOptError(f"mode '{mode}' is neither 'device' nor 'cpu'")
    if micro_batches < 1:
        raise ForgeOptError(f"--micro-batches {micro_batches}: give 1 or more")
    return _run(folder, inputs, _How(mode, recompile, member, loop_seconds, record, executor, micro_batches))


def _run(folder: Path, inputs: dict[str, np.ndarray], how: _How) -> dict[str, np.ndarray]:
    plan, graphs = read_split(folder)
    if plan.is_parallel:
        if how.micro_batches > 1:
            raise ForgeOptError(f"{folder}: --micro-batches runs a split's sub-models (forge-split), not a "
                                "tensor-parallel plan")
        if how.mode == "cpu":
            raise ForgeOptError(f"{folder}: a tensor-parallel plan has no CPU mode (its segments are Forge modules)")
        return agreed(plan, how.every_device(folder, inputs), str(folder))
    devices = plan.parallel
    if how.member is not None and plan.device_count != how.member.size:
        raise ForgeOptError(f"{folder}: the split is for {plan.device_count} device{'s' * (plan.device_count > 1)} "
                            f"but the run has {how.member.size}")
    # under MPI a pipeline's stage runs on its own processes (P each), which send later stages what they read
    stage = None if how.member is None or plan.stages == 1 else how.member.rank // devices
    stage_how = how if stage is None else replace(
        how, member=how.member.group(stage) if devices > 1 else None)  # type: ignore[union-attr]
    parts = [inputs]
    if how.micro_batches > 1:
        if plan.static_cache is not None:
            raise ForgeOptError(f"{folder}: a split that keeps a static KV cache runs one batch at a time: "
                                "--micro-batches takes a split without --max-length")
        parts = cut_inputs({x: plan.whole_shape(x) for x in plan.inputs()}, inputs, how.micro_batches)
    # each part through every stage in turn: under MPI a stage goes on to the next part as it sends this one
    runs = [_walk(plan, graphs, part, how, stage, stage_how) for part in parts]
    if stage is not None:
        for values in runs:
            _outputs_to_host(plan, graphs, values, how.member, devices)  # type: ignore[arg-type]
    outputs = [returned(plan, folder, values) for values in runs]
    return outputs[0] if len(outputs) == 1 else join_outputs(outputs)


def _walk(plan: Plan, graphs: list[SplitGraph], inputs: dict[str, np.ndarray], how: _How, stage: int | None,
          stage_how: _How) -> dict[str, np.ndarray]:
    """Every value the split's sub-models compute from `inputs`, run in
    order (under MPI, this process's stage's and those sent to it)."""
    devices = plan.parallel
    values = _model_inputs(plan, inputs)
    for g in graphs:
        host_weights(g, values)
        if g.entry.branches is not None:
            _run_branch(g, g.entry.branches, values, how)
        elif g.entry.loop is not None:
            _run_loop(g, g.entry.loop, plan, values, how)
        if g.subgraphs:
            for name in g.outputs:
                values[name] = np.asarray(values[name]).astype(plan.tensors[name].dtype, copy=False)
            continue
        # the weights stay in their files: onnxruntime and the importer read them there
        model = onnx.load(g.model_path, load_external_data=False)
        on_device = g.device == DEVICE and how.mode == "device"
        if on_device and stage is not None:
            _pipeline_stage(g, plan, model, values, how, stage_how)
            continue
        feeds, cache = _feeds(g, plan, values)
        if on_device:
            outputs = _device_outputs(g, model, feeds, devices, how, cache)
        else:
            # onnxruntime, or ONNX's reference implementation where onnxruntime cannot
            outputs = how.on_host(_cpu_outputs, model, g.model_path.parent, feeds)
        _keep(g, plan, outputs, values)
    return values


def _feeds(g: SplitGraph, plan: Plan, values: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
    """What sub-model `g` is fed, and the positions of the static KV cache it keeps (0: none)."""
    feeds = {x: values[x] for x in g.inputs}
    cache = plan.cache_of(g.entry)
    if cache:  # its module keeps its layers' cache, and takes the position a step writes at
        feeds[POSITION] = values[POSITION]
    return feeds, cache


def _keep(g: SplitGraph, plan: Plan, outputs: list, values: dict[str, np.ndarray]) -> None:
    if len(outputs) != len(g.outputs):
        raise ForgeOptError(f"graph_{g.index} ({g.device}): returned {len(outputs)} outputs where its entry lists "
                            f"{len(g.outputs)} ({', '.join(g.outputs)})")
    for name, value in zip(g.outputs, outputs):
        # Forge holds int64 and bool as int32: the next graph gets the declared type back
        values[name] = np.asarray(value).astype(plan.tensors[name].dtype, copy=False)


def _pipeline_stage(g: SplitGraph, plan: Plan, model: onnx.ModelProto, values: dict[str, np.ndarray],
                    how: _How, stage_how: _How) -> None:
    """Stage `g` of a pipeline under MPI (P processes a stage, `how.member`
    the whole job's): its own processes run it and send what later stages
    read (the plan's `sends`), device d to device d of each; the processes
    of a stage that reads one receive it; the others pass."""
    member, devices, k = how.member, plan.parallel, g.entry.stage or 0
    assert member is not None
    local, mine = member.rank % devices, member.rank // devices
    if mine == k:
        feeds, cache = _feeds(g, plan, values)
        _keep(g, plan, _device_outputs(g, model, feeds, devices, stage_how, cache), values)
    for send in (s for s in plan.sends if s.source == k):
        for j in send.to:
            if mine == k:
                member.send(values[send.tensor], to=j * devices + local)
            elif mine == j:
                values[send.tensor] = member.receive(source=k * devices + local)


def _outputs_to_host(plan: Plan, graphs: list[SplitGraph], values: dict[str, np.ndarray], member: MpiMember,
                     devices: int) -> None:
    """A pipeline's outputs under MPI, given to every process (the host's
    copy) by the first process of the stage that made each."""
    made_by = {x: g.entry.stage or 0 for g in graphs for x in g.outputs}
    for name in dict.fromkeys(x for x in plan.returned_tensors().values() if x in made_by):
        values[name] = member.from_rank(values.get(name), root=made_by[name] * devices)


def _device_outputs(g: SplitGraph, model: onnx.ModelProto, feeds: dict[str, np.ndarray], devices: int,
                    how: _How, cache: int = 0) -> list[np.ndarray]:
    """A device sub-model's outputs: its tensor-parallel plan's on P
    devices, or its module's (or, recompiled, XLA's) on one; `cache`: the
    positions of the static KV cache it keeps."""
    if devices > 1:
        return _run_parallel_graph(g, devices, feeds, how, cache)
    if how.recompile or how.executor == "xla":
        if g.model_path not in how.programs:
            compiled = compile_model(model, g.model_path.parent, CompileOptions(static_cache=cache))
            run = on_xla(compiled) if how.executor == "xla" else functools.partial(run_compiled, compiled)
            how.programs[g.model_path] = run, compiled.input_names
        run, names = how.programs[g.model_path]
        outputs = run([feeds[x] for x in names])
    else:
        # what the module was compiled for: a value of another shape (a Loop's growing one) is refused
        check_feeds(model, {x: v for x, v in feeds.items() if x != POSITION}, f"graph_{g.index} ({g.model_path.name})")
        order = [i.name for i in graph_inputs(model)] + ([POSITION] if POSITION in feeds else [])
        if g.model_path not in how.programs:
            how.programs[g.model_path] = _load_converted(g, model)
        outputs = _run_module(g, how.programs[g.model_path], [feeds[x] for x in order])
    if how.record is not None:
        how.record.append((f"graph_{g.index} ({g.model_path.name})", list(g.outputs), outputs, model,
                           g.model_path.parent, feeds))
    return outputs


def _model_inputs(plan: Plan, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The model's inputs the plan reads, each checked against the element
    type and the fixed sizes it was split or compiled for (an input split
    across the devices is whole here); float32 ones a bfloat16 program takes
    cast to it."""
    values = {}
    for name in plan.inputs():
        if name not in inputs:
            raise ForgeOptError(f"no value given for the model input '{name}'")
        dtype, shape = plan.tensors[name].dtype, plan.whole_shape(name)
        value = values[name] = as_program_input(np.asarray(inputs[name]), np.dtype(dtype))
        if np.dtype(dtype) != value.dtype:
            raise ForgeOptError(f"the input '{name}' is {value.dtype}, where the plan takes {dtype}")
        if len(shape) != value.ndim or any(0 <= d != v for d, v in zip(shape, value.shape)):
            raise ForgeOptError(f"the input '{name}' has shape {list(value.shape)}, where the plan takes {shape}")
    return values


def _cpu_outputs(model: onnx.ModelProto, folder: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return expected_outputs(model, folder, feeds).outputs


def _run_parallel_graph(g: SplitGraph, devices: int, feeds: dict[str, np.ndarray], how: _How, cache: int = 0):
    """A device sub-model of a split for several devices: its own
    tensor-parallel plan (written by `convert`)."""
    if how.recompile:
        from forge_opt.split.parallel import tensor_parallel

        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "parallel"
            tensor_parallel(g.model_path, folder, CompileOptions(devices, static_cache=cache), base=g.model_path.parent)
            return _parallel_outputs(g, folder, feeds, how)
    folder = parallel_dir(g)
    if not (folder / INFOS).exists():
        raise ForgeOptError(f"{g.model_path.name}: not converted for {devices} devices: no {folder / INFOS} "
                            "(run forge-split convert)")
    return _parallel_outputs(g, folder, feeds, how)


def _parallel_outputs(g: SplitGraph, folder: Path, feeds: dict[str, np.ndarray], how: _How) -> list[np.ndarray]:
    whole = agreed(read_split(folder)[0], how.every_device(folder, feeds), g.model_path.name)
    return [whole[name] for name in g.outputs]


def _flag(g: SplitGraph, what: str, value) -> bool:
    value = np.asarray(value)
    if value.size != 1:
        raise ForgeOptError(f"graph_{g.index}: the {what} has {value.size} elements, not one")
    return bool(value.reshape(-1)[0])


def _run_branch(g: SplitGraph, info: Branches, values: dict[str, np.ndarray], how: _How) -> None:
    """A run-time If on the host: the condition picks a branch, whose split
    runs with the outer values it reads; its outputs become the If's."""
    then, orelse = BRANCHES
    which = then if _flag(g, f"If's condition '{info.condition}'", values[info.condition]) else orelse
    outputs = _run(g.subgraphs[which], values, replace(how, micro_batches=1))  # the split takes the values it reads
    for result, inner in zip(info.results, info.of(which).outputs):
        if result:
            values[result] = outputs[inner]


def _run_loop(g: SplitGraph, info: Loop, plan: Plan, values: dict[str, np.ndarray], how: _How) -> None:
    """A run-time Loop on the host, as ONNX runs it: while the iteration is
    below the trip count (if any) and the condition holds (if any), the
    body's split runs on the iteration number, the condition, the carried
    values and the outer values it reads; the carried values' last values
    and the scan outputs stacked become the Loop's outputs."""
    body = info.body
    trips = int(np.asarray(values[info.trip_count]).reshape(-1)[0]) if info.trip_count else None
    going = _flag(g, "Loop's condition", values[info.condition]) if info.condition else True
    carried = [values[x] for x in info.initial]
    n = len(carried)
    scans: list[list[np.ndarray]] = [[] for _ in body.outputs[1 + n:]]
    step = 0
    started = time.monotonic()
    while going and (trips is None or step < trips):
        if time.monotonic() - started > how.loop_seconds:
            raise ForgeOptError(f"graph_{g.index}: the Loop ran {step} iterations in {how.loop_seconds:g} s and its "
                                "condition still holds (--loop-seconds raises the limit)")
        feeds = dict(values)
        feeds.update(zip(body.inputs, [np.array(step, np.int64), np.array(going), *carried]))
        outputs = _run(g.subgraphs["body"], feeds, replace(how, micro_batches=1))
        going = _flag(g, "Loop body's condition", outputs[body.outputs[0]])
        carried = [outputs[x] for x in body.outputs[1:1 + n]]
        for k, x in enumerate(body.outputs[1 + n:]):
            scans[k].append(outputs[x])
        step += 1
    results = info.results
    for result, value in zip(results[:n], carried):
        if result:
            values[result] = value
    for result, stacked in zip(results[n:], scans):
        if not result:
            continue
        if not stacked:  # no iteration ran: the declared type gives the empty stack's shape
            t = plan.tensors.get(result)
            if t is None or not t.shape or t.shape[0] != 0 or any(d < 0 for d in t.shape):
                raise ForgeOptError(f"graph_{g.index}: the Loop ran no iteration, and the shape of its scan "
                                    f"output '{result}' is unknown")
            values[result] = np.zeros(t.shape, t.dtype)
        else:
            values[result] = np.stack(stacked)


def _collect(step: Collective, value: np.ndarray, member: Collectives, mesh: list[int] | None) -> np.ndarray:
    if mesh is not None and step.mesh_axis is not None:  # among the devices of its row or column only
        member = member.along(mesh, [step.mesh_axis])
    if step.op == "all_reduce":
        return member.all_reduce(value, step.reduction or "sum")
    assert step.axis is not None  # the reader requires one of a gather and a scatter
    if step.op == "all_gather":
        return member.all_gather(value, step.axis)
    return block(member.all_reduce(value), step.axis, member.rank, member.size)


def run_parallel(folder: Path, inputs: dict[str, np.ndarray], member: Collectives | None = None):
    """The model's outputs from a tensor-parallel plan in `folder`: as the
    device `member` is (one MPI process), or, without one, as every device
    simulated in this process (a thread each); then the outputs of each
    device, which must agree."""
    plan, graphs = read_split(folder)
    if not plan.is_parallel:
        raise ForgeOptError(f"{folder}: is a split, not a tensor-parallel plan: run_split runs it")
    devices = plan.device_count
    if member is not None and member.size != devices:
        raise ForgeOptError(f"the plan is for {devices} devices but the run has {member.size}")
    after: dict[int, list[Collective]] = {}
    for step in plan.collectives:
        after.setdefault(step.after_graph, []).append(step)
    ranks = [member.rank] if member is not None else list(range(devices))
    # loaded here, in this thread: loading swaps in the stand-in modules
    loaded = {}
    weights: dict[Path, object] = {}  # a device's weights, mapped once for all its segments
    for rank in ranks:
        for g in graphs:
            mine = g.on(rank)
            assert mine.module_path is not None
            if mine.model_path not in weights:
                weights[mine.model_path] = as_loaded(onnx.load(mine.model_path, load_external_data=False),
                                                     mine.model_path.parent)
            source = mine.module_path.read_text()
            loaded[g.index, rank] = forge_instance(source, str(mine.module_path), weights[mine.model_path])

    whole = _model_inputs(plan, inputs)

    def device(m: Collectives) -> dict[str, np.ndarray]:
        values = {}
        for name, value in whole.items():  # an input split in the plan (a KV cache's past): the device's block
            t = plan.tensors[name]
            values[name] = value if t.split_axis is None else block(value, t.split_axis, *t.block_of(m.rank, m.size))
        for g in graphs:
            outs = run_instance(loaded[g.index, m.rank], [values[x] for x in g.inputs])
            for name, v in zip(g.outputs, outs):
                values[name] = np.asarray(v).astype(plan.tensors[name].dtype, copy=False)
            for step in after.get(g.index, []):
                values[step.output] = _collect(step, values[step.input], m, plan.mesh)
        return returned(plan, folder, values)

    if member is not None:
        return [device(member)]
    return run_threads(devices, device)


def assemble(plan: Plan, per_device: list[dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], list[str]]:
    """The model's outputs from every device's: an output split in the plan
    (a KV cache's present) joined from the devices' blocks, any other taken
    from device 0; and the names of those the devices disagree on."""
    source = plan.returned_tensors()
    first = per_device[0]
    whole, differ = {}, []
    for name, value in first.items():
        t = plan.tensors.get(source.get(name, name))
        if t is not None and t.split_axis is not None:
            blocks: dict[int, list[np.ndarray]] = {}  # (split by a mesh's rows: a row's devices hold one block)
            for rank, d in enumerate(per_device):
                blocks.setdefault(t.block_of(rank, len(per_device))[0], []).append(d[name])
            whole[name] = np.concatenate([blocks[k][0] for k in sorted(blocks)], axis=t.split_axis)
            if any(not _same(x, held[0]) for held in blocks.values() for x in held[1:]):
                differ.append(name)
        else:
            whole[name] = value
            if any(not _same(d[name], value) for d in per_device[1:]):
                differ.append(name)
    return whole, differ


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where both have NaN (a replicated output computed
    alike; bfloat16 too, whose numpy kind is not a float's)."""
    a, b = np.asarray(a), np.asarray(b)
    if dtypes.is_narrow_float(a.dtype) and a.dtype == b.dtype:
        a, b = a.astype(np.float32), b.astype(np.float32)
    return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc"))


def agreed(plan: Plan, per_device: list[dict[str, np.ndarray]], what: str) -> dict[str, np.ndarray]:
    """`assemble`'s outputs, where the devices must agree: their
    disagreement is an error naming `what` ran and the outputs."""
    whole, differ = assemble(plan, per_device)
    if differ:
        raise ForgeOptError(f"{what}: the devices' outputs differ ({', '.join(differ)})")
    return whole
