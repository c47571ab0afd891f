"""A split on disk: `graph_<n>.onnx` per sub-model and `graph_infos.json`,
written by `split` and read back (checked field by field) by `convert` and
`run`."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.control_flow import BRANCHES
from forge_opt.split.plan import CPU, DEVICE, Plan, graph_infos, sub_model

INFOS = "graph_infos.json"


WEIGHTS = "weights.bin"
INLINE_LIMIT = 1 << 16  # bytes: smaller initializers stay inside their sub-model


class _Weights:
    """Initializers for the sub-models without copies in memory. One stored
    as external data keeps pointing at its file, linked into the split
    folder. A large inline one is written once to `weights.bin`, which every
    sub-model that uses it points into."""

    def __init__(self, folder: Path, base: Path | None):
        self.folder, self.base = folder, base
        self.placed: dict[str, tuple[int, int]] = {}
        self.size = 0
        self.links: dict[Path, str] = {}

    def _linked(self, target: Path) -> str:
        """A name in the split folder for the data file `target`: onnxruntime
        reads external data only from inside a model's folder, and follows no
        symbolic link out of it. A hard link where the file system allows,
        else a copy streamed through a small buffer (disk, not memory)."""
        if target not in self.links:
            name = f"data{len(self.links)}_{target.name}"
            try:
                os.link(target, self.folder / name)
            except OSError:
                shutil.copyfile(target, self.folder / name)
            self.links[target] = name
        return self.links[target]

    def __call__(self, t: TensorProto) -> TensorProto:
        if t.data_location == TensorProto.EXTERNAL:
            entries = {e.key: e.value for e in t.external_data}
            if self.base is None:
                raise ForgeOptError(f"initializer '{t.name}' has external data but the model has no folder")
            return self._pointing(t, self._linked((self.base / entries["location"]).resolve()), entries)
        if len(t.raw_data) < INLINE_LIMIT:
            return t
        if t.name not in self.placed:
            with open(self.folder / WEIGHTS, "ab" if self.size else "wb") as f:
                f.write(t.raw_data)
            self.placed[t.name] = (self.size, len(t.raw_data))
            self.size += len(t.raw_data)
        offset, length = self.placed[t.name]
        return self._pointing(t, WEIGHTS, {"offset": str(offset), "length": str(length)})

    @staticmethod
    def _pointing(t: TensorProto, location: str, entries: dict[str, str]) -> TensorProto:
        out = TensorProto()
        out.name, out.data_type = t.name, t.data_type
        out.dims.extend(t.dims)
        out.data_location = TensorProto.EXTERNAL
        for key, value in {**entries, "location": location}.items():
            entry = out.external_data.add()
            entry.key, entry.value = key, value
        return out

def write_split(
    folder: Path, model: ModelProto, plan: Plan, *, base: Path | None = None, force: bool = False,
    layout: str = "NCHW", control: dict[int, tuple[str, dict]] | None = None, parallel: int = 1,
) -> dict:
    """Write the sub-models and `graph_infos.json` into `folder` (`base`: the
    folder the model's external data is in; `control`: by sub-model, the
    field of a run-time If's or Loop's entry, `control_flow.py`; `parallel`:
    the devices each device sub-model runs on); a folder that exists and is
    not empty is refused unless `force`."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise ForgeOptError(f"{folder}: exists and is not empty (--force replaces its split)")
    folder.mkdir(parents=True, exist_ok=True)
    infos = graph_infos(plan, layout)
    for n, (key, entry) in (control or {}).items():
        infos["graphs"][n][key] = entry
    if parallel > 1:
        infos["parallel"] = parallel
    weights = _Weights(folder, base)
    for n, entry in enumerate(infos["graphs"]):
        onnx.save(sub_model(model, plan, n, weights), folder / entry["model_info"]["model_path"])
    write_infos(folder, infos)
    return infos


def write_infos(folder: Path, infos: dict) -> None:
    """`graph_infos.json`, for a split and for a tensor-parallel plan alike
    (`read_split` reads both)."""
    (folder / INFOS).write_text(json.dumps(infos, indent=2) + "\n")


