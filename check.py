"""`forge-check`: prove that the emitted Forge module computes what
onnxruntime computes for a model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from onnx import ModelProto
from xdsl.dialects.builtin import TensorType

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects.forge_rules import data_format
from forge_opt.frontends.onnx import freeze_inputs, load_model

MATCH, MISMATCH, NOT_COMPILED = 0, 1, 2


@dataclass
class OutputResult:
    name: str
    shape: tuple[int, ...]
    max_abs_error: float
    pcc: float
    ok: bool
    reason: str = ""


@dataclass
class CheckReport:
    status: int
    outputs: list[OutputResult] = field(default_factory=list)
    error: str = ""
    forge_python: str = ""
    divergence: object = None  # a divergence.Divergence, with bisect=True
    bisected: bool = False

    @property
    def ok(self) -> bool:
        return self.status == MATCH

    def format(self) -> str:
        if self.status == NOT_COMPILED:
            return f"did not compile: {self.error}"
        lines = [f"{'output':<24} {'shape':<18} {'max abs err':>12} {'pcc':>10}  verdict"]
        for o in self.outputs:
            verdict = "ok" if o.ok else f"MISMATCH {o.reason}".rstrip()
            lines.append(
                f"{o.name:<24} {str(list(o.shape)):<18} {o.max_abs_error:>12.3e} {o.pcc:>10.6f}  {verdict}"
            )
        lines.append("match" if self.ok else "mismatch")
        if self.bisected:
            lines.append(self.divergence.format() if self.divergence else "bisect: no intermediate value diverges")
        return "\n".join(lines)


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two arrays; 1.0 when both are constant and equal."""
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    if a.size == 0 or np.array_equal(a, b):
        return 1.0
    if a.std() == 0 or b.std() == 0:
        return 1.0 if np.allclose(a, b) else 0.0
    return float(np.corrcoef(a, b)[0, 1])


def dtype_mismatch(want: np.ndarray, got: np.ndarray) -> str | None:
    """Forge's `verify` check of an output's element type: the reference's
    dtype and Forge's must have the same DataFormat (bool and int64 are both
    Int32, forge/forge/verify/verify.py check_dtypes)."""
    want_format, got_format = data_format(want.dtype), data_format(got.dtype)
    if want_format is None:
        return f"dtype {want.dtype}, for which Forge has no DataFormat"
    if want_format != got_format:
        return f"dtype {got.dtype} ({got_format}) where the reference gives {want.dtype} ({want_format})"
    return None


def random_inputs(module, seed: int = 0) -> list[np.ndarray]:
    """Seeded random inputs for the module's function arguments."""
    from forge_opt.interpreters.run import main_func

    rng = np.random.default_rng(seed)
    arrays = []
    for arg in main_func(module).body.block.args:
        t = arg.type
        if not isinstance(t, TensorType) or any(d < 0 for d in t.get_shape()):
            raise ForgeOptError(f"input of type {t} has no static shape; pass --inputs")
        dtype = dtypes.numpy_dtype(t.element_type)
        shape = t.get_shape()
        if dtype == np.bool_:
            arrays.append(rng.integers(0, 2, shape).astype(bool))
        elif np.issubdtype(dtype, np.integer):
            arrays.append(rng.integers(0, 10, shape).astype(dtype))
        else:
            arrays.append(rng.standard_normal(shape).astype(dtype))
    return arrays


