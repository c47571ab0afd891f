"""A split on disk: `graph_<n>.onnx` per sub-model and `graph_infos.json`,
written by `split` and read back (checked field by field) by `convert` and
`run`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.dtypes import holds
from forge_opt.files import link_or_copy, remove_tree_entries, save_npz, save_onnx, write_text
from forge_opt.frontends.onnx.shapes import is_known
from forge_opt.frontends.onnx.values import initializer_array
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
            link_or_copy(target, self.folder / name)  # the name is unlinked first: never written through
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
            if not self.size:  # a name an older split left may be a link: a new file, never through it
                (self.folder / WEIGHTS).unlink(missing_ok=True)
            with open(self.folder / WEIGHTS, "ab") as f:
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
    folder.mkdir(parents=True, exist_ok=True)  # an older split is gone already (`clear_folder`)
    infos = graph_infos(plan, layout)
    for n, (key, entry) in (control or {}).items():
        infos["graphs"][n][key] = entry
    if parallel > 1:
        infos["parallel"] = parallel
    weights = _Weights(folder, base)
    for n, entry in enumerate(infos["graphs"]):
        save_onnx(sub_model(model, plan, n, weights), folder / entry["model_info"]["model_path"])
    infos["outputs"], host = _returns(model, plan, base)
    if host:
        save_npz(folder / HOST_OUTPUTS, host)
    write_infos(folder, infos)
    return infos


#: beside a split's or plan's graph_infos.json: the outputs no sub-model computes (weights returned as they are)
HOST_OUTPUTS = "host_outputs.npz"


def _returns(model: ModelProto, plan: Plan, base: Path | None) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The model's outputs in order, each with where the host finds it: a
    tensor (a sub-model's, or a model input returned as it is) or, for a
    weight returned as it is, the split's `host_outputs.npz`; and those
    weights by name."""
    made = {x for sub in plan.graphs for x in sub.outputs} | set(plan.tensors)
    weights = {t.name: t for t in model.graph.initializer}
    entries, host = [], {}
    for o in model.graph.output:
        if o.name in made or o.name not in weights:
            entries.append({"name": o.name, "tensor": o.name})
            continue
        host[o.name] = initializer_array(weights[o.name], base)
        entries.append({"name": o.name, "file": HOST_OUTPUTS})
    return entries, host


def write_infos(folder: Path, infos: dict) -> None:
    """`graph_infos.json`, for a split and for a tensor-parallel plan alike
    (`read_split` reads both)."""
    write_text(folder / INFOS, json.dumps(infos, indent=2) + "\n")


#: what a split or a plan writes into its folder, and what `--force` removes of an older one
_OURS = re.compile(r"graph_infos\.json|graph_(ir_)?\d+.*|data\d+_.*|weights\.bin|dev\d+|host_outputs\.npz|\..*\.tmp")


def check_folder(folder: Path, base: Path | None, force: bool, advice: str) -> None:
    """Refuse an output folder for a split or plan: one that holds the
    model's own files (`base`: the new files would replace or truncate the
    model's data), a file, or a folder that is not empty (unless `force`)."""
    if base is not None and folder.resolve() == base.resolve():
        raise ForgeOptError(f"{folder}: holds the model itself; write the split into a folder of its own")
    if folder.exists() and not folder.is_dir():
        raise ForgeOptError(f"{folder}: is a file, not a folder")
    if folder.exists() and any(folder.iterdir()) and not force:
        raise ForgeOptError(f"{folder}: exists and is not empty ({advice})")


def clear_folder(folder: Path) -> None:
    """Remove the split or plan an older run left in `folder` (what
    `--force` replaces), so nothing of it is run or written through."""
    if folder.is_dir():
        remove_tree_entries(folder, [p.name for p in folder.iterdir() if _OURS.fullmatch(p.name)])


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


#: beside a converted module: the digest of the sub-model it was converted from
SOURCE = "converted_from.json"