@dataclass
class SplitGraph:
    """One sub-model of a split. Of a tensor-parallel plan (one with a
    `grid`), a segment every device runs: its paths hold `{rank}`."""

    index: int
    device: str
    inputs: list[str]
    outputs: list[str]
    model_path: Path
    context_dir: Path | None
    module_path: Path | None = None
    # a run-time If's or Loop's: the folder of each branch's or the body's split, and its entry's field
    subgraphs: dict[str, Path] = field(default_factory=dict)
    branch_info: dict | None = None
    loop_info: dict | None = None

    def on(self, rank: int) -> SplitGraph:
        """This graph's files for device `rank`."""

        def at(p: Path | None) -> Path | None:
            return None if p is None else Path(str(p).replace("{rank}", str(rank)))

        path = at(self.model_path)
        assert path is not None
        return SplitGraph(self.index, self.device, self.inputs, self.outputs, path, at(self.context_dir),
                          at(self.module_path), self.subgraphs, self.branch_info, self.loop_info)


def parallel_dir(g: SplitGraph) -> Path:
    """Where `convert` writes device sub-model `g`'s tensor-parallel plan,
    in a split for several devices (`parallel` in `graph_infos.json`)."""
    assert g.context_dir is not None
    return g.context_dir / "parallel"


def converted_module(g: SplitGraph) -> Path | None:
    """Where `convert` writes device sub-model `g`'s Forge module (None
    without a `context_dir`)."""
    return None if g.context_dir is None else g.context_dir / f"graph_{g.index}.py"


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
    if not isinstance(infos, dict):
        raise ForgeOptError(f"{path}: not a split's description (a JSON object with graphs and tensors)")
    for key in ("graphs", "tensors", "graph_num"):
        if key not in infos:
            raise ForgeOptError(f"{path}: the field '{key}' is missing")
    tensors = infos["tensors"] = _tensor_table(infos["tensors"], path)
    if infos["graph_num"] != len(infos["graphs"]):
        raise ForgeOptError(f"{path}: graph_num is {infos['graph_num']} but there are {len(infos['graphs'])} graphs")
    if not any(isinstance(t, dict) and t.get("attr") == "output" for t in tensors.values()):
        raise ForgeOptError(f"{path}: no tensor has attr 'output', so a run would return nothing to compare")
    known = {name for name, t in tensors.items() if t.get("attr") == "input"}
    ranks = range(_grid_size(infos, path))
    collectives = infos.get("collectives", [])
    graphs = []
    for n, entry in enumerate(infos["graphs"]):
        where = f"{path}: graphs[{n}]"
        for key in ("inputs", "outputs", "device", "model_info"):
            if key not in entry:
                raise ForgeOptError(f"{where}: the field '{key}' is missing")
        if entry["device"] == AUTOSPLIT_DEVICE:  # AutoSplit's name for its accelerator
            entry["device"] = DEVICE
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
        module = entry["model_info"].get("module_path")
        context = entry.get("context_dir")
        graph = SplitGraph(n, entry["device"], entry["inputs"], entry["outputs"], model_path,
                           folder / context if context else None, folder / module if module else None)
        if "branches" in entry:
            graph.branch_info = _branches(entry, where)
            graph.subgraphs = {which: folder / graph.branch_info[which]["folder"] for which in BRANCHES}
        if "loop" in entry:
            graph.loop_info = _loop(entry, where)
            graph.subgraphs = {"body": folder / graph.loop_info["body"]["folder"]}
        for rank in ranks:
            for p in (graph.on(rank).model_path, graph.on(rank).module_path):
                if p is not None and not p.is_file():
                    raise ForgeOptError(f"{where}: the file {p} does not exist")
        graphs.append(graph)
        _fill_dtypes(tensors, graph, where)
        for c, step in enumerate(collectives):
            if step.get("after_graph") == n:
                if step.get("input") not in known or step.get("output") not in tensors:
                    raise ForgeOptError(f"{path}: collectives[{c}] reads a tensor no earlier graph makes, or makes "
                                        "one not in 'tensors'")
                known.add(step["output"])
    for name, t in tensors.items():
        if "dtype" not in t:
            raise ForgeOptError(f"{path}: tensor '{name}' has no dtype, and no sub-model declares its type")
    return infos, graphs


def _branches(entry: dict, where: str) -> dict:
    """A run-time If's `branches` field, checked (`branches.py` has its form)."""
    info = entry["branches"]
    if not isinstance(info, dict) or not all(k in info for k in ("condition", "results", *BRANCHES)):
        raise ForgeOptError(f"{where}: 'branches' needs condition, results, then and else")
    if info["condition"] not in entry["inputs"]:
        raise ForgeOptError(f"{where}: the branches' condition '{info['condition']}' is not an input of the graph")
    for which in BRANCHES:
        branch = info[which]
        if not isinstance(branch, dict) or not isinstance(branch.get("folder"), str) or not isinstance(
            branch.get("outputs"), list
        ):
            raise ForgeOptError(f"{where}: branches.{which} needs a folder and its outputs")
        if len(branch["outputs"]) != len(info["results"]):
            raise ForgeOptError(f"{where}: branches.{which} has {len(branch['outputs'])} outputs for "
                                f"{len(info['results'])} results")
    return info


