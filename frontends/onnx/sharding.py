"""ONNX's sharding annotations (IR 11: `ModelProto.configuration`,
`NodeProto.device_configurations`, `pipeline_stage`), checked against the
formalism of onnx's ShardingFormalism.md and the proto's own comments,
which neither onnx's checker nor onnxruntime enforces. Each problem names
the node, its op, the configuration, the tensor and the rule."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from onnx import ModelProto, NodeProto, ShardingSpecProto, TypeProto, helper

from forge_opt.frontends.onnx import infer_types
from forge_opt.frontends.onnx.graph import describe_node
from forge_opt.frontends.onnx.shapes import tensor_shape, value_types

#: the rules, by name, as a problem cites them
RULES = {
    "configuration-named": "a node's configuration_id names one of the model's configurations, each named once "
                           "with at least one device (and as many device names as devices, if any)",
    "tensor-of-node": "a sharding spec's tensor_name is an input or output of its node",
    "axis-in-range": "each sharded axis lies in [-r, r-1] for the tensor's rank r, once per spec",
    "shards-cover-devices": "the product of num_shards (each at least 1) over the spec equals the number of its "
                            "device entries, and a dim_value is the tensor's size on that axis",
    "groups-defined": "each device entry is a device of the configuration or a key of index_to_device_group_map, "
                      "whose devices are the configuration's",
    "operands-alike": "the inputs of an elementwise op are sharded alike on every axis they do not broadcast",
    "reduction-alike": "MatMul's (and Gemm's, after transA and transB) reduction axes are sharded alike",
    "stages-ordered": "pipeline_stage does not decrease along an edge of the graph",
}

#: ops whose inputs broadcast against each other elementwise (the formalism's "broadcasting n-ary" group)
ELEMENTWISE = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Mod", "BitShift", "PRelu", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor",
})


@dataclass(frozen=True)
class ShardingProblem:
    node: str  # the node as errors name it: 'fc1' (MatMul)
    configuration: str
    tensor: str
    rule: str  # a key of RULES
    detail: str

    def __str__(self) -> str:
        where = f"{self.node}, configuration '{self.configuration}'"
        if self.tensor:
            where += f", tensor '{self.tensor}'"
        return f"{where}: {self.detail} (rule {self.rule}: {RULES[self.rule]})"


def check_sharding(model: ModelProto, types: dict[str, TypeProto] | None = None) -> list[ShardingProblem]:
    """Every problem of the model's sharding annotations, in node order;
    `types`: every value's type, by name (inferred where not given)."""
    if types is None:
        types = value_types(infer_types(model).graph)
        types.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims))
                      for t in model.graph.initializer})
    return list(_Checker(model, types).problems())


