"""`split_model`, `convert` and `run_split`: AutoSplit's split, convert and run
steps over a folder."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from onnx import ModelProto

from forge_opt.frontends.onnx import import_model, load_model, resolved_model
from forge_opt.frontends.onnx_shapes import InputShapes
from forge_opt.split.folder import read_split, write_split
from forge_opt.split.placement import place
from forge_opt.split.plan import DEVICE, Plan, make_plan


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
) -> tuple[Plan, dict]:
    """Split the model into `folder`: its sub-models and `graph_infos.json`.
    `shapes` and `dims` fix symbolic input sizes (as `import_onnx`); the
    split is of the model with its shapes folded and known control flow
    resolved."""
    model, base = load_model(source)
    model = resolved_model(model, InputShapes.of(shapes, dims))
    placements = place(import_model(model, base), cpu_ops, cpu_nodes)
    plan = make_plan(model, placements, min_device_ops)
    infos = write_split(Path(folder), model, plan, base=base, force=force, layout=layout)
    return plan, infos


def convert(folder: str | os.PathLike) -> list[Path]:
    """Compile each device sub-model to Forge Python in its `context_dir`
    (the module, its computed constants and its `forge` IR); the modules written."""
    from forge_opt.check.engine import compile_model
    from forge_opt.targets.forge_python import save_constants

    written = []
    for g in read_split(Path(folder))[1]:
        if g.device != DEVICE or g.context_dir is None:
            continue
        compiled = compile_model(load_model(g.model_path)[0], g.model_path.parent)
        g.context_dir.mkdir(parents=True, exist_ok=True)
        path = g.context_dir / f"graph_{g.index}.py"
        path.write_text(compiled.emitted.source)
        save_constants(compiled.emitted, g.context_dir)
        (g.context_dir / f"graph_{g.index}.mlir").write_text(str(compiled.module) + "\n")
        written.append(path)
    return written


def run_split(folder: str | os.PathLike, inputs, mode: str = "device"):
    """The model's outputs, by name, from its split in `folder` (`runner.run_split`)."""
    from forge_opt.split import runner  # the interpreters and onnxruntime: only to run

    return runner.run_split(Path(folder), inputs, mode)


__all__ = ["convert", "run_split", "split_model"]