def model_digest(path: Path) -> str:
    """The SHA-256 of a sub-model's file (its graph and small weights)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def converted_from_this(g: SplitGraph) -> bool:
    """Whether `g`'s converted module was converted from `g`'s sub-model as
    it is now (not from the sub-model an older split put there)."""
    assert g.context_dir is not None
    try:
        recorded = json.loads((g.context_dir / SOURCE).read_text()).get("model_sha256")
    except (OSError, ValueError, AttributeError):
        return False
    return recorded == model_digest(g.model_path)


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
    if not isinstance(infos["graphs"], list) or not all(isinstance(g, dict) for g in infos["graphs"]):
        raise ForgeOptError(f"{path}: 'graphs' must be a list of sub-model entries")
    if type(infos["graph_num"]) is not int:
        raise ForgeOptError(f"{path}: graph_num is {infos['graph_num']!r}, not a count")
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
        for key in ("inputs", "outputs"):
            if not isinstance(entry[key], list) or not all(isinstance(x, str) for x in entry[key]):
                raise ForgeOptError(f"{where}: '{key}' must be a list of tensor names")
        if not isinstance(entry["model_info"], dict):
            raise ForgeOptError(f"{where}: 'model_info' must be an object with the sub-model's model_path")
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
        if "grid" not in infos:  # a plan's segments are Forge modules over a weights file: no graph to compare
            _check_against_model(tensors, graph, where)
        for c, step in enumerate(collectives):
            if step.get("after_graph") == n:
                if step.get("input") not in known or step.get("output") not in tensors:
                    raise ForgeOptError(f"{path}: collectives[{c}] reads a tensor no earlier graph makes, or makes "
                                        "one not in 'tensors'")
                known.add(step["output"])
    for name, t in tensors.items():
        if "dtype" not in t:
            raise ForgeOptError(f"{path}: tensor '{name}' has no dtype, and no sub-model declares its type")
        if t["attr"] == "output" and name not in known and "outputs" not in infos:
            raise ForgeOptError(f"{path}: the output '{name}' is made by no graph")
    _check_returns(infos, known, folder, path)
    return infos, graphs


def _check_returns(infos: dict, known: set[str], folder: Path, path: Path) -> None:
    """`outputs` (ours; AutoSplit's files return their `output` tensors):
    each a tensor a graph makes or an input, or a value in `host_outputs.npz`."""
    outputs = infos.get("outputs")
    if outputs is None:
        return
    if not isinstance(outputs, list) or not all(isinstance(o, dict) and isinstance(o.get("name"), str)
                                                for o in outputs):
        raise ForgeOptError(f"{path}: 'outputs' must be a list of {{name, tensor or file}}")
    for o in outputs:
        if "tensor" in o:
            if o["tensor"] not in known:
                raise ForgeOptError(f"{path}: the output '{o['name']}' is tensor '{o['tensor']}', which no graph "
                                    "makes and no input is")
        elif o.get("file") != HOST_OUTPUTS or not (folder / HOST_OUTPUTS).is_file():
            raise ForgeOptError(f"{path}: the output '{o['name']}' is neither a tensor nor in {folder / HOST_OUTPUTS}")


def returned(infos: dict, folder: Path, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The run's outputs by the model's names, from the values it computed
    (and the plan's `host_outputs.npz`); without `outputs` (AutoSplit's own
    files), its `output` tensors."""
    outputs = infos.get("outputs")
    if outputs is None:
        return {name: values[name] for name, t in infos["tensors"].items() if t["attr"] == "output"}
    host = {}
    if any("file" in o for o in outputs):
        with np.load(folder / HOST_OUTPUTS) as data:
            host = {k: data[k] for k in data.files}
    return {o["name"]: host[o["name"]] if "file" in o else values[o["tensor"]] for o in outputs}


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
        if not branch["folder"].endswith(f"_{which}"):  # the folder split_model wrote for this branch
            raise ForgeOptError(f"{where}: branches.{which} names the folder {branch['folder']}, not one of a "
                                f"'{which}' branch")
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
        if not (isinstance(shape, list) and all(type(d) is int for d in shape)):
            raise ForgeOptError(f"{path}: tensor '{name}' has shape {shape!r}, not a list of sizes")
        if "dtype" in t:
            if not isinstance(t["dtype"], str):
                raise ForgeOptError(f"{path}: tensor '{name}' has dtype {t['dtype']!r}, not a numpy type's name")
            given = t["dtype"]
            try:
                dtype = np.dtype(given)
            except TypeError:
                raise ForgeOptError(f"{path}: tensor '{name}' has dtype {given!r}, which is no numpy type") from None
            if not holds(dtype) and dtype != np.dtype(object):  # object: strings, which CPU sub-models carry
                raise ForgeOptError(f"{path}: tensor '{name}' has dtype {given!r}, which is no tensor element type")
            t["dtype"] = dtype.name
    return tensors


def _check_against_model(tensors: dict[str, dict], graph: SplitGraph, where: str) -> None:
    """The entry against its sub-model: the same inputs, the same outputs in
    the same order (the runner pairs them by position), and each tensor's
    dtype and fixed sizes as the sub-model declares them; a dtype the entry
    leaves out (AutoSplit's described form) is taken from the sub-model."""
    try:
        model = onnx.load(graph.on(0).model_path, load_external_data=False)
    except Exception as e:  # protobuf's errors have no common base
        raise ForgeOptError(f"{where}: cannot read {graph.on(0).model_path}: {e}") from None
    g = model.graph
    initializers = {t.name for t in g.initializer}
    inputs = [i.name for i in g.input if i.name not in initializers]
    outputs = [o.name for o in g.output]
    if sorted(inputs) != sorted(graph.inputs):
        raise ForgeOptError(f"{where}: its inputs {graph.inputs} are not its sub-model's {inputs}")
    if outputs != list(graph.outputs):
        raise ForgeOptError(f"{where}: its outputs {graph.outputs} are not its sub-model's {outputs}, in order")
    declared = {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}
    for x in (*graph.inputs, *graph.outputs):
        tp = declared.get(x)
        if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.elem_type:
            continue
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)).name
        t = tensors[x]
        if "dtype" not in t:
            t["dtype"] = dtype
        elif t["dtype"] != dtype:
            raise ForgeOptError(f"{where}: tensor '{x}' is {t['dtype']} in 'tensors' but {dtype} in its sub-model")
        if tp.tensor_type.HasField("shape"):
            dims = [d.dim_value if is_known(d) else -1 for d in tp.tensor_type.shape.dim]
            if len(dims) != len(t["shape"]) or any(0 <= a != b >= 0 for a, b in zip(dims, t["shape"])):
                raise ForgeOptError(f"{where}: tensor '{x}' has shape {t['shape']} in 'tensors' but {dims} in its "
                                    "sub-model")


def _grid_size(infos: dict, path: Path) -> int:
    """Devices in the plan's grid (1 for a plain split)."""
    grid = infos.get("grid")
    if grid is None:
        return 1
    shape = grid.get("shape") if isinstance(grid, dict) else None
    if not (isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], int) and shape[0] >= 1):
        raise ForgeOptError(f"{path}: 'grid' must be {{\"shape\": [P]}}, a 1-d grid of P devices")
    return shape[0]
