"""`graph_infos.json` as typed records: a split's sub-models (AutoSplit's
format) or a tensor-parallel plan's segments (the same, with a grid, its
collectives, devices and layers). `Plan.to_json` is the one writer and
`Plan.from_json` the one reader, which checks every field and reference
that needs no file; `folder.read_split` checks the files. The records state
the format once: `records.py` writes and reads each from its fields'
annotations, and the reader here adds what refers to what (and AutoSplit's
own spellings). The schema a user validates against is
`docs/graph_infos.schema.json`; a test holds the records to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forge_opt.diagnostics import ForgeOptError
from forge_opt.dtypes import holds
from forge_opt.plan.records import Reader, to_json

INFOS = "graph_infos.json"
#: beside a split's or plan's graph_infos.json: the outputs no sub-model computes (weights returned as they are)
HOST_OUTPUTS = "host_outputs.npz"
DEVICE, CPU = "tt", "cpu"
#: what AutoSplit's own files call the accelerator
AUTOSPLIT_DEVICE = "tpu"
ATTRS = ("input", "output", "intermediate")
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
BRANCHES = ("then", "else")


@dataclass
class TensorInfo:
    shape: list[int]  # -1 for a size known only at run time; of a split tensor, one device's block
    dtype: str  # numpy's name; "" where AutoSplit's described form leaves it out (the sub-model declares it)
    attr: str  # "input", "output" (of the model) or "intermediate"
    split_axis: int | None = None  # tensor parallelism: each device holds its block along this axis
    split_blocks: int | None = None  # of them, on a mesh split by its rows: R, device r·C + c holding block r

    def to_json(self) -> dict:
        out: dict[str, Any] = {"shape": self.shape}
        if self.dtype:
            out["dtype"] = self.dtype
        out["attr"] = self.attr
        if self.split_axis is not None:
            out["split_axis"] = self.split_axis
        if self.split_blocks is not None:
            out["split_blocks"] = self.split_blocks
        return out

    def block_of(self, rank: int, devices: int) -> tuple[int, int]:
        """Which of how many blocks of a split tensor device `rank` of
        `devices` holds: its own, or (`split_blocks`) its row's."""
        count = self.split_blocks or devices
        return rank // (devices // count), count


@dataclass
class Branch:
    folder: str  # beside graph_infos.json: the branch's own split
    outputs: list[str]


@dataclass
class Branches:
    """A run-time If's sub-model: the host picks a branch by `condition`;
    `results` are the If's outputs, each branch's `outputs` its own."""

    condition: str
    results: list[str]
    then: Branch
    orelse: Branch = field(metadata={"key": "else"})

    def of(self, which: str) -> Branch:
        return self.then if which == "then" else self.orelse


@dataclass
class LoopBody:
    folder: str
    inputs: list[str]  # the iteration number, the condition, the carried values
    outputs: list[str]  # the condition, the carried values, the scan outputs


@dataclass
class Loop:
    """A run-time Loop's sub-model: the host runs `body` while the trip
    count and condition allow (each "" when the Loop has none)."""

    trip_count: str
    condition: str
    initial: list[str]
    results: list[str]
    body: LoopBody



@dataclass
class Graph:
    """One sub-model (or, of a plan, one segment every device runs: its
    paths hold `{rank}`), its paths relative to the plan's folder."""

    inputs: list[str]
    outputs: list[str]
    device: str  # DEVICE or CPU
    model_path: str
    module_path: str | None = None  # a plan's segment: its Forge module
    context_dir: str | None = None  # a device sub-model: where `convert` writes its module
    why: dict[str, str] = field(default_factory=dict)  # of a CPU sub-model: why each node is on the CPU
    branches: Branches | None = None
    loop: Loop | None = None
    stage: int | None = None  # a pipeline's: the stage (and device) this graph runs on

    def host_reads(self) -> list[str]:
        """The values the host reads to run a run-time If or Loop itself (its
        condition; the trip count, condition and initial values): each an
        input of the graph or a weight of its sub-model."""
        if self.branches is not None:
            return [self.branches.condition]
        if self.loop is not None:
            return [x for x in (self.loop.trip_count, self.loop.condition, *self.loop.initial) if x]
        return []

    def sub_folders(self) -> dict[str, str]:
        """A run-time If's branches' or Loop's body's split folders, by role."""
        if self.branches is not None:
            return {which: self.branches.of(which).folder for which in BRANCHES}
        if self.loop is not None:
            return {"body": self.loop.body.folder}
        return {}

    def to_json(self) -> dict:
        info = {"model_path": self.model_path}
        if self.module_path is not None:
            info["module_path"] = self.module_path
        out: dict[str, Any] = {"inputs": self.inputs, "outputs": self.outputs, "device": self.device,
                               "model_info": info}
        if self.context_dir is not None:
            out["context_dir"] = self.context_dir
        if self.stage is not None:
            out["stage"] = self.stage
        if self.why:
            out["why"] = self.why
        if self.branches is not None:
            out["branches"] = to_json(self.branches)
        if self.loop is not None:
            out["loop"] = to_json(self.loop)
        return out


