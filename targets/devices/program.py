"""A per-device program (`tp-partition`'s output) cut into what the host
runs: segments of device work between collectives, the values each reads
and makes, and each device's blocks of the constants a segment reads,
computed at compile time (a parameter when it slices a model weight).
The program is in Forge calls already (onnx-to-forge's lowering runs
before it is cut): a segment is a device's Forge module once its blocks
are in it."""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr, TensorType
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.interpreter import Interpreter
from xdsl.ir import Block, Operation, Region, SSAValue

from forge_opt import dtypes
from forge_opt.diagnostics import ForgeOptError, describe, node_name
from forge_opt.dialects import forge, shard
from forge_opt.dialects.elements import array_view_attr
from forge_opt.dialects.forge_ops import CastOp, Index
from forge_opt.interpreters.forge import ForgeFunctions
from forge_opt.interpreters.shard import group_of, position
from forge_opt.plan.graph_infos import HOST_OUTPUTS, Output, TensorInfo
from forge_opt.targets.devices.weight_file import SAME_BLOCK_BYTES, WeightBlock, WeightFile, add_together, value_of
from forge_opt.targets.forge_python import input_names, output_names
from forge_opt.transforms.lowering import erase_dead_ops
from forge_opt.transforms.tp.narrow_blocks import dequantizes
from forge_opt.transforms.tp.partition import grid_info, split_axes, split_blocks

COLLECTIVE_OPS = {
    shard.AllReduceOp: "all_reduce",
    shard.AllGatherOp: "all_gather",
    shard.ReduceScatterOp: "reduce_scatter",
}


#: a device's blocks a segment reads: each one's parameter name, and its value if kept
Blocks = dict[SSAValue, tuple[str, "np.ndarray | None"]]


@dataclass
class Segment:
    ops: list[Operation]
    inputs: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)


@dataclass
class CollectiveStep:
    """A collective of the program where it is cut: the op, and the segment it follows."""

    op: Operation
    after: int


def ring_bytes(kind: str, nbytes: int, devices: int) -> int:
    """What each device sends in a ring implementation: an all-reduce of B
    bytes 2·B·(P−1)/P, an all-gather producing B bytes B·(P−1)/P, a
    reduce-scatter of B bytes B·(P−1)/P."""
    factor = 2 if kind == "all_reduce" else 1
    return factor * nbytes * (devices - 1) // devices


def moved_bytes(op: Operation) -> int:
    """The bytes a collective carries: its result's for an all-gather, its
    operand's for the others."""
    moved = op.results[0] if isinstance(op, shard.AllGatherOp) else op.operands[0]
    return dtypes.tensor_nbytes(moved.type)


