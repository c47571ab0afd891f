"""A tensor-parallel plan as ONNX's sharding annotations (IR 11), and back.

`annotate` writes a plan's layers into the model as one device
configuration, named after the system (n300, t3k, galaxy, or pN): each
layer's node gets a `NodeDeviceConfigurationProto` whose sharding spec
splits its weight on the axis the layer's case splits (and, for a layer
that sums over devices, its input's reduction axis alike, as the
formalism requires); a replicated layer's node gets the configuration
with no spec. `plan_pins` reads a configuration back as a plan file's
layers (`transforms/tp/plan_file.py`'s terms), which `--plan-from-onnx`
compiles with. A pipeline (`annotate_stages`) is a configuration of its
own (`n300-s2`: 2 stages on an n300) whose nodes each carry their
`pipeline_stage`; `stage_pins` reads it back. A plan on a mesh
(`--mesh 8x4`) is named with its shape (`galaxy-8x4`): its weights are
split over all R·C devices as the line's are, but for a layer split by the
mesh's rows (KV heads the devices do not divide), whose R shards go to R
device groups, each a row's devices; the formalism has no mesh axes, so
the mesh lives in the name. A plan in Galaxy's layout is `galaxy-8x4-2d`:
each weight spec'd on the axis of its case over the columns and on the one
of its case over the rows (`galaxy_specs`), read back as a pin per axis.
Communication stays implicit, as the formalism has it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import onnx
from onnx import ModelProto, NodeProto, TensorProto

from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan.graph_infos import (
    COLUMN,
    GALAXY_LAYOUT,
    IN_CHANNELS,
    LINE_LAYOUT,
    OUT_CHANNELS,
    REPLICATE,
    ROW,
    VOCAB,
    Plan,
)

#: each case's axis in a plan file (1: a Linear's columns or a convolution's output channels; 0: its rows,
#: input channels, or an embedding's vocabulary; None: replicated)
PIN_AXIS: dict[str, int | None] = {COLUMN: 1, ROW: 0, VOCAB: 0, OUT_CHANNELS: 1, IN_CHANNELS: 0, REPLICATE: None}

#: the least IR version with sharding annotations
SHARDING_IR = 11


def system_name(devices: int, mesh: list[int] | None = None, layout: str = LINE_LAYOUT) -> str:
    """A configuration's name: Tenstorrent's system of that many chips, and
    a mesh's shape where the plan lays them on one (`galaxy-8x4`), marked
    `-2d` in Galaxy's layout (`galaxy-8x4-2d`)."""
    name = {2: "n300", 8: "t3k", 32: "galaxy"}.get(devices, f"p{devices}")
    if mesh is None:
        return name
    return f"{name}-{mesh[0]}x{mesh[1]}" + ("-2d" if layout == GALAXY_LAYOUT else "")


def galaxy_mesh(name: str) -> list[int] | None:
    """The mesh [R, C] of a configuration in Galaxy's layout, by its name
    (`system_name`), or None."""
    found = re.fullmatch(r".*-(\d+)x(\d+)-2d", name)
    return [int(found.group(1)), int(found.group(2))] if found else None


@dataclass
class Annotated:
    model: ModelProto
    configuration: str
    written: list[str] = field(default_factory=list)  # the layers' nodes annotated
    skipped: list[str] = field(default_factory=list)  # layers no annotation expresses, with why


def annotate(model: ModelProto, plan: Plan, name: str = "") -> Annotated:
    """A copy of `model` carrying `plan` as the configuration `name` (by
    default `system_name` of its devices), replacing one of that name."""
    name = name or system_name(plan.device_count, plan.mesh, plan.mesh_layout)
    out = _fresh_configuration(model, name, plan.device_count)
    nodes = {n.name: n for n in out.graph.node if n.name}
    done = Annotated(out, name)
    for layer in plan.layers:
        node = nodes.get(layer.node)
        column = layer.column_case or REPLICATE
        if layer.case not in PIN_AXIS or column not in PIN_AXIS or node is None:
            done.skipped.append(f"{layer.node} ({layer.case}): " + (
                "a case ONNX's annotations do not express" if node is not None else "no ONNX node of that name"))
            continue
        config = node.device_configurations.add(configuration_id=name)
        if plan.mesh_layout == GALAXY_LAYOUT:
            assert plan.mesh is not None
            galaxy_specs(config, node, PIN_AXIS[column], PIN_AXIS[layer.case], plan.mesh)
            done.written.append(layer.node)
            continue
        axes = _split_axes(node, PIN_AXIS[layer.case])
        groups = layer.blocks  # split by the mesh's rows: group -1 - r holds row r's devices
        per_row = plan.device_count // groups if groups else 0
        for tensor, axis in axes:
            spec = config.sharding_spec.add(tensor_name=tensor, device=_devices(groups, plan.device_count))
            for r in range(groups):
                spec.index_to_device_group_map.add(key=-1 - r, value=range(r * per_row, (r + 1) * per_row))
            spec.sharded_dim.add(axis=axis).simple_sharding.add(num_shards=groups or plan.device_count)
        done.written.append(layer.node)
    return done