class _Checker:
    def __init__(self, model: ModelProto, types: dict[str, TypeProto]):
        self.model, self.types = model, types
        self.devices: dict[str, int] = {}
        self.problems_of_configurations: list[ShardingProblem] = []
        for c in model.configuration:
            if c.name in self.devices or not c.name or c.num_devices < 1 or (c.device and len(c.device) !=
                                                                              c.num_devices):
                self.problems_of_configurations.append(ShardingProblem(
                    "the model", c.name, "", "configuration-named",
                    f"configuration '{c.name}' of {c.num_devices} devices and {len(c.device)} device names"))
            self.devices.setdefault(c.name, c.num_devices)
        nodes = model.graph.node
        self.producer = {out: n for n in nodes for out in n.output if out}

    def problems(self) -> Iterator[ShardingProblem]:
        yield from self.problems_of_configurations
        for node in self.model.graph.node:
            for config in node.device_configurations:
                yield from self._node(node, config.configuration_id, list(config.sharding_spec))
            yield from self._stages(node)

    def _node(self, node: NodeProto, name: str, specs: list[ShardingSpecProto]) -> Iterator[ShardingProblem]:
        label = describe_node(node)
        if name not in self.devices:
            known = ", ".join(f"'{n}'" for n in self.devices) or "none"
            yield ShardingProblem(label, name, "", "configuration-named",
                                  f"no configuration is named '{name}' (the model's: {known})")
            return
        for spec in specs:
            yield from self._spec(node, label, name, spec)
        if node.op_type in ELEMENTWISE:
            yield from self._alike(node, label, name, list(node.input))
        if node.op_type in ("MatMul", "Gemm") and len(node.input) >= 2:
            yield from self._reduction(node, label, name)

    def _spec(self, node: NodeProto, label: str, name: str, spec: ShardingSpecProto) -> Iterator[ShardingProblem]:
        t = spec.tensor_name
        if not t or (t not in node.input and t not in node.output):
            yield ShardingProblem(label, name, t, "tensor-of-node", f"'{t}' is neither an input nor an output "
                                  f"of the node (inputs {list(node.input)}, outputs {list(node.output)})")
            return
        shape = self._shape(t)
        seen = set()
        for d in spec.sharded_dim:
            rank = None if shape is None else len(shape)
            if rank is not None and not -rank <= d.axis < rank:
                yield ShardingProblem(label, name, t, "axis-in-range", f"axis {d.axis} of a tensor of rank {rank}")
                continue
            axis = d.axis % rank if rank else d.axis
            if axis in seen:
                yield ShardingProblem(label, name, t, "axis-in-range", f"axis {d.axis} is sharded twice")
            seen.add(axis)
            for s in d.simple_sharding:
                size = None if shape is None else shape[axis]
                if s.num_shards < 1:
                    yield ShardingProblem(label, name, t, "shards-cover-devices", f"axis {d.axis}: num_shards "
                                          f"{s.num_shards}")
                elif s.HasField("dim_value") and size is not None and size >= 0 and len(d.simple_sharding) == 1 \
                        and s.dim_value != size:
                    yield ShardingProblem(label, name, t, "shards-cover-devices", f"axis {d.axis}: dim_value "
                                          f"{s.dim_value} where the tensor has {size}")
        shards = math.prod(s.num_shards for d in spec.sharded_dim for s in d.simple_sharding)
        if shards != len(spec.device):
            yield ShardingProblem(label, name, t, "shards-cover-devices", f"{shards} shards over "
                                  f"{len(spec.device)} device entries")
        yield from self._groups(label, name, t, spec)

    def _groups(self, label: str, name: str, t: str, spec: ShardingSpecProto) -> Iterator[ShardingProblem]:
        count = self.devices[name]
        groups = {e.key: list(e.value) for e in spec.index_to_device_group_map}
        for v in spec.device:
            if v not in groups and not 0 <= v < count:
                yield ShardingProblem(label, name, t, "groups-defined", f"device entry {v} is neither a device of "
                                      f"the configuration's {count} nor a group of index_to_device_group_map")
        for key, members in groups.items():
            outside = [m for m in members if not 0 <= m < count]
            if not members or outside:
                yield ShardingProblem(label, name, t, "groups-defined", f"group {key} holds {members}: each "
                                      f"member is one of the configuration's {count} devices")

    def _alike(self, node: NodeProto, label: str, name: str, inputs: list[str]) -> Iterator[ShardingProblem]:
        present = [x for x in inputs if x]
        shapes = {x: self._shape(x) for x in present}
        if any(s is None for s in shapes.values()):
            return
        rank = max(len(s) for s in shapes.values() if s is not None)
        for back in range(1, rank + 1):  # axes aligned from the back, as broadcasting aligns them
            split = {}
            for x in present:
                shape = shapes[x]
                assert shape is not None
                if back <= len(shape) and shape[-back] != 1:
                    split[x] = self._sharding(node, name, x, len(shape) - back)
            if len(set(split.values())) > 1:
                listed = ", ".join(f"'{x}' {s or 'whole'}" for x, s in split.items())
                yield ShardingProblem(label, name, next(iter(split)), "operands-alike",
                                      f"axis {rank - back} (of the broadcast shape) is sharded as {listed}")

    def _reduction(self, node: NodeProto, label: str, name: str) -> Iterator[ShardingProblem]:
        a, b = node.input[0], node.input[1]
        sa, sb = self._shape(a), self._shape(b)
        if sa is None or sb is None or not sa or not sb:
            return
        trans = {x.name: x.i for x in node.attribute}
        if node.op_type == "Gemm":
            ka, kb = (0 if trans.get("transA") else 1), (1 if trans.get("transB") else 0)
        else:
            ka, kb = len(sa) - 1, max(len(sb) - 2, 0)
        left, right = self._sharding(node, name, a, ka), self._sharding(node, name, b, kb)
        if left != right:
            yield ShardingProblem(label, name, a, "reduction-alike", f"'{a}' axis {ka} is sharded {left or 'whole'} "
                                  f"and '{b}' axis {kb} {right or 'whole'}")

    def _sharding(self, node: NodeProto, name: str, tensor: str, axis: int) -> tuple[int, ...]:
        """How `tensor` is split on `axis` where `node` reads it in
        configuration `name`: its num_shards, () for whole. An input without
        a spec of its own takes its producer's (the formalism's default)."""
        for reader in (node, self.producer.get(tensor)):
            if reader is None:
                continue
            for config in reader.device_configurations:
                if config.configuration_id != name:
                    continue
                for spec in config.sharding_spec:
                    if spec.tensor_name != tensor:
                        continue
                    rank = len(self._shape(tensor) or [])
                    return tuple(s.num_shards for d in spec.sharded_dim
                                 if (d.axis % rank if rank else d.axis) == axis for s in d.simple_sharding
                                 if s.num_shards != 1)
        return ()

    def _stages(self, node: NodeProto) -> Iterator[ShardingProblem]:
        for config in node.device_configurations:
            if not config.HasField("pipeline_stage"):
                continue
            for x in node.input:
                producer = self.producer.get(x)
                if producer is None:
                    continue
                earlier = next((c.pipeline_stage for c in producer.device_configurations
                                if c.configuration_id == config.configuration_id and c.HasField("pipeline_stage")),
                               None)
                if earlier is not None and earlier > config.pipeline_stage:
                    yield ShardingProblem(describe_node(node), config.configuration_id, x, "stages-ordered",
                                          f"stage {config.pipeline_stage} reads '{x}' from "
                                          f"{describe_node(producer)} at stage {earlier}")

    def _shape(self, name: str) -> list[int] | None:
        return tensor_shape(self.types, name)
