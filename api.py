"""The Python API: import, compile, emit and check ONNX models."""

from __future__ import annotations

import os

from onnx import ModelProto
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func

from forge_opt.frontends.onnx import import_onnx
from forge_opt.targets.forge_python import emit_forge_python

Source = str | os.PathLike | bytes | ModelProto


def make_context() -> Context:
    """A context with builtin, func and forge-opt's dialects loaded."""
    from forge_opt.universe import DIALECTS

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    for factory in DIALECTS.values():
        ctx.load_dialect(factory())
    return ctx


def compile_onnx(source: Source, pipeline: str = "onnx-to-forge") -> ModuleOp:
    """Import a model and run a pass pipeline on it (default: to `forge`)."""
    module = import_onnx(source)
    run_pipeline(module, pipeline)
    return module


def run_pipeline(module: ModuleOp, pipeline: str = "onnx-to-forge") -> None:
    """Run a pass pipeline on `module` in place, verifying the IR before the
    first pass and after each, as xdsl-opt does."""
    from xdsl.passes import PassPipeline

    from forge_opt.transforms.pipelines import ALL_PASSES, verify_after

    passes = PassPipeline.parse_spec(
        {n: (lambda p=p: p) for n, p in ALL_PASSES.items()},
        pipeline,
        lambda done, module, _next: verify_after(done, module),
    )
    passes.apply(make_context(), module)


def check_model(source: Source, inputs=None, **options):
    """Compile, run on the Forge stand-in and compare with onnxruntime; see
    `forge_opt.check.check_model`."""
    from forge_opt import check

    return check.check_model(source, inputs, **options)


__all__ = ["import_onnx", "compile_onnx", "emit_forge_python", "check_model", "make_context"]
