"""A plan on disk: `graph_infos.json` (`plan/graph_infos.py`'s records) and
the files it names, for an AutoSplit split and a tensor-parallel plan
alike: written (`write_infos`), read back with every file checked
(`read_split`), and the folder refused or cleared before a write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import remove_tree_entries, save_arrays, write_text
from forge_opt.frontends.onnx.shapes import is_known
from forge_opt.plan.graph_infos import HOST_OUTPUTS, INFOS, Graph, Plan, TensorInfo


def write_infos(folder: Path, plan: Plan, host: dict[str, np.ndarray]) -> Plan:
    """`graph_infos.json` and the values the host returns (`host`, by
    output name), for a split and for a tensor-parallel plan alike; read
    back by `read_split`, so a plan its own reader refuses fails here, not
    at its first run."""
    if host:
        save_arrays(folder / HOST_OUTPUTS, host)
    write_text(folder / INFOS, json.dumps(plan.to_json(), indent=2) + "\n")
    return read_split(folder)[0]


def _listed(folder: Path) -> list[str]:
    """The entries of `folder` its `graph_infos.json` names: the plan
    itself, each sub-model and module (their first path component: a
    device's folder, a context folder, a branch's split), the data files
    its sub-models read, the host's outputs. Nothing when there is no plan
    its reader takes: then every file there is the user's."""
    try:
        plan = Plan.from_json(json.loads((folder / INFOS).read_text()), str(folder / INFOS))
    except (OSError, ValueError, ForgeOptError):
        return []
    names = {INFOS, HOST_OUTPUTS}
    ranks = range(plan.device_count if plan.is_parallel else 1)
    for graph in plan.graphs:
        paths = [graph.model_path, graph.module_path, graph.context_dir, *graph.sub_folders().values()]
        for path in (p.replace("{rank}", str(r)) for p in paths if p is not None for r in ranks):
            parts = Path(path).parts
            if parts and not Path(path).is_absolute() and ".." not in parts:
                names.add(parts[0])
                if len(parts) == 1 and path.endswith(".onnx"):
                    names.update(_data_files(folder / path))
    return sorted(names)


def _data_files(model_path: Path) -> set[str]:
    """The external data files a sub-model beside them reads."""
    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # protobuf's errors have no common base: an unreadable sub-model names no data
        return set()
    return {e.value for t in model.graph.initializer for e in t.external_data
            if e.key == "location" and "/" not in e.value and "\\" not in e.value and e.value not in ("", ".", "..")}


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
    `--force` replaces), so nothing of it is run or written through: only
    what its `graph_infos.json` names, never a file of the user's."""
    if folder.is_dir():
        remove_tree_entries(folder, _listed(folder))


@dataclass(frozen=True)
class SplitGraph:
    """One sub-model of a split, its paths in the split's `folder`. Of a
    tensor-parallel plan, a segment every device runs: its paths are
    device `rank`'s."""

    index: int
    entry: Graph
    folder: Path
    rank: int = 0

    def _at(self, path: str | None) -> Path | None:
        return None if path is None else self.folder / path.replace("{rank}", str(self.rank))

    @property
    def device(self) -> str:
        return self.entry.device

    @property
    def inputs(self) -> list[str]:
        return self.entry.inputs

    @property
    def outputs(self) -> list[str]:
        return self.entry.outputs

    @property
    def model_path(self) -> Path:
        return self.folder / self.entry.model_path.replace("{rank}", str(self.rank))

    @property
    def module_path(self) -> Path | None:
        return self._at(self.entry.module_path)

    @property
    def context_dir(self) -> Path | None:
        return self._at(self.entry.context_dir)

    @property
    def subgraphs(self) -> dict[str, Path]:
        """A run-time If's branches' or Loop's body's split folders, by role."""
        return {role: self.folder / sub for role, sub in self.entry.sub_folders().items()}

    def on(self, rank: int) -> SplitGraph:
        """This graph's files for device `rank`."""
        return SplitGraph(self.index, self.entry, self.folder, rank)


