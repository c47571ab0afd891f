"""A split on disk: `graph_<n>.onnx` per sub-model and `graph_infos.json`
(`plan/graph_infos.py`'s records), written by `split`; where `convert`
puts each device sub-model's module, and what `run` reads back
(`plan/folder.py` reads and checks the plan itself)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, TensorProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import link_or_copy, load_arrays, save_onnx
from forge_opt.frontends.onnx.values import initializer_array
from forge_opt.plan.folder import SplitGraph, write_infos
from forge_opt.plan.graph_infos import (
    DEVICE,
    HOST_OUTPUTS,
    LINE_LAYOUT,
    Branches,
    Graph,
    Loop,
    Output,
    Plan,
    StaticCache,
    TensorInfo,
    pipeline_sends,
)
from forge_opt.split.partition import Partition, sub_model
from forge_opt.transforms.static_cache import POSITION, cache_pairs

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
    folder: Path, model: ModelProto, partition: Partition, *, base: Path | None = None, force: bool = False,
    layout: str = "NCHW", control: dict[int, Branches | Loop] | None = None, parallel: int = 1,
    static_cache: int = 0, mesh: list[int] | None = None, mesh_layout: str = LINE_LAYOUT,
) -> Plan:
    """Write the sub-models and `graph_infos.json` into `folder` (`base`: the
    folder the model's external data is in; `control`: by sub-model, the
    record of a run-time If or Loop, `control_flow.py`; `parallel`: the
    devices each device sub-model runs on, on `mesh` [R, C] if given (laid
    out as `mesh_layout`);
    `static_cache`: the positions of the KV cache the device sub-models
    keep, each its own layers'); a folder
    that exists and is not empty is refused unless `force`."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
        raise ForgeOptError(f"{folder}: exists and is not empty (--force replaces its split)")
    folder.mkdir(parents=True, exist_ok=True)  # an older split is gone already (`clear_folder`)
    graphs = []
    for n, sub in enumerate(partition.graphs):
        graph = Graph(sub.inputs, sub.outputs, sub.device, f"graph_{n}.onnx", why=sub.why)
        if sub.device == DEVICE:
            graph.context_dir = f"graph_ir_{n}"
        if partition.cut is not None:
            graph.stage = n
        flow = (control or {}).get(n)
        if isinstance(flow, Branches):
            graph.branches = flow
        elif isinstance(flow, Loop):
            graph.loop = flow
        graphs.append(graph)
    weights = _Weights(folder, base)
    for n, graph in enumerate(graphs):
        save_onnx(sub_model(model, partition, n, weights), folder / graph.model_path)
    outputs, host = _returns(model, partition, base)
    plan = Plan(graphs, dict(partition.tensors), layout=layout, parallel=parallel, mesh=mesh, mesh_layout=mesh_layout,
                outputs=outputs)
    if partition.cut is not None:
        plan.sends = pipeline_sends(graphs)
    if static_cache:
        plan.static_cache = _static_cache(model, static_cache)
        plan.tensors[POSITION] = TensorInfo([1], "int64", "input")  # what the device sub-models keeping it take
    return write_infos(folder, plan, host)


def _static_cache(model: ModelProto, length: int) -> StaticCache:
    """The split's static KV cache: each past input with its present."""
    pairs = cache_pairs([i.name for i in model.graph.input], [o.name for o in model.graph.output])
    if not pairs:
        raise ForgeOptError("a static KV cache needs the model's past_key_values.* inputs and present.* outputs")
    return StaticCache(length, POSITION, {past: present for present, past in pairs.items()})


def _returns(model: ModelProto, partition: Partition, base: Path | None) -> tuple[list[Output], dict[str, np.ndarray]]:
    """The model's outputs in order, each with where the host finds it: a
    tensor (a sub-model's, or a model input returned as it is) or, for a
    weight returned as it is, the split's `host_outputs.npz`; and those
    weights by name."""
    made = {x for sub in partition.graphs for x in sub.outputs} | set(partition.tensors)
    weights = {t.name: t for t in model.graph.initializer}
    entries, host = [], {}
    for o in model.graph.output:
        if o.name in made or o.name not in weights:
            entries.append(Output(o.name, tensor=o.name))
            continue
        host[o.name] = initializer_array(weights[o.name], base)
        entries.append(Output(o.name, file=HOST_OUTPUTS))
    return entries, host


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


def host_weights(g: SplitGraph, values: dict[str, np.ndarray]) -> None:
    """Into `values`, the weights of a run-time If's or Loop's sub-model
    that the host reads to run it (a Loop's initial condition folded to a
    constant, say), where no earlier graph made them."""
    wanted = {x for x in g.entry.host_reads() if x not in values}
    if wanted:
        model = onnx.load(g.model_path, load_external_data=False)
        for t in model.graph.initializer:
            if t.name in wanted:
                values[t.name] = initializer_array(t, g.model_path.parent)


def returned(plan: Plan, folder: Path, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The run's outputs by the model's names, from the values it computed
    (and the plan's `host_outputs.npz`); without `outputs` (AutoSplit's own
    files), its `output` tensors."""
    tensors = plan.returned_tensors()
    if plan.outputs is None:
        return {name: values[x] for name, x in tensors.items()}
    host = {}
    if any(o.file for o in plan.outputs):
        host = load_arrays(folder / HOST_OUTPUTS)
    return {o.name: host[o.name] if o.file else values[tensors[o.name]] for o in plan.outputs}

