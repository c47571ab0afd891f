"""`forge-check --fallback`: check a model through the split path (device
where Forge can, CPU elsewhere) against onnxruntime on the whole model;
`forge-check --devices P`: through the tensor-parallel path."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL, compare_output
from forge_opt.check.engine import expected_outputs, index_bounds, random_inputs
from forge_opt.check.model import MISMATCH, NOT_COMPILED, CheckReport, bounded_note, frozen, verdict
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import import_model, load_model, resolved_model
from forge_opt.frontends.onnx_shapes import InputShapes
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.split.api import convert, describe_split, run_split, split_model
from forge_opt.split.folder import read_split
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble


def model_feeds(model, base, inputs: dict[str, np.ndarray] | None, seed: int, shapes: InputShapes | None = None):
    """The model's inputs by name: those given (each one there), or seeded
    random ones (indices inside the tables they index); and the report's
    note on how random ones were made."""
    initializers = {t.name for t in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in initializers]
    notes = []
    if inputs is None:
        bounds = index_bounds(model)
        inputs = dict(zip(names, random_inputs(import_model(model, base, shapes=shapes), seed, bounds)))
        notes = bounded_note(bounds, names, [inputs[n].dtype for n in names])
    missing = [n for n in names if n not in inputs]
    if missing:
        raise ForgeOptError(f"no value given for input '{missing[0]}'")
    return {n: np.asarray(inputs[n]) for n in names}, notes


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
) -> CheckReport:
    """The model split (device where Forge can, CPU elsewhere), converted,
    run as converted and compared with onnxruntime on the whole model;
    `freeze` as `check_model`'s; `devices` (P > 1): each device sub-model
    tensor-parallel on P devices, simulated or (`mpi`) one MPI process
    each, which must all return the same outputs."""
    if mpi and devices < 2:
        return CheckReport(NOT_COMPILED, error="--mpi runs a split for several devices: give --devices P")
    try:
        model, base = load_model(source)
        model, inputs = frozen(model, inputs, freeze)
        chosen = InputShapes.of(shapes, dims)
        if inputs is not None:
            chosen = chosen.with_arrays(model.graph, inputs)
        original = model
        model = resolved_model(model, chosen)
        feeds, notes = model_feeds(model, base, inputs, seed)
        # first the reference: inputs the model itself cannot take are named by the oracle
        reference = expected_outputs(original, base, feeds)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "split"
            _, infos = split_model(model, folder, min_device_ops=min_device_ops, devices=devices)
            convert(folder)  # the check runs what ships: the converted modules
            layout = describe_split(folder)
            try:
                if mpi:
                    # a split's outputs have no split axis: each process's must be the same
                    got, differ = assemble(read_split(folder)[0], run_mpi(folder, feeds, devices))
                else:
                    got, differ = run_split(folder, feeds), []
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"a device sub-model failed on Forge: {e}")
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    want = reference.outputs
    out_names = [o.name for o in model.graph.output]
    results = [
        compare_output(name, expected, got[name], rtol=rtol, atol=atol, min_pcc=min_pcc)
        for name, expected in zip(out_names, want)
        if name in got
    ]
    status, why = verdict(results, len(want))
    if differ:
        differ_note = f"the MPI processes' outputs differ ({', '.join(differ)})"
        status, why = MISMATCH, "\n".join(filter(None, [why, differ_note]))
    count = infos["graph_num"]
    summary = f"split into {count} sub-model{'' if count == 1 else 's'} ({layout})"
    if devices > 1:
        summary += f"; each device sub-model tensor-parallel on {devices} devices" + (" (MPI)" if mpi else "")
    return CheckReport(
        status, results, error="\n".join(filter(None, [summary, why])),
        oracle=reference.oracle, oracle_note=reference.why, notes=notes,
    )


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
) -> CheckReport:
    """`forge-check --devices P [--mpi]`: the model compiled for P devices,
    run simulated (every device in this process) or with one MPI process
    per device, against onnxruntime on the whole model. Every device must
    return the same outputs."""
    from forge_opt.split.api import parallel_report, tensor_parallel
    from forge_opt.split.runner import run_parallel

    try:
        model, base = load_model(source)
        chosen = InputShapes.of(shapes, dims)
        if inputs is not None:
            chosen = chosen.with_arrays(model.graph, inputs)
        feeds, notes = model_feeds(model, base, inputs, seed, chosen)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "tp"
            infos = tensor_parallel(model, folder, devices, min_size=min_size, plan=plan,
                                    require_sharded=require_sharded, shapes=chosen.shapes, dims=chosen.dims, base=base)
            try:
                per_device = run_mpi(folder, feeds, devices) if mpi else run_parallel(folder, feeds)
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"a device segment failed on Forge: {e}")
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    reference = expected_outputs(model, base, feeds)
    out_names = [o.name for o in model.graph.output]
    got, differ = assemble(infos, per_device)
    results = [
        compare_output(name, expected, got[name], rtol=rtol, atol=atol, min_pcc=min_pcc)
        for name, expected in zip(out_names, reference.outputs)
        if name in got
    ]
    status, why = verdict(results, len(reference.outputs))
    disagree = f"\nthe devices' outputs differ ({', '.join(differ)})" if differ else ""
    note = parallel_report(infos) + disagree + (f"\n{why}" if why else "")
    if differ:
        status = MISMATCH
    return CheckReport(status, results, error=note, oracle=reference.oracle, oracle_note=reference.why, notes=notes)


def size_devices(
    source,
    memory: int,
    max_devices: int = 8,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    min_size: int = 0,
    plan: str = "",
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
):
    """`--device-memory BYTES`: the smallest device count whose per-device
    parameters and KV cache fit (`transforms/tp_sizing.py`), at the sizes
    the inputs or `shapes`/`dims` give."""
    from forge_opt.transforms.pipelines import run_pipeline
    from forge_opt.transforms.tp_sizing import choose_devices

    model, base = load_model(source)
    chosen = InputShapes.of(shapes, dims)
    if inputs is not None:
        chosen = chosen.with_arrays(model.graph, inputs)
    module = import_model(model, base, shapes=chosen)
    run_pipeline(module, "onnx-to-tir")
    return choose_devices(module, memory, max_devices, min_size, plan)
