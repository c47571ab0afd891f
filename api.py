"""The Python API: import, compile, emit and check ONNX models."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from onnx import ModelProto
from xdsl.dialects.builtin import ModuleOp

from forge_opt.check import check_model
from forge_opt.frontends.onnx import import_onnx
from forge_opt.targets.forge_python import emit_forge_python
from forge_opt.transforms.pipelines import run_pipeline
from forge_opt.universe import make_context

Source = str | os.PathLike | bytes | ModelProto


def compile_onnx(
    source: Source,
    pipeline: str = "onnx-to-forge",
    *,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> ModuleOp:
    """Import a model and run a pass pipeline on it (default: to `forge`).
    `shapes` and `dims` fix symbolic input sizes, as in `import_onnx`."""
    module = import_onnx(source, shapes=shapes, dims=dims)
    run_pipeline(module, pipeline)
    return module


__all__ = ["check_model", "compile_onnx", "emit_forge_python", "import_onnx", "make_context", "run_pipeline"]