@dataclass
class Collective:
    after_graph: int
    op: str  # one of COLLECTIVES
    input: str
    output: str
    bytes: int
    ring_bytes_per_device: int
    axis: int | None = None  # of a gather or scatter
    # on a mesh: the grid axis it runs over (0: each column's R devices, 1: each row's C), and that count
    mesh_axis: int | None = None
    group: int | None = None
    reduction: str | None = None  # an all-reduce's, where not a sum: "max"
    line: int | None = None  # on a mesh: the collective over all R·C devices it is part of (`collectives-on-mesh`)


@dataclass
class Device:
    rank: int
    parameter_bytes: int  # of its weights file
    parameters: int
    constant_bytes: int
    # what it holds its parameters and constants in: a block float's weights at its bytes per element
    stored_bytes: int = 0
    # the most activation bytes alive at once, the program run in order (each value freed after its last reader)
    activation_bytes: int = 0


#: the cases a layer can take (`transforms/tp/annotate.py` chooses them)
COLUMN, ROW, VOCAB, REPLICATE = "column", "row", "vocab", "replicated"
#: how a mesh's devices share the weights (`--mesh-layout`): each split over all R·C as on a line of them,
#: or llama3_70b_galaxy's blocks over both axes (`tp/sharing`)
LINE_LAYOUT, GALAXY_LAYOUT = "line", "galaxy"
MESH_LAYOUTS = (LINE_LAYOUT, GALAXY_LAYOUT)
OUT_CHANNELS, IN_CHANNELS, GROUPS = "out-channel", "in-channel", "grouped"
EXPERTS = "expert"


@dataclass
class Layer:
    """A tensor-parallel layer and its case (`transforms/tp/annotate.py`)."""

    node: str
    kind: str
    case: str
    packed: int = 0  # parts of a packed column layer (3 for a fused QKV)
    padded_rows: int = 0
    reason: str = ""
    unshared: bool = False
    blocks: int = 0  # split by a mesh's rows: their count, each row one block (0: one block a device)
    column_case: str | None = None  # the Galaxy layout: the case over the mesh's columns (`case`: over its rows)


@dataclass
class Output:
    """A model output: the tensor the host returns, or (`file`) a value no
    device computes, saved by name in HOST_OUTPUTS."""

    name: str
    tensor: str | None = None
    file: str | None = None


@dataclass
class LinePlan:
    """What the 1-d plan on all R·C devices of a mesh costs, where the
    mesh's plan is made otherwise (Galaxy's layout): the report's
    comparison, priced as the plan's own collectives are."""

    collectives: int
    ring_steps: int
    ring_bytes_per_device: int


@dataclass
class StaticCache:
    """A decoder's KV cache kept on the devices at a fixed length
    (`static-kv-cache`), so that a runtime can leave it there: each past
    input, the present output that returns it written, and the input
    naming the position a step writes at."""

    length: int
    position: str
    caches: dict[str, str]  # each past input's present output


@dataclass
class Send:
    """A pipeline's activation sent between stages: `tensor`, made by stage
    `source`, to each later stage in `to` that reads it (device d of one
    stage to device d of the next, point to point)."""

    tensor: str
    source: int = field(metadata={"key": "from"})
    to: list[int]


def pipeline_sends(graphs: list[Graph]) -> list[Send]:
    """The sends a pipeline's stages (`graphs`, stage k the k-th) need: each
    value a stage makes, to every later stage that reads it."""
    out = []
    for k, g in enumerate(graphs):
        for x in g.outputs:
            to = [j for j in range(k + 1, len(graphs)) if x in graphs[j].inputs]
            if to:
                out.append(Send(x, k, to))
    return out


