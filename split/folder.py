"""A split on disk: `graph_<n>.onnx` per sub-model and `graph_infos.json`,
written by `split` and read back (checked field by field) by `convert` and
`run`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import onnx
from onnx import ModelProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.plan import CPU, DEVICE, Plan, graph_infos, sub_model

INFOS = "graph_infos.json"


def write_split(folder: Path, model: ModelProto, plan: Plan, *, force: bool = False, layout: str = "NCHW") -> dict:
    """Write the sub-models and `graph_infos.json` into `folder`; a folder
    that exists and is not empty is refused unless `force`."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise ForgeOptError(f"{folder}: exists and is not empty (--force replaces its split)")
    folder.mkdir(parents=True, exist_ok=True)
    infos = graph_infos(plan, layout)
    for n, entry in enumerate(infos["graphs"]):
        onnx.save(sub_model(model, plan, n), folder / entry["model_info"]["model_path"])
    (folder / INFOS).write_text(json.dumps(infos, indent=2) + "\n")
    return infos


@dataclass
class SplitGraph:
    index: int
    device: str
    inputs: list[str]
    outputs: list[str]
    model_path: Path
    context_dir: Path | None


def read_split(folder: Path) -> tuple[dict, list[SplitGraph]]:
    """`graph_infos.json` and its sub-models, each reference checked: a
    missing field, an unknown tensor, a missing file, or a tensor read
    before any graph makes it is an error naming it."""
    path = folder / INFOS
    try:
        infos = json.loads(path.read_text())
    except FileNotFoundError:
        raise ForgeOptError(f"{path}: no such file (is {folder} a split?)") from None
    except json.JSONDecodeError as e:
        raise ForgeOptError(f"{path}: not valid JSON: {e}") from None
    for key in ("graphs", "tensors", "graph_num"):
        if key not in infos:
            raise ForgeOptError(f"{path}: the field '{key}' is missing")
    tensors = infos["tensors"]
    if not isinstance(tensors, dict):
        raise ForgeOptError(f"{path}: 'tensors' must map tensor names to their shape, dtype and attr")
    if infos["graph_num"] != len(infos["graphs"]):
        raise ForgeOptError(f"{path}: graph_num is {infos['graph_num']} but there are {len(infos['graphs'])} graphs")
    known = {name for name, t in tensors.items() if t.get("attr") == "input"}
    graphs = []
    for n, entry in enumerate(infos["graphs"]):
        where = f"{path}: graphs[{n}]"
        for key in ("inputs", "outputs", "device", "model_info"):
            if key not in entry:
                raise ForgeOptError(f"{where}: the field '{key}' is missing")
        if entry["device"] not in (DEVICE, CPU):
            raise ForgeOptError(f"{where}: device '{entry['device']}' is neither '{DEVICE}' nor '{CPU}'")
        for x in (*entry["inputs"], *entry["outputs"]):
            if x not in tensors:
                raise ForgeOptError(f"{where}: tensor '{x}' is not in 'tensors'")
        for x in entry["inputs"]:
            if x not in known:
                raise ForgeOptError(f"{where}: reads '{x}' before any earlier graph makes it (a cycle or a bad order)")
        known |= set(entry["outputs"])
        model_path = folder / entry["model_info"].get("model_path", "")
        if not model_path.is_file():
            raise ForgeOptError(f"{where}: the sub-model {model_path} does not exist")
        context = entry.get("context_dir")
        graphs.append(
            SplitGraph(n, entry["device"], entry["inputs"], entry["outputs"], model_path,
                       folder / context if context else None)
        )
    return infos, graphs