def onnxruntime_outputs(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    try:
        import onnxruntime as ort
    except ImportError:
        raise ForgeOptError("forge-check compares with onnxruntime: pip install 'forge-opt[test]'") from None

    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if base is not None and any(
            t.data_location == 1 for t in model.graph.initializer
        ):  # external data: onnxruntime resolves it next to a file
            import tempfile

            import onnx

            with tempfile.NamedTemporaryFile(suffix=".onnx", dir=base, delete=False) as f:
                path = f.name
            try:
                onnx.save(model, path)
                session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            finally:
                os.unlink(path)
        else:
            session = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        return session.run(None, feeds)
    except Exception as e:  # onnxruntime's own errors carry no common base class
        raise ForgeOptError(f"onnxruntime, the reference, cannot run the model: {e}") from None


def check_model(
    source,
    inputs: list[np.ndarray] | dict[str, np.ndarray] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    min_pcc: float = 0.999,
    seed: int = 0,
    freeze: tuple[str, ...] = (),
    bisect: bool = False,
) -> CheckReport:
    """Compile `source` with onnx-to-forge, run the emitted Forge Python on the
    stand-in, run the model on onnxruntime, and compare every output.

    `freeze` names graph inputs to compile as constants, with their values
    taken from `inputs` (a dict). With `bisect`, a mismatch also names the
    first ONNX node whose output diverges."""
    from forge_opt.api import run_pipeline
    from forge_opt.frontends.onnx import import_model
    from forge_opt.interpreters.forge_standin import ForgeCallError, run_forge_module
    from forge_opt.interpreters.run import main_func
    from forge_opt.targets.forge_python import emit_module

    try:
        model, base = load_model(source)
        if freeze:
            if not isinstance(inputs, dict):
                raise ForgeOptError("freezing inputs needs their values: pass inputs by name")
            missing = [n for n in freeze if n not in inputs]
            if missing:
                raise ForgeOptError(f"no value given for the frozen input '{missing[0]}'")
            model = freeze_inputs(model, {n: inputs[n] for n in freeze})
            inputs = {k: v for k, v in inputs.items() if k not in freeze}
        module = import_model(model, base)
        names = [
            d.data["onnx.name"].data for d in main_func(module).arg_attrs.data
        ]
        if inputs is None:
            arrays = random_inputs(module, seed)
        elif isinstance(inputs, dict):
            missing = [n for n in names if n not in inputs]
            if missing:
                raise ForgeOptError(f"no value given for input '{missing[0]}'")
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            arrays = [np.asarray(x) for x in inputs]
        run_pipeline(module)
        emitted = emit_module(module)
        text = emitted.source
    except ForgeOptError as e:
        return CheckReport(NOT_COMPILED, error=str(e))

    expected = onnxruntime_outputs(model, base, dict(zip(names, arrays)))
    try:
        actual = run_forge_module(text, arrays, model, emitted)
    except ForgeCallError as e:
        return CheckReport(MISMATCH, error=f"the Forge module failed: {e}", forge_python=text)

    out_names = [o.name for o in model.graph.output]
    results = []
    for name, want, got in zip(out_names, expected, actual):
        want, got = np.asarray(want), np.asarray(got)
        if want.shape != got.shape:
            results.append(OutputResult(name, got.shape, float("inf"), 0.0, False, f"shape {list(got.shape)} != {list(want.shape)}"))
            continue
        mismatch = dtype_mismatch(want, got)
        if mismatch:
            results.append(OutputResult(name, got.shape, float("inf"), 0.0, False, mismatch))
            continue
        if want.dtype.kind in "fc":
            err = float(np.max(np.abs(want.astype(np.float64) - got.astype(np.float64)))) if want.size else 0.0
            ok = bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
        else:
            err = float(np.max(np.abs(want.astype(np.float64) - got.astype(np.float64)))) if want.size else 0.0
            ok = bool(np.array_equal(want, got))
        p = pcc(want, got)
        ok = ok and p >= min_pcc
        results.append(OutputResult(name, got.shape, err, p, ok))
    status = MATCH if all(r.ok for r in results) and len(actual) == len(expected) else MISMATCH
    report = CheckReport(status, results, forge_python=text)
    if bisect and status == MISMATCH:
        from forge_opt.divergence import first_divergence

        report.bisected = True
        report.divergence = first_divergence(
            model, module, dict(zip(names, arrays)), rtol=rtol, atol=atol
        )
    return report