class Program:
    """The per-device function cut into segments and collectives."""

    def __init__(self, module: ModuleOp):
        found = grid_info(module)
        funcs = [f for f in module.ops if isinstance(f, FuncOp)]
        if found is None or len(funcs) != 1:
            raise ForgeOptError("a tensor-parallel program has one shard.grid and one function")
        self.grid, self.grid_shape = found  # its name and shape: a line [P], or a mesh [R, C]
        self.devices = math.prod(self.grid_shape)
        self.func = funcs[0]
        for op in self.func.walk():
            if not op.name.startswith(("forge.", "func.", "shard.")):
                raise ForgeOptError(f"{describe(op)}: forge-python writes a program of Forge calls; lower the "
                                    "per-device program first (onnx-to-forge{devices=P} does; after tp-partition: "
                                    "fuse-patterns, merge-equal-ops, lower-split, tir-to-forge)")
        self.constant: set[SSAValue] = set()  # values computed from constants alone
        self.segments: list[Segment] = []
        self.collectives: list[CollectiveStep] = []
        self.names: dict[SSAValue, str] = {}
        self._per_device: dict[SSAValue, bool] = {}
        self._cut()

    def _cut(self) -> None:
        """Segments end at each collective. Constants (and values made of
        them alone, a collective of blocks of one among them) belong to no
        segment: each segment that reads one computes it itself."""
        body = self.func.body.block
        current: list[Operation] = []
        self.ret: ReturnOp | None = None
        for op in body.ops:
            if isinstance(op, ReturnOp):
                self.ret = op
            elif type(op) in COLLECTIVE_OPS and op.operands[0] not in self.constant:
                if current:
                    self.segments.append(Segment(current))
                    current = []
                self.collectives.append(CollectiveStep(op, len(self.segments) - 1))
            elif all(v in self.constant for v in op.operands) and not self._dequantizes_a_block(op):
                self.constant.update(op.results)
            else:
                current.append(op)
        if current:
            self.segments.append(Segment(current))
        # what crosses: collectives' operands, the results, values a later segment reads
        crossing: set[SSAValue] = {c.op.operands[0] for c in self.collectives}
        if self.ret is not None:
            crossing.update(self.ret.arguments)
        for seg in self.segments:
            inside = {r for op in seg.ops for r in op.results}
            for op in seg.ops:
                for v in op.operands:
                    if v not in inside and v not in self.constant and v not in seg.inputs:
                        seg.inputs.append(v)
                        crossing.add(v)
        for seg in self.segments:
            seg.outputs = [r for op in seg.ops for r in op.results if r in crossing]
        # names: the model's for its inputs and outputs, the IR's hints, else t<N>
        for arg, name in zip(body.args, input_names(self.func)):
            self.names[arg] = name
        if self.ret is not None:
            for v, name in zip(self.ret.arguments, output_names(self.func)):
                self.names.setdefault(v, name)
        order = {op: i for i, op in enumerate(body.ops)}
        steps = [*(op for seg in self.segments for op in seg.ops), *(c.op for c in self.collectives)]
        for op in sorted(steps, key=order.__getitem__):
            for v in op.results:
                if v not in self.names and (v in crossing or type(op) in COLLECTIVE_OPS):
                    self.names[v] = self._unique(_tensor_name(v, op) or f"t{len(self.names)}")

    def _dequantizes_a_block(self, op: Operation) -> bool:
        """An integer block's cast to float (a quantized weight split where
        it is stored, `tp/narrow_blocks`): run on the device, so that the
        device stores the integers, not their float values."""
        return isinstance(op, CastOp) and self.per_device(op.operands[0]) and \
            dequantizes(op.operands[0].type, op.results[0].type)

    def peak_activation_bytes(self) -> int:
        """The most bytes of non-constant values alive at once, the device's
        program run in order and each value freed after its last reader
        (the same on every device: their shapes are alike)."""
        body = self.func.body.block
        ops = list(body.ops)
        order = {op: i for i, op in enumerate(ops)}
        change = [0] * (len(ops) + 1)  # bytes made live at each step, freed after it
        values = [(v, 0) for v in body.args] + [(r, order[op]) for op in ops for r in op.results]
        for v, made in values:
            if v in self.constant or not isinstance(v.type, TensorType):
                continue
            last = max((order[u.operation] for u in v.uses if u.operation in order), default=made)
            change[made] += dtypes.tensor_nbytes(v.type)
            change[last + 1] -= dtypes.tensor_nbytes(v.type)
        live = peak = 0
        for delta in change:
            live += delta
            peak = max(peak, live)
        return peak

    def _unique(self, hint: str) -> str:
        taken = set(self.names.values())
        name, n = hint, 0
        while name in taken:
            n += 1
            name = f"{hint}_{n}"
        return name

    def returns(self) -> tuple[list[Output], dict[str, np.ndarray]]:
        """The model's outputs in order, each with where the host finds it:
        the tensor a segment makes or the model input it is (`tensor`), or
        a value no device computes (a weight, an empty tensor, a constant a
        merged decoder returns), computed here and saved with the plan
        (`file`); and those values by output name."""
        if self.ret is None:
            return [], {}
        entries, values = [], {}
        for v, name in zip(self.ret.arguments, output_names(self.func)):
            if v in self.constant:
                if self.per_device(v):
                    raise ForgeOptError(f"the output '{name}' is a device's block of a constant: pin it replicated")
                values[name] = value_of(_ConstantEvaluator(self.grid_shape, 0).value(v))
                entries.append(Output(name, file=HOST_OUTPUTS))
            else:
                entries.append(Output(name, tensor=self.names[v]))
        return entries, values

    def per_device(self, v: SSAValue) -> bool:
        """Whether a constant value is computed per device (a block of one,
        or a collective of blocks)."""
        if v not in self._per_device:
            op = v.owner
            # a collective of blocks is computed here too (each device's parameter, as a block is)
            self._per_device[v] = isinstance(op, shard.AllSliceOp) or type(op) in COLLECTIVE_OPS or (
                isinstance(op, Operation) and any(self.per_device(o) for o in op.operands)
            )
        return self._per_device[v]

    def blocks_read(self, n: int) -> list[SSAValue]:
        """The values segment `n` reads that differ between devices (its
        blocks of constants), in the order it first reads them."""
        return self._constants_read(n)[0]

    def _constants_read(self, n: int) -> tuple[list[SSAValue], set[SSAValue]]:
        """Segment `n`'s blocks in the order it first reads them, and every
        value made of constants it reads (blocks, weights, on the way)."""
        found: dict[SSAValue, None] = {}
        seen: set[SSAValue] = set()

        def visit(v: SSAValue) -> None:
            if v in seen or v not in self.constant:
                return
            seen.add(v)
            if self.per_device(v):
                found[v] = None
            elif isinstance(v.owner, Operation):
                for o in v.owner.operands:
                    visit(o)

        for op in self.segments[n].ops:
            for o in op.operands:
                visit(o)
        return list(found), seen

    @functools.cached_property
    def readers(self) -> Counter:
        """How many segments read each block (by value) and each model
        weight (by name)."""
        count: Counter = Counter()
        for n in range(len(self.segments)):
            for v in self._constants_read(n)[1]:
                count[v] += 1
                if isinstance(v.owner, forge.ParameterOp):
                    count[v.owner.parameter_name.data] += 1
        return count

    def write_blocks(self, n: int, files: Mapping[int, WeightFile], keep: Set[int]) -> dict[int, Blocks]:
        """The blocks that segment `n` reads, for each device of `files`,
        each written to the device's file the first time: their parameter
        names, and for the devices in `keep` their values (the others'
        are streamed to the file, never whole)."""
        interps = {r: _ConstantEvaluator(self.grid_shape, r) for r in files}
        out: dict[int, Blocks] = {r: {} for r in files}
        for v in self.blocks_read(n):
            op = v.owner
            assert isinstance(op, Operation)
            # a parameter of its own, named for the weight (or the layer) it is a block of
            base = _weight_name(v) or node_name(op) or "block"
            names = {r: f.claim(v, base) for r, f in files.items()}
            todo = [r for r in files if r in keep or names[r] not in files[r]]
            for r in files:
                out[r][v] = (names[r], None)
            lazy: dict[int, WeightBlock] = {}  # large blocks of a weight, read for all devices at once
            for r in todo:
                data = interps[r].value(v)
                if isinstance(data, WeightBlock) and data.nbytes > SAME_BLOCK_BYTES and names[r] not in files[r]:
                    lazy[r] = data
                    continue
                if r in keep:
                    array = value_of(data)
                    out[r][v] = (files[r].add(names[r], array), array)
                else:
                    out[r][v] = (files[r].add(names[r], data), None)
                del data  # a computed block (the vocab table with its row of zeros): one device's at a time
            kept = add_together([files[r] for r in lazy], [names[r] for r in lazy], list(lazy.values()),
                                [r in keep for r in lazy])
            for r, array in zip(lazy, kept):
                out[r][v] = (names[r], array)
        return out

    def segment_module(self, n: int, rank: int, blocks: Blocks) -> ModuleOp:
        """Segment `n` as device `rank` runs it: a module of Forge calls,
        with its `blocks` (`write_blocks`, kept) as parameters."""
        seg = self.segments[n]
        arg_types = [v.type for v in seg.inputs]
        body = Block(arg_types=arg_types)
        mapping: dict[SSAValue, SSAValue] = dict(zip(seg.inputs, body.args))
        params: dict[str, SSAValue] = {}

        def value(v: SSAValue) -> SSAValue:
            if v in mapping:
                return mapping[v]
            assert v in self.constant, f"{v} is neither an input nor a constant"
            op = v.owner
            assert isinstance(op, Operation)
            if v in blocks:
                name, array = blocks[v]
                if name not in params:  # else the same block, reached twice
                    assert array is not None, f"block {name} was not kept"
                    param = forge.ParameterOp.build(  # (its bytes, not a copy)
                        result_types=[v.type],
                        properties={"parameter_name": StringAttr(name), "value": array_view_attr(array)})
                    param.location = op.location
                    body.add_op(param)
                    params[name] = param.output
                mapping[v] = params[name]
                return params[name]
            clone = op.clone_without_regions(value_mapper={o: value(o) for o in op.operands})
            body.add_op(clone)
            mapping.update(zip(op.results, clone.results))
            return mapping[v]

        for op in seg.ops:
            if isinstance(op, shard.AllSliceOp):  # a block of an activation: a slice
                x = value(op.input)
                shape = dtypes.tensor(op.result.type).get_shape()
                rows, (k, _) = shape[op.axis], position(self.grid_shape, shard.grid_axes(op), rank)
                new = Index(x, dim=op.axis - len(shape), start=k * rows, stop=(k + 1) * rows, stride=1)
            else:
                new = op.clone_without_regions(value_mapper={o: value(o) for o in op.operands})
            new.location = op.location
            body.add_op(new)
            mapping.update(zip(op.results, new.results))
        outs = [mapping[v] for v in seg.outputs]
        body.add_op(ReturnOp(*outs))
        func = FuncOp(f"segment_{n}", (arg_types, [v.type for v in seg.outputs]), Region(body))
        func.arg_attrs = _names([self.names[v] for v in seg.inputs])
        module = ModuleOp([func])
        erase_dead_ops(module)
        return module

    def tensors(self) -> dict[str, TensorInfo]:
        """Every value the host moves: its per-device shape and type."""
        args = self.func.body.block.args
        inputs = set(args)
        results = list(self.ret.arguments) if self.ret else []
        # a KV cache's past and present: each device receives and returns its block
        split: dict[SSAValue, tuple[int | None, int | None]] = {}
        for values, attrs in ((args, self.func.arg_attrs), (results, self.func.res_attrs)):
            split.update(zip(values, zip(split_axes(attrs, len(values)), split_blocks(attrs, len(values)))))
        out = {}
        for v, name in self.names.items():
            t = dtypes.tensor(v.type)
            attr = "input" if v in inputs else "output" if v in results else "intermediate"
            out[name] = TensorInfo(list(t.get_shape()), np.dtype(dtypes.numpy_dtype(t.element_type)).name, attr,
                                   *split.get(v, (None, None)))
        return out


