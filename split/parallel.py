"""`tensor_parallel`: a model compiled for P devices into a folder, as
`forge-opt MODEL -p 'onnx-to-forge{devices=P}' -o DIR/` does it: import,
the pipeline, then the forge-python target's P-device writer
(`targets/devices/`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path

from onnx import ModelProto
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx import Resolved, load_model, resolve_model
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.plan.folder import check_folder
from forge_opt.plan.graph_infos import GALAXY_LAYOUT, LINE_LAYOUT, Plan
from forge_opt.targets.devices import write_parallel
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.pipelines import OnnxToForgePass, run_passes, verify_after


def tensor_parallel(
    source: str | os.PathLike | bytes | ModelProto,
    folder: str | os.PathLike,
    options: CompileOptions | int,
    *,
    force: bool = False,
    shapes: Mapping[str, Iterable[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    base: Path | None = None,
    **changes,
) -> Plan:
    """Compile the model for `options.device_count` devices into `folder`
    (per-device Forge modules and the plan, `graph_infos.json`); the plan.
    `options`: the compile options, or a device count; `changes`: compile
    options' fields (`CompileOptions`: `plan=`, `min_size=`,
    `data_format=`, ...) set over them. `base`: the folder of a loaded
    model's external data."""
    if isinstance(options, int):
        options = CompileOptions(options)
    if isinstance(changes.get("plan"), os.PathLike):  # a plan's file named by a Path
        changes["plan"] = os.fspath(changes["plan"])
    options = replace(options.as_options(), **changes)
    out = Path(folder)
    model, loaded_from = load_model(source)
    check_folder(out, base or loaded_from, force, "--force replaces it")
    resolved = resolve_model(model, InputShapes.of(shapes, dims), base or loaded_from)
    return write_parallel(compile_parallel(resolved, options), out, line_module=line_program(resolved, options))


def compile_parallel(resolved: Resolved, options: CompileOptions) -> ModuleOp:
    """The program every one of `options.device_count` devices runs, in one
    module (`onnx-to-forge{devices=P}`), compiled from a copy of the
    model's import; `write_parallel` cuts it into the plan's per-device
    modules without changing it."""
    if options.device_count < 2:
        raise ForgeOptError(f"tensor parallelism needs 2 devices or more, not {options.device_count}")
    module = resolved.module.clone()
    # verify-each: invalid IR names the step and the node, as `forge-opt --verify-each` would
    verify_after(None, module)
    run_passes([OnnxToForgePass.of(options, verify_each=True)], Context(), module, verify_each=False)
    return module


def line_program(resolved: Resolved, options: CompileOptions) -> ModuleOp | None:
    """In Galaxy's layout, the 1-d program on the same devices (the line's
    own choices, no plan file's pins), which the plan prices beside its
    own: Galaxy's is not a line's laid on the mesh. None otherwise."""
    if options.mesh_layout != GALAXY_LAYOUT:
        return None
    return compile_parallel(resolved, replace(options, devices=options.device_count, mesh="", mesh_layout=LINE_LAYOUT,
                                              plan="", require_sharded=False))