def galaxy_specs(config, node: NodeProto, columns: int | None, rows: int | None, mesh: list[int]) -> None:
    """The specs of a layer in Galaxy's layout, added to the node's
    configuration `config`: each tensor split on the axis its case over the
    mesh's C columns gives (`columns`, a pin's axis) and on the one its case
    over the R rows gives (`rows`). Device r·C + c holds block c of the
    first and block r of the second; both on one axis are C·R blocks, block
    c·R + r. A split over one mesh axis alone goes to device groups: the
    devices of column c (key -1 - c) or of row r (key -1 - C - r)."""
    rows_n, cols_n = mesh
    axes: dict[str, list[tuple[int, int]]] = {}  # per tensor: (its axis, the mesh axis)
    for mesh_axis, pin in ((1, columns), (0, rows)):
        for tensor, axis in _split_axes(node, pin):
            axes.setdefault(tensor, []).append((axis, mesh_axis))
    for tensor, split in axes.items():
        spec = config.sharding_spec.add(tensor_name=tensor)
        if len(split) == 2:  # shard (c, r), the columns' outermost, on device r·C + c
            spec.device.extend(r * cols_n + c for c in range(cols_n) for r in range(rows_n))
            if split[0][0] == split[1][0]:
                spec.sharded_dim.add(axis=split[0][0]).simple_sharding.add(num_shards=cols_n * rows_n)
            else:
                for axis, mesh_axis in split:
                    spec.sharded_dim.add(axis=axis).simple_sharding.add(num_shards=mesh[mesh_axis])
            continue
        ((axis, mesh_axis),) = split
        for k in range(mesh[mesh_axis]):
            if mesh_axis == 1:
                key, members = -1 - k, [r * cols_n + k for r in range(rows_n)]
            else:
                key, members = -1 - cols_n - k, [k * cols_n + c for c in range(cols_n)]
            spec.device.append(key)
            spec.index_to_device_group_map.add(key=key, value=members)
        spec.sharded_dim.add(axis=axis).simple_sharding.add(num_shards=mesh[mesh_axis])


def _devices(groups: int, devices: int) -> list[int]:
    """A spec's device entries: every device, or (`groups`) the groups -1 … -groups."""
    return [-1 - r for r in range(groups)] if groups else list(range(devices))


def pipeline_name(stages: int, devices: int = 1) -> str:
    """A pipeline's configuration: its system's name and its stage count (`n300-s2`)."""
    return f"{system_name(stages * devices)}-s{stages}"


def annotate_stages(model: ModelProto, stage_of: Mapping[str, int], stages: int, devices: int = 1) -> Annotated:
    """A copy of `model` carrying a pipeline as one configuration: each node
    its stage, by name (`stage_of`: the split's nodes; a node the split
    folded away takes the latest stage of what it reads, so stages never
    fall along an edge)."""
    name = pipeline_name(stages, devices)
    out = _fresh_configuration(model, name, stages * devices)
    done = Annotated(out, name)
    made: dict[str, int] = {}
    for node in out.graph.node:
        stage = stage_of.get(node.name)
        if stage is None:
            stage = max((made[x] for x in node.input if x in made), default=0)
        else:
            done.written.append(node.name)
        node.device_configurations.add(configuration_id=name, pipeline_stage=stage)
        made.update((x, stage) for x in node.output if x)
    return done


def stage_pins(model: ModelProto, name: str = "") -> dict[str, int]:
    """The stage of each node that the pipeline configuration `name` (by
    default the model's only one) gives, by node name."""
    name = _configuration(model, name)
    stages = {}
    for node in model.graph.node:
        config = next((c for c in node.device_configurations if c.configuration_id == name), None)
        if config is not None and node.name and config.HasField("pipeline_stage"):
            stages[node.name] = config.pipeline_stage
    if not stages:
        raise ForgeOptError(f"the sharding configuration '{name}' gives no node a pipeline_stage: it is no pipeline")
    return stages


def _fresh_configuration(model: ModelProto, name: str, devices: int) -> ModelProto:
    """A copy of `model` at IR 11 with the configuration `name` made anew."""
    out = _copy(model)
    out.ir_version = max(out.ir_version, SHARDING_IR)
    for c in [c for c in out.configuration if c.name == name]:
        out.configuration.remove(c)
    out.configuration.add(name=name, num_devices=devices)
    for node in out.graph.node:
        for c in [c for c in node.device_configurations if c.configuration_id == name]:
            node.device_configurations.remove(c)
    return out


