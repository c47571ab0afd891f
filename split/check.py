"""`forge-check --fallback`: check a model through the split path (device
where Forge can, CPU elsewhere) against onnxruntime on the whole model."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from forge_opt.check.compare import compare_output
from forge_opt.check.engine import expected_outputs, random_inputs
from forge_opt.check.model import MATCH, MISMATCH, NOT_COMPILED, CheckReport
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import import_model, load_model, resolved_model
from forge_opt.frontends.onnx_shapes import InputShapes
from forge_opt.interpreters.forge_standin import ForgeCallError
from forge_opt.split.api import run_split, split_model


def check_fallback(
    source,
    inputs: dict[str, np.ndarray] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    min_pcc: float = 0.999,
    seed: int = 0,
    min_device_ops: int = 1,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> CheckReport:
    try:
        model, base = load_model(source)
        chosen = InputShapes.of(shapes, dims)
        if inputs is not None:
            chosen = chosen.with_arrays(model.graph, inputs)
        original = model
        model = resolved_model(model, chosen)
        initializers = {t.name for t in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in initializers]
        if inputs is None:
            arrays = random_inputs(import_model(model, base), seed)
            inputs = dict(zip(names, arrays))
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ForgeOptError(f"no value given for input '{missing[0]}'")
        feeds = {n: np.asarray(inputs[n]) for n in names}
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "split"
            _, infos = split_model(model, folder, min_device_ops=min_device_ops)
            try:
                got = run_split(folder, feeds)
            except ForgeCallError as e:
                return CheckReport(MISMATCH, error=f"a device sub-model failed on Forge: {e}")
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))
    reference = expected_outputs(original, base, feeds)
    want = reference.outputs
    out_names = [o.name for o in model.graph.output]
    results = [
        compare_output(name, expected, got[name], rtol=rtol, atol=atol, min_pcc=min_pcc)
        for name, expected in zip(out_names, want)
    ]
    devices = ", ".join(g["device"] for g in infos["graphs"])
    status = MATCH if all(r.ok for r in results) else MISMATCH
    return CheckReport(
        status, results, error=f"split into {infos['graph_num']} sub-models ({devices})",
        oracle=reference.oracle, oracle_note=reference.why,
    )
