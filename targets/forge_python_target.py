"""The `forge-python` target: one Forge Python module (`forge_python.py`),
or, for a module carrying a device grid (`onnx-to-forge{devices=P}`), a
folder of per-device modules and its plan (`devices/`), with the plan's
report as the output. Stock `xdsl-opt` prints either through the
`xdsl.universe` entry point; forge-opt's `-o` sets the options."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan.graph_infos import INFOS
from forge_opt.targets.devices import parallel_report, write_parallel
from forge_opt.targets.forge_python import emit_module, save_constants
from forge_opt.transforms.tp.partition import grid_info


@dataclass(frozen=True)
class ForgePythonTarget(Target):
    """Forge Python; computed constants go beside the output file (or into
    the current folder when printing to standard output). `folder`: where
    a program for several devices is written (forge-opt: `-o DIR/`)."""

    name = "forge-python"

    constants_dir: str = ""
    stem: str = ""  # the output file's name without .py: its constants are <stem>_constants.npz
    folder: str = ""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        if grid_info(module) is not None:
            if not self.folder:
                raise ForgeOptError("a program for several devices is a folder of modules: give "
                                    "-t 'forge-python{folder=\"DIR\"}' (forge-opt: -o DIR/)")
            folder = Path(self.folder)
            _check_folder(folder)
            output.write(parallel_report(write_parallel(module, folder)) + "\n")
            return
        if self.folder:
            raise ForgeOptError(f"{self.folder}: is a folder; a program for one device is one module: name its "
                                "file (-o model.py)")
        emitted = emit_module(module, stem=self.stem)
        save_constants(emitted, Path(self.constants_dir or "."))  # first: a refused file leaves no module behind
        output.write(emitted.source)


def _check_folder(folder: Path) -> None:
    """Write into an empty folder or over our own tensor-parallel plan, never
    over other files (an AutoSplit split included)."""
    if folder.exists() and not folder.is_dir():
        raise ForgeOptError(f"{folder}: is a file; a program of several devices is written into a folder")
    if not folder.exists() or not any(folder.iterdir()):
        return
    plan = folder / INFOS
    try:
        ours = "grid" in json.loads(plan.read_text())
    except (OSError, ValueError):
        ours = False
    if not ours:
        what = "an AutoSplit split" if plan.is_file() else "no plan of ours"
        raise ForgeOptError(f"{folder}: is not empty and holds {what}; choose an empty folder")