@dataclass
class Plan:
    graphs: list[Graph]
    tensors: dict[str, TensorInfo]
    layout: str = "NCHW"
    parallel: int = 1  # a split: each device sub-model runs tensor-parallel on this many devices
    grid: str | None = None  # a tensor-parallel plan: its grid's name (MLIR's shard.grid)
    # a plan's grid as a mesh [R, C], or the mesh a split's device sub-models run on (None: a line of devices)
    mesh: list[int] | None = None
    mesh_layout: str = LINE_LAYOUT  # on a mesh: how its devices share the weights
    devices: list[Device] = field(default_factory=list)  # a plan: one per device of the grid
    collectives: list[Collective] = field(default_factory=list)
    layers: list[Layer] = field(default_factory=list)
    outputs: list[Output] | None = None  # None in AutoSplit's files: the `output` tensors are returned
    static_cache: StaticCache | None = None
    sends: list[Send] = field(default_factory=list)  # a pipeline's: the activations its stages pass on
    line_plan: LinePlan | None = None  # Galaxy's layout: the 1-d plan on its R·C devices, for comparison

    @property
    def is_parallel(self) -> bool:
        """A tensor-parallel plan (segments over a grid), not a split."""
        return self.grid is not None

    def cache_of(self, graph: Graph) -> int:
        """The positions of the plan's static KV cache `graph`, a split's
        device sub-model, keeps some of (0: none): its converted module then
        takes the cache's position after its sub-model's inputs, as
        `static-kv-cache` adds it."""
        cache = self.static_cache
        if cache is None or self.is_parallel or not any(x in cache.caches for x in graph.inputs):
            return 0
        return cache.length

    @property
    def stages(self) -> int:
        """A pipeline's stage count (1: no pipeline)."""
        return len(self.graphs) if self.graphs and self.graphs[0].stage is not None else 1

    @property
    def device_count(self) -> int:
        """The devices a run takes: the grid's, or a split's `parallel` (on
        each of a pipeline's stages)."""
        return len(self.devices) if self.is_parallel else self.parallel * self.stages

    def inputs(self) -> list[str]:
        return [name for name, t in self.tensors.items() if t.attr == "input"]

    def returned_tensors(self) -> dict[str, str]:
        """The tensor each output the run returns is, by the output's name:
        the plan's `outputs` (those not in HOST_OUTPUTS), or without them
        (AutoSplit's own files) its `output` tensors."""
        if self.outputs is None:
            return {name: name for name, t in self.tensors.items() if t.attr == "output"}
        return {o.name: o.tensor or o.name for o in self.outputs if not o.file}

    def whole_shape(self, name: str) -> list[int]:
        """A tensor's shape as the host holds it (a split one joined from the devices')."""
        t = self.tensors[name]
        shape = list(t.shape)
        if t.split_axis is not None:
            shape[t.split_axis] *= t.split_blocks or self.device_count
        return shape

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "graphs": [g.to_json() for g in self.graphs],
            "tensors": {name: t.to_json() for name, t in self.tensors.items()},
            "graph_num": len(self.graphs),
            "platform": "onnx",
            "dynamic": any(d < 0 for t in self.tensors.values() for d in t.shape),
            "layout": self.layout,
        }
        if self.parallel > 1:
            out["parallel"] = self.parallel
            if self.mesh is not None:
                out["mesh"] = self.mesh
        if self.mesh is not None and self.mesh_layout != LINE_LAYOUT:
            out["mesh_layout"] = self.mesh_layout
        if self.grid is not None:
            out["grid"] = {"name": self.grid, "shape": self.mesh or [len(self.devices)]}
            out["collectives"] = [to_json(c) for c in self.collectives]
            out["devices"] = [to_json(d) for d in self.devices]
            out["layers"] = [to_json(layer) for layer in self.layers]
        if self.outputs is not None:
            out["outputs"] = [to_json(o) for o in self.outputs]
        if self.static_cache is not None:
            out["static_cache"] = to_json(self.static_cache)
        if self.line_plan is not None:
            out["line_plan"] = to_json(self.line_plan)
        if self.stages > 1:
            out["sends"] = [to_json(s) for s in self.sends]
        return out

    @staticmethod
    def from_json(data: Any, path: str) -> Plan:
        """The records of a `graph_infos.json`'s contents, each field and
        each tensor reference checked: an error names the file and the entry."""
        return _Reader(path).plan(data)


