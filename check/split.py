"""The check strategies of forge-split's products, on the common steps of
`driver.py`: `forge-check --fallback` checks a model through the split path
(device where Forge can, CPU elsewhere) against onnxruntime on the whole
model, `forge-check --devices P` through the tensor-parallel path."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL
from forge_opt.check.driver import Tolerances, compare_outputs, hidden_folder, load_checked, model_feeds
from forge_opt.check.model import MISMATCH, NOT_COMPILED, CheckReport, verdict
from forge_opt.check.oracle import expected_outputs
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import import_model, resolved_model
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.split.api import convert, describe_split, require_static_inputs, run_split, split_model
from forge_opt.split.mpi import run_mpi
from forge_opt.split.runner import assemble


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
        loaded = load_checked(source, inputs, freeze=freeze, shapes=shapes, dims=dims)
        original, base = loaded.model, loaded.base
        model = resolved_model(original, loaded.sizes)
        if loaded.inputs is None:
            require_static_inputs(model)  # names each unknown size and the flag that fixes it
        feeds, notes = model_feeds(model, base, loaded.inputs, seed)
        # first the reference: inputs the model itself cannot take are named by the oracle
        reference = expected_outputs(original, base, feeds)
        with hidden_folder() as tmp:
            folder = Path(tmp) / "split"
            _, plan = split_model(model, folder, min_device_ops=min_device_ops, devices=devices, base=base)
            convert(folder)  # the check runs what ships: the converted modules
            layout = describe_split(folder)
            try:
                if mpi:
                    # a split's outputs have no split axis: each process's must be the same
                    got, differ = assemble(plan, run_mpi(folder, feeds, devices))
                else:
                    got, differ = run_split(folder, feeds), []
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"a device sub-model failed on Forge: {e}")
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    want = reference.outputs
    results = compare_outputs(model, want, got, Tolerances(rtol, atol, min_pcc), base=base, feeds=feeds)
    status, why = verdict(results, len(want))
    if differ:
        differ_note = f"the MPI processes' outputs differ ({', '.join(differ)})"
        status, why = MISMATCH, "\n".join(filter(None, [why, differ_note]))
    count = len(plan.graphs)
    summary = f"split into {count} sub-model{'' if count == 1 else 's'} ({layout})"
    if not re.search(r"\btt\b", layout):
        summary += "; nothing runs on the device: this checks the split, not a Forge program"
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
        loaded = load_checked(source, inputs, shapes=shapes, dims=dims)
        model, base, chosen = loaded.model, loaded.base, loaded.sizes
        feeds, notes = model_feeds(model, base, loaded.inputs, seed, chosen)
        reference = expected_outputs(model, base, feeds)  # first: inputs the model cannot take are the user's
        with hidden_folder() as tmp:
            folder = Path(tmp) / "tp"
            written = tensor_parallel(model, folder, devices, min_size=min_size, plan=plan,
                                      require_sharded=require_sharded, shapes=chosen.shapes, dims=chosen.dims,
                                      base=base)
            try:
                per_device = run_mpi(folder, feeds, devices) if mpi else run_parallel(folder, feeds)
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"a device segment failed on Forge: {e}")
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    got, differ = assemble(written, per_device)
    results = compare_outputs(model, reference.outputs, got, Tolerances(rtol, atol, min_pcc), base=base, feeds=feeds)
    status, why = verdict(results, len(reference.outputs))
    disagree = f"\nthe devices' outputs differ ({', '.join(differ)})" if differ else ""
    note = parallel_report(written) + disagree + (f"\n{why}" if why else "")
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
    parameters and KV cache fit (`transforms/tp/sizing.py`), at the sizes
    the inputs or `shapes`/`dims` give."""
    from forge_opt.transforms.pipelines import run_pipeline
    from forge_opt.transforms.tp.sizing import choose_devices

    loaded = load_checked(source, inputs, shapes=shapes, dims=dims)
    module = import_model(loaded.model, loaded.base, shapes=loaded.sizes)
    run_pipeline(module, "onnx-to-tir")
    return choose_devices(module, memory, max_devices, min_size, plan)