def read_split(folder: Path) -> tuple[Plan, list[SplitGraph]]:
    """`graph_infos.json`'s records (`Plan.from_json` checks every field and
    reference) and its sub-models, each file checked: a missing file, or an
    entry that is not its sub-model's, is an error naming it."""
    path = folder / INFOS
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ForgeOptError(f"{path}: no such file (is {folder} a split?)") from None
    except json.JSONDecodeError as e:
        raise ForgeOptError(f"{path}: not valid JSON: {e}") from None
    plan = Plan.from_json(data, str(path))
    graphs = [SplitGraph(n, entry, folder) for n, entry in enumerate(plan.graphs)]
    for graph in graphs:
        where = f"{path}: graphs[{graph.index}]"
        for rank in range(plan.device_count if plan.is_parallel else 1):
            on = graph.on(rank)
            for field, p in (("model_path", on.model_path), ("module_path", on.module_path),
                             ("context_dir", on.context_dir),
                             *((f"{role} folder", folder / sub) for role, sub in graph.entry.sub_folders().items())):
                if p is not None:
                    _inside(folder, p, f"{where}: {field}")
            for p in (on.model_path, on.module_path):
                if p is not None and p.is_dir():
                    raise ForgeOptError(f"{where}: {p} is a folder, not a file")
                if p is not None and not p.is_file():
                    raise ForgeOptError(f"{where}: the file {p} does not exist")
        if not plan.is_parallel:  # a plan's segments are Forge modules over a weights file: no graph to compare
            _check_against_model(plan.tensors, graph, where)
    for name, t in plan.tensors.items():
        if not t.dtype:
            raise ForgeOptError(f"{path}: tensor '{name}' has no dtype, and no sub-model declares its type")
    if any(o.file for o in plan.outputs or []) and not (folder / HOST_OUTPUTS).is_file():
        raise ForgeOptError(f"{path}: an output is in {HOST_OUTPUTS}, which is not in {folder}")
    return plan, graphs


def _inside(folder: Path, path: Path, where: str) -> None:
    """Refuse a path of a plan that leaves its folder: absolute, through
    `..`, or through a symbolic link out of it. A plan is data a user may be
    given with a model; nothing it names is read or written elsewhere."""
    relative = path.relative_to(folder) if path.is_relative_to(folder) else None
    if relative is None or ".." in relative.parts:
        raise ForgeOptError(f"{where} {path} is outside the folder {folder}: a plan's paths are relative to it")
    if not path.resolve().is_relative_to(folder.resolve()):
        raise ForgeOptError(f"{where} {path} leads outside the folder {folder} (through a symbolic link)")


def _check_against_model(tensors: dict[str, TensorInfo], graph: SplitGraph, where: str) -> None:
    """The entry against its sub-model: the same inputs, the same outputs in
    the same order (the runner pairs them by position), and each tensor's
    dtype and fixed sizes as the sub-model declares them; a dtype the entry
    leaves out (AutoSplit's described form) is taken from the sub-model."""
    try:
        model = onnx.load(graph.model_path, load_external_data=False)
    except Exception as e:  # protobuf's errors have no common base
        raise ForgeOptError(f"{where}: cannot read {graph.model_path}: {e}") from None
    g = model.graph
    initializers = {t.name for t in g.initializer}
    inputs = [i.name for i in g.input if i.name not in initializers]
    outputs = [o.name for o in g.output]
    if sorted(inputs) != sorted(graph.inputs):
        raise ForgeOptError(f"{where}: its inputs {graph.inputs} are not its sub-model's {inputs}")
    if outputs != list(graph.outputs):
        raise ForgeOptError(f"{where}: its outputs {graph.outputs} are not its sub-model's {outputs}, in order")
    for x in graph.entry.host_reads():
        if x not in graph.inputs and x not in initializers:
            raise ForgeOptError(f"{where}: the host reads '{x}' to run its {'If' if graph.entry.branches else 'Loop'}, "
                                "which is neither an input of the graph nor a weight of its sub-model")
    declared = {v.name: v.type for v in (*g.input, *g.output, *g.value_info)}
    for x in (*graph.inputs, *graph.outputs):
        tp = declared.get(x)
        if tp is None or tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.elem_type:
            continue
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)).name
        t = tensors[x]
        if not t.dtype:
            t.dtype = dtype
        elif t.dtype != dtype:
            raise ForgeOptError(f"{where}: tensor '{x}' is {t.dtype} in 'tensors' but {dtype} in its sub-model")
        if tp.tensor_type.HasField("shape"):
            dims = [d.dim_value if is_known(d) else -1 for d in tp.tensor_type.shape.dim]
            if len(dims) != len(t.shape) or any(0 <= a != b >= 0 for a, b in zip(dims, t.shape)):
                raise ForgeOptError(f"{where}: tensor '{x}' has shape {t.shape} in 'tensors' but {dims} in its "
                                    "sub-model")