class _Reader(Reader):
    """`Plan.from_json`: the records read as their fields type them
    (`records.Reader`), and here what they refer to checked, each error
    naming the file (`path`) and entry."""

    def __init__(self, path: str):
        super().__init__(lambda message: ForgeOptError(f"{path}: {message}"))

    def plan(self, data: Any) -> Plan:
        if not isinstance(data, dict):
            raise self.fail("not a split's description (a JSON object with graphs and tensors)")
        for key in ("graphs", "tensors", "graph_num"):
            if key not in data:
                raise self.fail(f"the field '{key}' is missing")
        if not isinstance(data["graphs"], list) or not all(isinstance(g, dict) for g in data["graphs"]):
            raise self.fail("'graphs' must be a list of sub-model entries")
        if type(data["graph_num"]) is not int:
            raise self.fail(f"graph_num is {data['graph_num']!r}, not a count")
        tensors = self.tensors(data["tensors"])
        if data["graph_num"] != len(data["graphs"]):
            raise self.fail(f"graph_num is {data['graph_num']} but there are {len(data['graphs'])} graphs")
        parallel = data.get("parallel", 1)
        if type(parallel) is not int or parallel < 1:
            raise self.fail(f"parallel is {parallel!r}, not a count of devices")
        plan = Plan([], tensors, layout=str(data.get("layout", "NCHW")), parallel=parallel)
        if "mesh" in data:
            mesh: list[int] = self.value(list[int], data["mesh"], "the plan", "mesh")
            if len(mesh) != 2 or mesh[0] * mesh[1] != parallel:
                raise self.fail(f"mesh is {mesh}, not [R, C] of the {parallel} devices of 'parallel'")
            plan.mesh = mesh
        if "mesh_layout" in data:
            if data["mesh_layout"] not in MESH_LAYOUTS or ("mesh" not in data and "grid" not in data):
                raise self.fail(f"mesh_layout is {data['mesh_layout']!r}: one of {', '.join(MESH_LAYOUTS)}, "
                                "with a mesh")
            plan.mesh_layout = data["mesh_layout"]
        if "grid" in data:
            plan.grid, shape = self.grid(data["grid"])
            plan.mesh, count = (shape if len(shape) == 2 else None), math.prod(shape)
            plan.devices = [self.record(Device, d, f"devices[{n}]") for n, d in enumerate(data.get("devices", []))]
            if [d.rank for d in plan.devices] != list(range(count)):
                raise self.fail(f"'devices' must list the grid's {count} devices, by rank")
            layers = data.get("layers", [])
            plan.layers = [self.record(Layer, x, f"layers[{n}]", extra=True) for n, x in enumerate(layers)]
            plan.collectives = [self.collective(c, n, plan.mesh) for n, c in enumerate(data.get("collectives", []))]
        known = set(plan.inputs())
        stages = [entry.get("stage") for entry in data["graphs"]]
        if any(x is not None for x in stages) and stages != list(range(len(stages))):
            raise self.fail(f"the graphs' stages are {stages}: a pipeline's graphs are its stages 0, 1, ... in order")
        for n, entry in enumerate(data["graphs"]):
            graph = self.graph(entry, f"graphs[{n}]", tensors)
            for x in graph.inputs:
                if x not in known:
                    raise self.fail(f"graphs[{n}]: reads '{x}' before any earlier graph makes it (a cycle or a bad "
                                    "order)")
            known |= set(graph.outputs)
            plan.graphs.append(graph)
            for c, step in enumerate(plan.collectives):
                if step.after_graph == n:
                    if step.input not in known or step.output not in tensors:
                        raise self.fail(f"collectives[{c}] reads a tensor no earlier graph makes, or makes one not "
                                        "in 'tensors'")
                    known.add(step.output)
        if plan.stages > 1:
            plan.sends = self.sends(data.get("sends"), plan.graphs)
        elif "sends" in data:
            raise self.fail("'sends' are a pipeline's, but the graphs have no stages")
        if "static_cache" in data:
            plan.static_cache = self.static_cache(data["static_cache"], tensors)
        if "line_plan" in data:
            plan.line_plan = self.record(LinePlan, data["line_plan"], "line_plan")
        if "outputs" in data:
            plan.outputs = self.outputs(data["outputs"], known)
        else:
            for name, t in tensors.items():
                if t.attr == "output" and name not in known:
                    raise self.fail(f"the output '{name}' is made by no graph")
        # what a run returns: the `output` tensors, or what the plan's `outputs` name beside them (a program that
        # returns its input, or a value computed on the host)
        inputs = {name for name, t in tensors.items() if t.attr == "input"}
        if not any(t.attr == "output" for t in tensors.values()) and not any(
                o.file is not None or o.tensor in inputs for o in plan.outputs or []):
            raise self.fail("no tensor has attr 'output', so a run would return nothing to compare")
        return plan

    def sends(self, entries: Any, graphs: list[Graph]) -> list[Send]:
        """A pipeline's sends: exactly those its stages need, each named where
        one is missing or carries what its stage does not read."""
        if entries is None:
            raise self.fail("a pipeline's plan lists the activations its stages send ('sends'): split the model "
                            "again with this forge-split")
        given = self.value(list[Send], entries, "the plan", "sends")
        have = {(s.tensor, s.source, j) for s in given for j in s.to}
        need = {(s.tensor, s.source, j) for s in pipeline_sends(graphs) for j in s.to}
        for x, k, j in sorted(need - have):
            raise self.fail(f"sends: stage {j} reads '{x}' from stage {k}, but no send carries it")
        for x, k, j in sorted(have - need):
            raise self.fail(f"sends: '{x}' is sent from stage {k} to stage {j}, which does not read it from there")
        return given

    def static_cache(self, entry: Any, tensors: dict[str, TensorInfo]) -> StaticCache:
        cache = self.record(StaticCache, entry, "static_cache")
        if cache.length < 1:
            raise self.fail(f"static_cache: length is {cache.length}, not a count of positions")
        if tensors.get(cache.position, TensorInfo([], "", "")).attr != "input":
            raise self.fail(f"static_cache: position {cache.position!r} is not an input of the plan")
        if not all(k in tensors and tensors[k].attr == "input" and v in tensors for k, v in cache.caches.items()):
            raise self.fail("static_cache: caches must map the plan's past inputs to its present tensors")
        return cache

    def tensors(self, tensors: Any) -> dict[str, TensorInfo]:
        """AutoSplit writes a dict by name; its docstrings show a list of `{name, shape, attr}`, read too."""
        if isinstance(tensors, list):
            if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in tensors):
                raise self.fail("'tensors' as a list needs a 'name' in every entry")
            tensors = {t["name"]: {k: v for k, v in t.items() if k != "name"} for t in tensors}
        if not isinstance(tensors, dict) or not all(isinstance(t, dict) for t in tensors.values()):
            raise self.fail("'tensors' must map tensor names to their shape, dtype and attr")
        return {name: self.tensor(name, t) for name, t in tensors.items()}

    def tensor(self, name: str, t: dict) -> TensorInfo:
        if t.get("attr") not in ATTRS:
            raise self.fail(f"tensor '{name}' has attr {t.get('attr')!r}, not input, output or intermediate")
        shape = t.get("shape")
        if not (isinstance(shape, list) and all(type(d) is int for d in shape)):
            raise self.fail(f"tensor '{name}' has shape {shape!r}, not a list of sizes")
        axis = t.get("split_axis")
        if axis is not None and not (type(axis) is int and 0 <= axis < len(shape)):
            raise self.fail(f"tensor '{name}' has split_axis {axis!r}, not an axis of its shape")
        blocks = t.get("split_blocks")
        if blocks is not None and not (type(blocks) is int and blocks > 0 and axis is not None):
            raise self.fail(f"tensor '{name}' has split_blocks {blocks!r}, not a count of blocks of a split_axis")
        return TensorInfo(shape, self.dtype(name, t["dtype"]) if "dtype" in t else "", t["attr"], axis, blocks)

    def dtype(self, name: str, given: Any) -> str:
        if not isinstance(given, str):
            raise self.fail(f"tensor '{name}' has dtype {given!r}, not a numpy type's name")
        try:
            dtype = np.dtype(given)
        except TypeError:
            raise self.fail(f"tensor '{name}' has dtype {given!r}, which is no numpy type") from None
        if not holds(dtype) and dtype != np.dtype(object):  # object: strings, which CPU sub-models carry
            raise self.fail(f"tensor '{name}' has dtype {given!r}, which is no tensor element type")
        return dtype.name

    def grid(self, grid: Any) -> tuple[str, list[int]]:
        shape = grid.get("shape") if isinstance(grid, dict) else None
        if not (isinstance(shape, list) and 1 <= len(shape) <= 2 and all(type(d) is int and d >= 1 for d in shape)):
            raise self.fail("'grid' must be {\"shape\": [P]}, a line of P devices, or {\"shape\": [R, C]}, a mesh")
        return str(grid.get("name", "grid")), shape

    def collective(self, step: Any, n: int, mesh: list[int] | None) -> Collective:
        where = f"collectives[{n}]"
        record = self.record(Collective, step, where)
        if record.op not in COLLECTIVES:
            raise self.fail(f"{where}: op '{record.op}' is none of {', '.join(COLLECTIVES)}")
        if (record.axis is None) != (record.op == "all_reduce"):
            raise self.fail(f"{where}: an {record.op} {'takes no' if record.op == 'all_reduce' else 'needs an'} axis")
        if record.reduction not in (None, "max") or (record.reduction is not None and record.op != "all_reduce"):
            raise self.fail(f"{where}: reduction '{record.reduction}': an all_reduce sums (none given) or takes "
                            "the max")
        if mesh is None and (record.mesh_axis is not None or record.group is not None):
            raise self.fail(f"{where}: names a mesh axis, but the grid is a line")
        if mesh is not None and (record.mesh_axis not in (0, 1) or record.group != mesh[record.mesh_axis]):
            raise self.fail(f"{where}: on the mesh {mesh} a collective names its mesh_axis (0 or 1) and its group "
                            "(that axis's device count)")
        return record

    def graph(self, entry: dict, where: str, tensors: dict[str, TensorInfo]) -> Graph:
        for key in ("inputs", "outputs", "device", "model_info"):
            if key not in entry:
                raise self.fail(f"{where}: the field '{key}' is missing")
        device = DEVICE if entry["device"] == AUTOSPLIT_DEVICE else entry["device"]
        if device not in (DEVICE, CPU):
            raise self.fail(f"{where}: device '{entry['device']}' is neither '{DEVICE}' nor '{CPU}'")
        inputs, outputs = (self.value(list[str], entry[k], where, k) for k in ("inputs", "outputs"))
        info = entry["model_info"]
        if not isinstance(info, dict) or not isinstance(info.get("model_path"), str):
            raise self.fail(f"{where}: 'model_info' must be an object with the sub-model's model_path")
        for x in (*inputs, *outputs):
            if x not in tensors:
                raise self.fail(f"{where}: tensor '{x}' is not in 'tensors'")
        module, context, why = info.get("module_path"), entry.get("context_dir"), entry.get("why", {})
        if not all(x is None or isinstance(x, str) for x in (module, context)):
            raise self.fail(f"{where}: module_path and context_dir must be paths")
        if not isinstance(why, dict) or not all(isinstance(v, str) for v in why.values()):
            raise self.fail(f"{where}: 'why' must map node names to reasons")
        graph = Graph(inputs, outputs, device, info["model_path"], module, context or None, why,
                      stage=self.value(int | None, entry.get("stage"), where, "stage"))
        if "branches" in entry:
            graph.branches = self.branches(entry["branches"], where)
        if "loop" in entry:
            graph.loop = self.loop(entry["loop"], where)
        return graph

    def branches(self, info: Any, where: str) -> Branches:
        branches = self.record(Branches, info, f"{where}.branches")
        if not branches.condition:
            raise self.fail(f"{where}: the branches' condition must be a tensor name")
        for which in BRANCHES:
            branch = branches.of(which)
            if not branch.folder.endswith(f"_{which}"):  # the folder split_model wrote for this branch
                raise self.fail(f"{where}: branches.{which} names the folder {branch.folder}, not one of a "
                                f"'{which}' branch")
            if len(branch.outputs) != len(branches.results):
                raise self.fail(f"{where}: branches.{which} has {len(branch.outputs)} outputs for "
                                f"{len(branches.results)} results")
        return branches

    def loop(self, info: Any, where: str) -> Loop:
        loop = self.record(Loop, info, f"{where}.loop")
        carried, body = len(loop.initial), loop.body
        if len(body.inputs) != 2 + carried or len(body.outputs) < 1 + carried:
            raise self.fail(f"{where}: loop.body has {len(body.inputs)} inputs and {len(body.outputs)} "
                            f"outputs for {carried} carried values")
        return loop

    def outputs(self, outputs: Any, known: set[str]) -> list[Output]:
        """`outputs` (ours): each a tensor a graph makes or an input, or a value in HOST_OUTPUTS."""
        if not isinstance(outputs, list):
            raise self.fail("'outputs' must be a list of {name, tensor or file}")
        out = [self.record(Output, o, f"outputs[{i}]") for i, o in enumerate(outputs)]
        for o in out:
            if o.tensor is not None:
                if o.tensor not in known:
                    raise self.fail(f"the output '{o.name}' is tensor '{o.tensor}', which no graph makes and no "
                                    "input is")
            elif o.file != HOST_OUTPUTS:
                raise self.fail(f"the output '{o.name}' is neither a tensor nor in {HOST_OUTPUTS}")
        return out