def _loop(entry: dict, where: str) -> dict:
    """A run-time Loop's `loop` field, checked (`control_flow.py` has its form)."""
    info = entry["loop"]
    keys = ("trip_count", "condition", "initial", "results", "body")
    if not isinstance(info, dict) or not all(k in info for k in keys):
        raise ForgeOptError(f"{where}: 'loop' needs {', '.join(keys)}")
    body = info["body"]
    if not isinstance(body, dict) or not isinstance(body.get("folder"), str) or not all(
        isinstance(body.get(k), list) for k in ("inputs", "outputs")
    ):
        raise ForgeOptError(f"{where}: loop.body needs a folder, its inputs and its outputs")
    carried = len(info["initial"])
    if len(body["inputs"]) != 2 + carried or len(body["outputs"]) < 1 + carried:
        raise ForgeOptError(f"{where}: loop.body has {len(body['inputs'])} inputs and {len(body['outputs'])} "
                            f"outputs for {carried} carried values")
    for x in (info["trip_count"], info["condition"], *info["initial"]):
        if x and x not in entry["inputs"]:
            raise ForgeOptError(f"{where}: the loop reads '{x}', which is not an input of the graph")
    return info


#: what AutoSplit's own files call the accelerator
AUTOSPLIT_DEVICE = "tpu"


def _tensor_table(tensors, path: Path) -> dict[str, dict]:
    """`tensors` as a dict by name, each entry checked: AutoSplit writes a
    dict; its docstrings show a list of `{name, shape, attr}`, read too."""
    if isinstance(tensors, list):
        if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tensors):
            raise ForgeOptError(f"{path}: 'tensors' as a list needs a 'name' in every entry")
        tensors = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in tensors}
    if not isinstance(tensors, dict) or not all(isinstance(t, dict) for t in tensors.values()):
        raise ForgeOptError(f"{path}: 'tensors' must map tensor names to their shape, dtype and attr")
    for name, t in tensors.items():
        if t.get("attr") not in ("input", "output", "intermediate"):
            raise ForgeOptError(
                f"{path}: tensor '{name}' has attr {t.get('attr')!r}, not input, output or intermediate"
            )
        shape = t.get("shape")
        if not (isinstance(shape, list) and all(isinstance(d, int) for d in shape)):
            raise ForgeOptError(f"{path}: tensor '{name}' has shape {shape!r}, not a list of sizes")
        if "dtype" in t:
            if not isinstance(t["dtype"], str):
                raise ForgeOptError(f"{path}: tensor '{name}' has dtype {t['dtype']!r}, not a numpy type's name")
            try:
                t["dtype"] = np.dtype(t["dtype"]).name
            except TypeError:
                raise ForgeOptError(
                    f"{path}: tensor '{name}' has dtype {t['dtype']!r}, which is no numpy type"
                ) from None
    return tensors


def _fill_dtypes(tensors: dict[str, dict], graph: SplitGraph, where: str) -> None:
    """The dtype of each tensor the graph reads or makes that has none (as
    AutoSplit's described form leaves it), from the sub-model's declared types."""
    missing = [x for x in (*graph.inputs, *graph.outputs) if "dtype" not in tensors[x]]
    if not missing:
        return
    try:
        model = onnx.load(graph.on(0).model_path, load_external_data=False)
    except Exception as e:  # protobuf's errors have no common base
        raise ForgeOptError(f"{where}: cannot read {graph.on(0).model_path}: {e}") from None
    g = model.graph
    declared = {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}
    for x in missing:
        tp = declared.get(x)
        if tp is not None and tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.elem_type:
            tensors[x]["dtype"] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)).name


def _grid_size(infos: dict, path: Path) -> int:
    """Devices in the plan's grid (1 for a plain split)."""
    grid = infos.get("grid")
    if grid is None:
        return 1
    shape = grid.get("shape") if isinstance(grid, dict) else None
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] >= 1):
        raise ForgeOptError(f"{path}: 'grid' must be {{\"shape\": [P]}}, a 1-d grid of P devices")
    return shape[0]