def _split_axes(node: NodeProto, pin: int | None) -> list[tuple[str, int]]:
    """The tensors of `node` a layer pinned at `pin` splits, each with its
    axis: the weight, and for a sum over devices the input's reduction
    axis too."""
    if pin is None:
        return []
    attrs = {a.name: a.i for a in node.attribute}
    if node.op_type == "Gather":  # its vocabulary, or (Galaxy's columns) its hidden
        return [(node.input[0], 0 if pin == 0 else 1)]
    if node.op_type == "Conv":
        return [(node.input[1], 0)] if pin == 1 else [(node.input[1], 1), (node.input[0], 1)]
    if node.op_type == "Gemm":
        weight_axis = (0 if pin == 1 else 1) if attrs.get("transB") else pin
        return [(node.input[1], weight_axis)] + ([(node.input[0], 0 if attrs.get("transA") else 1)] if pin == 0
                                                   else [])
    # MatMul and the quantized ones: the weight's last two axes are its rows and columns
    return [(node.input[1], -1 if pin == 1 else -2)] + ([(node.input[0], -1)] if pin == 0 else [])


def _copy(model: ModelProto) -> ModelProto:
    out = ModelProto()
    out.CopyFrom(model)
    return out


def plan_pins(model: ModelProto, name: str = "") -> dict:
    """The plan file (`{"layers": {NODE: {"axis": ...}}}`) that the
    configuration `name` of the model's annotations (by default its only
    one) asks for."""
    name = _configuration(model, name)
    layers = {}
    ranks = {t.name: len(t.dims) for t in model.graph.initializer}
    mesh = galaxy_mesh(name)
    for node in model.graph.node:
        config = next((c for c in node.device_configurations if c.configuration_id == name), None)
        if config is not None and node.name:
            layers[node.name] = {"axis": _pin_of(node, config.sharding_spec, ranks)} if mesh is None else \
                _galaxy_pins(node, config, mesh, name)
    return {"layers": layers}


def _galaxy_pins(node: NodeProto, config, mesh: list[int], name: str) -> dict:
    """A layer's pins over the rows (`axis`) and the columns (`column_axis`):
    the pair whose specs (`galaxy_specs`) are the node's."""
    for columns in (1, 0, None):
        for rows in (1, 0, None):
            made = onnx.NodeDeviceConfigurationProto()
            galaxy_specs(made, node, columns, rows, mesh)
            if list(made.sharding_spec) == list(config.sharding_spec):
                return {"axis": rows, "column_axis": columns}
    raise ForgeOptError(f"'{node.name}' ({node.op_type}): its sharding in the configuration '{name}' is none "
                        "Galaxy's layout makes (a block over the columns and the rows of its weight)")


def _configuration(model: ModelProto, name: str) -> str:
    """The configuration `name`, or the model's only one."""
    names = [c.name for c in model.configuration]
    if not name:
        if len(names) != 1:
            raise ForgeOptError(f"the model carries {len(names)} sharding configurations "
                                f"({', '.join(names) or 'none'}): name one with --configuration")
        return names[0]
    if name not in names:
        raise ForgeOptError(f"the model has no sharding configuration '{name}' (its: {', '.join(names) or 'none'})")
    return name


def _pin_of(node: NodeProto, specs, ranks: dict[str, int]) -> int | None:
    """The plan's axis for the node's weight spec (None: no split);
    `ranks`: the weights' ranks, which a negative axis counts from."""
    for pin in (0,) if node.op_type == "Gather" else (1, 0):
        weight, axis = _split_axes(node, pin)[0]
        rank = ranks.get(weight)
        for spec in specs:
            split = [d.axis for d in spec.sharded_dim if any(s.num_shards > 1 for s in d.simple_sharding)]
            if spec.tensor_name == weight and any(a == axis or (rank and a % rank == axis % rank) for a in split):
                return pin
    return None


def save_annotated(model: ModelProto, base: Path | None, out: str, annotated: Callable[[ModelProto], Annotated],
                   what: str = "layers") -> str:
    """`--annotate OUT`: the model with one more configuration (`annotated`
    makes it: `annotate`'s plan, or `annotate_stages`'s pipeline), written to
    `out` (over an earlier `--annotate` of the same graph, whose other
    configurations it keeps; forge-check refuses the model's own files
    first); the report's line on it."""
    from forge_opt.files import save_onnx

    external = any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)
    if external and base is not None and Path(out).resolve().parent != base.resolve():
        raise ForgeOptError(f"--annotate {out}: the model's weights are external data in {base}, which the "
                            "annotated model names by relative path: write it into that folder")
    model = _copy(model)
    if Path(out).is_file():
        earlier = onnx.load(out, load_external_data=False)
        if [(n.name, n.op_type) for n in earlier.graph.node] != [(n.name, n.op_type) for n in model.graph.node]:
            raise ForgeOptError(f"--annotate {out}: holds another graph than the model's; name another file")
        for c in earlier.configuration:
            kept = model.configuration.add()
            kept.CopyFrom(c)
        nodes = {n.name: n for n in model.graph.node}
        for n in earlier.graph.node:
            nodes[n.name].device_configurations.extend(n.device_configurations)
    done = annotated(model)
    save_onnx(done.model, out)
    skipped = f"; not annotated: {', '.join(done.skipped)}" if done.skipped else ""
    return (f"annotated: {out} (configuration {done.configuration}, {len(done.written)} {what}, "
            f"{len(done.model.configuration)} configurations in the file){skipped}")
