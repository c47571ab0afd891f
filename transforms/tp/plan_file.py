"""A tensor-parallel plan file (`plan=FILE.json`): the layers it pins, by
ONNX node name, in Paddle's terms (see `annotate`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.func import FuncOp

from forge_opt.diagnostics import ForgeOptError, describe, node_name


@dataclass
class Pin:
    axis: int | None
    gather_out: bool = False
    column_axis: int | None = None  # Galaxy's layout: the axis over the mesh's columns (`axis`: over its rows)
    per_axis: bool = False  # column_axis given

    def on(self, mesh_axis: int | None) -> Pin:
        """The pin for the pass over `mesh_axis` (1: the columns) alone."""
        return Pin(self.column_axis, self.gather_out) if mesh_axis == 1 and self.per_axis else self


def read_plan(path: str) -> dict[str, Pin]:
    """The layers a plan file pins, by node name; `MODEL.onnx#NAME`: those
    the model's sharding configuration NAME pins (`#NAME` may be left out
    where it carries one)."""
    model, name = model_and_name(path)
    if model:
        from forge_opt.frontends.onnx import load_model
        from forge_opt.plan.onnx_annotations import plan_pins

        return _pins(plan_pins(load_model(model)[0], name), path)
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ForgeOptError(f"{path}: no such plan file") from None
    except json.JSONDecodeError as e:
        raise ForgeOptError(f"{path}: not valid JSON: {e}") from None
    return _pins(data, path)


def pins_on(path: str, mesh_axis: int | None) -> dict[str, Pin]:
    """`read_plan`'s pins for a pass over `mesh_axis` alone (Galaxy's
    layout) or over every device (None), which takes no pins per axis."""
    pins = {name: pin.on(mesh_axis) for name, pin in read_plan(path).items()}
    if mesh_axis is None and any(pin.per_axis for pin in pins.values()):
        raise ForgeOptError(f"{path}: pins layers per mesh axis (column_axis): compile it in Galaxy's layout "
                            "(--mesh-layout galaxy)")
    return pins


def model_and_name(path: str) -> tuple[str, str]:
    """`MODEL.onnx` or `MODEL.onnx#NAME` (a model's path may hold a `#`
    itself): the model and the configuration; ("", "") for a JSON file."""
    models = (".onnx", ".onnxtxt")
    if path.endswith(models):
        return path, ""
    model, _, name = path.rpartition("#")
    return (model, name) if model.endswith(models) else ("", "")


def _pins(data, path: str) -> dict[str, Pin]:
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict):
        raise ForgeOptError(f'{path}: a plan is {{"layers": {{"NODE": {{"axis": 0 | 1 | null}}}}}}')
    pins = {}
    for name, entry in layers.items():
        if not isinstance(entry, dict):
            raise ForgeOptError(f"{path}: layer '{name}': 'axis' must be 0, 1 or null")
        for key in ("axis", "column_axis") if "column_axis" in entry else ("axis",):
            # `True == 1` in Python: a bool is no axis
            if isinstance(entry.get(key), bool) or entry.get(key, "missing") not in (0, 1, None):
                raise ForgeOptError(f"{path}: layer '{name}': '{key}' must be 0, 1 or null")
        unknown = sorted(set(entry) - {"axis", "gather_out", "column_axis"})
        if unknown:
            raise ForgeOptError(f"{path}: layer '{name}': unknown key '{unknown[0]}' (a layer takes axis, "
                                "gather_out and, in Galaxy's layout, column_axis)")
        if not isinstance(entry.get("gather_out", False), bool):
            raise ForgeOptError(f"{path}: layer '{name}': 'gather_out' must be true or false")
        pins[name] = Pin(entry["axis"], entry.get("gather_out", False), entry.get("column_axis"),
                         "column_axis" in entry)
    return pins


def not_a_layer(func: FuncOp, name: str) -> str:
    """Why a plan naming the node `name` cannot pin it in `func`."""
    for op in func.body.walk():
        if node_name(op) == name:
            return (f"the plan names {describe(op)}, which is neither a Linear (MatMul or Gemm with a constant 2-d "
                    "weight) nor an Embedding (Gather on a constant 2-d table)")
    return f"the plan names the node '{name}', which the model does not have"