def _tensor_name(v, op) -> str | None:
    """A crossing tensor's name: the IR's hint, except that PyTorch's node
    names (module paths, `/model/h.0/attn/Gemm`) read better than the hints
    made from their value names (`model_h_0_attn_Gemm_output`)."""
    label = node_name(op)
    if label and label.startswith("/"):
        return label
    return v.name_hint or label


def _names(names: Iterable[str]):
    from xdsl.dialects.builtin import ArrayAttr

    return ArrayAttr([DictionaryAttr({"onnx.name": StringAttr(n)}) for n in names])


def _weight_name(v: SSAValue) -> str | None:
    """The model weight a constant expression is a block of (its first
    operand's, through each op), if one."""
    op = v.owner
    while isinstance(op, Operation):
        if isinstance(op, forge.ParameterOp):
            return op.parameter_name.data
        if isinstance(op, forge.ConstantOp):
            return None
        if not op.operands:
            return None
        op = op.operands[0].owner
    return None


class _ConstantEvaluator:
    """Values made of constants, as device `rank` holds them."""

    def __init__(self, grid_shape: list[int], rank: int, others: dict[int, _ConstantEvaluator] | None = None):
        self.grid_shape, self.rank = grid_shape, rank
        self.devices = math.prod(grid_shape)
        self.others: dict[int, _ConstantEvaluator] = {} if others is None else others  # every device's
        self.others[rank] = self
        self.memo: dict[SSAValue, np.ndarray | WeightBlock] = {}
        self.interp = Interpreter(ModuleOp([]))
        self.interp.register_implementations(ForgeFunctions())

    def value(self, v: SSAValue) -> np.ndarray | WeightBlock:
        """Its value; a device's block of a constant stays unread (a
        `WeightBlock`) until an op reads it."""
        if v in self.memo:
            return self.memo[v]
        op = v.owner
        assert isinstance(op, Operation)
        args = [self.value(o) for o in op.operands]
        if isinstance(op, shard.AllSliceOp):
            result = WeightBlock(value_of(args[0]), op.axis, *position(self.grid_shape, shard.grid_axes(op), self.rank))
        elif type(op) in COLLECTIVE_OPS:  # of blocks of a constant: computed here, as the devices would
            result = self._collective(op)
        else:
            result = np.asarray(self.interp.run_op(op, tuple(value_of(a) for a in args))[0])
            if result.nbytes > SAME_BLOCK_BYTES:
                return result  # not kept: computed again if read again, rather than held for every device
        self.memo[v] = result
        return result

    def _collective(self, op: Operation) -> np.ndarray:
        group = group_of(self.grid_shape, shard.grid_axes(op), self.rank)
        parts = [value_of(self._of(r).value(op.operands[0])) for r in group]
        if isinstance(op, shard.AllGatherOp):
            return np.concatenate(parts, axis=op.axis)
        if isinstance(op, shard.AllReduceOp) and shard.reduction_of(op) == shard.ReductionKind.MAX:
            return np.max(parts, axis=0)
        total = np.sum(parts, axis=0, dtype=parts[0].dtype)
        if isinstance(op, shard.ReduceScatterOp):
            return np.ascontiguousarray(np.split(total, len(group), axis=op.axis)[group.index(self.rank)])
        return total

    def _of(self, rank: int) -> _ConstantEvaluator:
        if rank not in self.others:
            _ConstantEvaluator(self.grid_shape, rank, self.others)
        return self.others[rank]
