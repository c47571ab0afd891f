"""A per-device program (`tp-partition`'s output) as what the host runs:
segments of device work cut at each collective, each compiled to one Forge
module per device, and the plan saying in order which segment runs and
which collective joins them. The plan is `graph_infos.json` (AutoSplit's
format, `plan/graph_infos.py`) extended with `grid` and `collectives`; the same
runner executes both (`split/runner.py`). `forge-python` writes it
(`-t 'forge-python{folder="DIR"}'`, or forge-opt's `-o DIR/`):
`write_parallel` and `parallel_report` are that target's.

Device k's modules load only its blocks of the weights: every
`shard.all_slice` of a value made of constants is computed once per device
at compile time into a constant of its own (a parameter when it slices a
model weight, saved in `dev{k}/weights.onnx`).

`program.py` cuts the program (in Forge calls: onnx-to-forge lowered it
for every device at once) into segments; this module gives each device
its blocks, emits and writes them; `weight_file.py` streams each device's
weights to its file.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr

from forge_opt.data_formats import FORMATS, WEIGHT_FORMAT_ATTR, FormatName
from forge_opt.dialects import forge, shard
from forge_opt.dialects.elements import attr_to_array
from forge_opt.files import link_or_copy, write_text
from forge_opt.frontends.onnx.values import release_mapped_pages
from forge_opt.interpreters.forge import laid_out
from forge_opt.plan.folder import clear_folder, write_infos
from forge_opt.plan.graph_infos import DEVICE, Collective, Device, Graph, Layer, Plan, StaticCache, TensorInfo
from forge_opt.targets.devices.mesh_report import line_plan, mesh_table
from forge_opt.targets.devices.program import (
    COLLECTIVE_OPS,
    Blocks,
    Program,
    moved_bytes,
    ring_bytes,
)
from forge_opt.targets.devices.weight_file import SAME_BLOCK_BYTES, WeightFile
from forge_opt.targets.forge_python import ForgePythonModule, emit_module, save_constants
from forge_opt.transforms.pipelines import run_passes, weight_passes
from forge_opt.transforms.static_cache import PAST, PRESENT, STATIC_CACHE_ATTR
from forge_opt.transforms.tp.layer_records import layer_entries, mesh_layout
from forge_opt.transforms.tp.mesh import LINE


@dataclass
class CompiledSegment:
    module: ModuleOp | None  # the device's; None once emitted
    blocks: list[str]  # the device's own parameters, in order
    others: list[tuple[str, np.ndarray]]  # the parameters every device holds whole
    blocks_untouched: bool  # every block reached Forge as a parameter, its value as it was
    layouts: dict[str, list[tuple[str, tuple[int, ...]]]]  # each parameter's load-time steps
    formats: dict[str, FormatName] = field(default_factory=dict)  # the block float a parameter is stored in
    emitted: ForgePythonModule | None = None

    def emit(self, laid_out: Collection[str], n: int) -> ForgePythonModule:
        """Segment `n`'s Forge Python, the weights named in `laid_out`
        stored in their layout already."""
        assert self.module is not None
        self.emitted = emit_module(self.module, laid_out, stem=f"segment_{n}")
        self.module = None
        return self.emitted

    def same_as(self, other: CompiledSegment) -> bool:
        assert self.emitted is not None and other.emitted is not None
        mine, theirs = self.emitted.constants, other.emitted.constants
        return (
            self.blocks_untouched and other.blocks_untouched
            and self.emitted.source == other.emitted.source
            and [n for n, _ in self.others] == [n for n, _ in other.others]
            and mine.keys() == theirs.keys()
            and all(np.array_equal(mine[k], theirs[k]) for k in mine)
        )


def compile_segment(module: ModuleOp, blocks: list[str],
                    weight_format: FormatName = FormatName.FLOAT32) -> CompiledSegment:
    """Give a segment's module its weights' layouts (its matmul weights
    marked for `weight_format`, a block float), noting whether its blocks
    reached it untouched and each parameter's layout."""
    before = {
        op.parameter_name.data: op.value
        for op in module.walk()
        if isinstance(op, forge.ParameterOp) and op.parameter_name.data in blocks
    }
    run_passes(weight_passes(weight_format), Context(), module, False)
    params = [op for op in module.walk() if isinstance(op, forge.ParameterOp)]
    after = {op.parameter_name.data: op.value for op in params if op.parameter_name.data in before}
    others = [(p.parameter_name.data, attr_to_array(p.value)) for p in params if p.parameter_name.data not in before]
    untouched = after.keys() == before.keys() and all(after[k] is before[k] for k in after)
    layouts = {p.parameter_name.data: p.steps() for p in params if p.layout is not None}
    formats = {p.parameter_name.data: p.weight_format.data for p in params if p.weight_format is not None}
    return CompiledSegment(module, blocks, others, untouched, layouts, formats)


def _stored_laid_out(program: Program, compiled: CompiledSegment, blocks: Blocks, weights: WeightFile) -> dict:
    """The parameters whose layout the weight files take on (so the module
    loads them as they are): a block or a weight this segment alone reads
    (no other can want it in another layout), not a small block (those
    may be written once for two)."""
    value_of_block = {name: v for v, (name, _) in blocks.items()}
    stored = {}
    for name, steps in compiled.layouts.items():
        v = value_of_block.get(name)
        if v is not None:
            alone = program.readers[v] == 1 and weights.places[name].nbytes > SAME_BLOCK_BYTES
        else:
            alone = program.readers[name] == 1 and name not in weights
        if alone:
            stored[name] = steps
    return stored


def _save_module(emitted: ForgePythonModule, dev: Path, n: int, same_as: Path | None) -> None:
    """Segment `n`'s module and constants in `dev`; hard links to the files
    of `same_as`, which holds the very same module (creating a file costs
    more than linking one: 272 files for 34 segments on 8 devices)."""
    files = [f"segment_{n}.py", *([emitted.constants_file] if emitted.constants else [])]
    if same_as is not None:
        for name in files:
            link_or_copy(same_as / name, dev / name)
        return
    write_text(dev / files[0], emitted.source)
    save_constants(emitted, dev)


def _write_devices(program: Program, folder: Path, weight_format: FormatName) -> list[Device]:
    """Every device's segment modules and weights, streamed: a segment's
    blocks are written and dropped before the next are made.

    Devices 0 and P-1 each make the segment's module. When they are the
    same and each block reached it as a parameter, as it was, the other
    devices differ from device 0 only in their blocks' values: they reuse
    its module, and their blocks go from the weight file to theirs a band
    at a time, never whole. (Device P-1 is the one whose place differs
    from device 0's along every grid axis: on a mesh, device 1 shares row 0
    with it, so a slice of an activation by rows would look the same.)"""
    p = program.devices
    dirs = [folder / f"dev{rank}" for rank in range(p)]
    for d in dirs:
        d.mkdir()
    files = [WeightFile(d) for d in dirs]
    constant_bytes = [0] * p
    formats: list[dict[str, FormatName]] = [{} for _ in range(p)]  # each device's block-float parameters
    for n in range(len(program.segments)):
        # device 0's blocks held while its module is made, then the last's read again (from the page cache): one
        # device's blocks in memory at a time (an 8B model's LM head is 131 MB a device)
        blocks = program.write_blocks(n, dict(enumerate(files)), keep={0})
        names = {r: [name for name, _ in blocks[r].values()] for r in range(p)}
        first = compile_segment(program.segment_module(n, 0, blocks[0]), names[0], weight_format)
        stored = _stored_laid_out(program, first, blocks[0], files[0])
        first.emit(stored, n)
        del blocks
        gc.collect()  # the module (IR is cyclic) and the blocks it held
        last = p - 1
        blocks = program.write_blocks(n, {last: files[last]}, keep={last})
        second = compile_segment(program.segment_module(n, last, blocks[last]), names[last], weight_format)
        second.emit(stored, n)
        shared = first if second.same_as(first) else None
        del blocks
        gc.collect()
        for rank in range(p):
            if rank in (0, last):
                compiled = first if rank == 0 else second
            elif shared is not None and shared.blocks == names[rank]:
                compiled = shared
            else:  # its blocks differ in kind (an equal small one written once): read again
                own = program.write_blocks(n, {rank: files[rank]}, keep={rank})[rank]
                compiled = compile_segment(program.segment_module(n, rank, own), names[rank], weight_format)
                compiled.emit(stored, n)
                del own
                gc.collect()
            formats[rank].update(compiled.formats)
            others = dict(compiled.others)
            for name, steps in stored.items():
                if name in others:
                    others[name] = laid_out(others[name], steps)
                else:  # a block, written as it was this segment
                    files[rank].lay_out(name, steps)
            for name, array in others.items():
                files[rank].add(name, array)
            emitted = compiled.emitted
            assert emitted is not None
            _save_module(emitted, dirs[rank], n, dirs[0] if rank > 0 and compiled is shared else None)
            constant_bytes[rank] += sum(a.nbytes for a in emitted.constants.values())
        release_mapped_pages()  # the weights this segment read stay in the file, not in this process
    for f in files:
        f.close()
    activations = program.peak_activation_bytes()
    return [Device(rank, int(f.nbytes), len(f.tensors), int(constant_bytes[rank]),
                   _stored_bytes(f, formats[rank]) + int(constant_bytes[rank]), activations)
            for rank, f in enumerate(files)]


def _stored_bytes(weights: WeightFile, formats: Mapping[str, FormatName]) -> int:
    """The bytes a device holds its parameters in: as written, or a block
    float's bytes per element (1,088 per 1,024 for bfp8_b) where it is one."""
    total = 0.0
    for name, place in weights.places.items():
        fmt = formats.get(name)
        total += math.prod(place.shape) * FORMATS[fmt].bytes_per_element if fmt is not None else place.nbytes
    return math.ceil(total)


def write_parallel(module: ModuleOp, folder: Path, layout: str = "NCHW", line_module: ModuleOp | None = None) -> Plan:
    """Compile each segment for each device into `folder`: `dev{k}/` holds
    device k's modules, their constants and `weights.onnx`; the plan is
    `graph_infos.json`. Returns the plan. `line_module`: the 1-d program on the
    same devices, whose cost the plan records beside its own (Galaxy's
    layout)."""
    program = Program(module)
    p = program.devices
    clear_folder(folder)  # an older plan's device folders go whole: their files may be links to one another
    folder.mkdir(parents=True, exist_ok=True)
    tensors = program.tensors()
    # Each segment's module (IR is cyclic) and its blocks of the weights are garbage once written: a
    # collection after each frees them, and costs little once everything older is frozen out of it.
    # (forge-opt runs with the cyclic collector off.)
    gc.freeze()
    try:
        fmt = module.attributes.get(WEIGHT_FORMAT_ATTR)
        devices = _write_devices(program, folder, fmt.data if isinstance(fmt, forge.DataFormatAttr) else
                                 FormatName.FLOAT32)
    finally:
        gc.unfreeze()
    graphs = [
        Graph([program.names[v] for v in seg.inputs], [program.names[v] for v in seg.outputs], DEVICE,
              "dev{rank}/weights.onnx", module_path=f"dev{{rank}}/segment_{n}.py", context_dir="dev{rank}")
        for n, seg in enumerate(program.segments)
    ]
    collectives = []
    mesh = program.grid_shape if len(program.grid_shape) == 2 else None
    for c in program.collectives:
        kind, nbytes = COLLECTIVE_OPS[type(c.op)], moved_bytes(c.op)
        axis = None if kind == "all_reduce" else c.op.axis  # pyright: ignore[reportAttributeAccessIssue]
        mesh_axis = group = line = None
        if mesh is not None:  # a mesh's collectives run over one of its axes each (`collectives-on-mesh`)
            (mesh_axis,) = shard.grid_axes(c.op)
            group = mesh[mesh_axis]
            line = c.op.attributes.get(LINE)
        combined = shard.reduction_of(c.op) if isinstance(c.op, shard.AllReduceOp) else shard.ReductionKind.SUM
        reduction = None if combined == shard.ReductionKind.SUM else str(combined)
        collectives.append(Collective(c.after, kind, program.names[c.op.operands[0]],
                                      program.names[c.op.results[0]], nbytes,
                                      ring_bytes(kind, nbytes, group or p), axis, mesh_axis, group, reduction,
                                      line.value.data if isinstance(line, IntegerAttr) else None))
    outputs, host = program.returns()
    plan = Plan(graphs, tensors, layout=layout, grid=program.grid, mesh=mesh, mesh_layout=mesh_layout(module),
                devices=devices, collectives=collectives,
                layers=[Layer(**entry) for entry in layer_entries(module)], outputs=outputs,
                static_cache=_static_cache(module, tensors),
                line_plan=None if line_module is None else line_plan(line_module))
    return write_infos(folder, plan, host)


def _static_cache(module: ModuleOp, tensors: Mapping[str, TensorInfo]) -> StaticCache | None:
    """The plan's record of a static KV cache (`static-kv-cache`): its
    length, its position input and each past input's present."""
    found = module.attributes.get(STATIC_CACHE_ATTR)
    if not isinstance(found, DictionaryAttr):
        return None
    length, position = found.data["length"], found.data["position"]
    assert isinstance(length, DenseIntOrFPElementsAttr) and isinstance(position, StringAttr)
    caches = {name: PRESENT + name[len(PAST):] for name, t in tensors.items()
              if t.attr == "input" and name.startswith(PAST) and PRESENT + name[len(PAST):] in tensors}
    return StaticCache(int(attr_to_array(length)), position.data, caches)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def parallel_report(plan: Plan) -> str:
    """Per device its parameter bytes (as written, and as stored in their
    formats) and the most activation bytes it holds at once; per collective
    the bytes it carries and what each device sends for it in a ring."""
    lines = [f"{'device':<8} {'parameters':>10} {'parameter bytes':>16} {'constant bytes':>15} {'stored bytes':>14} "
             f"{'peak activations':>17}"]
    for d in plan.devices:
        lines.append(f"{d.rank:<8} {d.parameters:>10} {d.parameter_bytes:>16,} {d.constant_bytes:>15,} "
                     f"{d.stored_bytes:>14,} {d.activation_bytes:>17,}")
    lines.append(f"{'step':<6} {'collective':<15} {'of the tensor':<40} {'bytes':>10} {'sent per device':>16}")
    total = 0
    for n, c in enumerate(plan.collectives):
        total += c.ring_bytes_per_device
        name = c.input if len(c.input) <= 40 else "..." + c.input[-37:]
        op = c.op if c.reduction is None else f"{c.op} {c.reduction}"
        lines.append(f"{n:<6} {op:<15} {name:<40} {c.bytes:>10,} {c.ring_bytes_per_device:>16,}")
    if plan.mesh is not None:
        lines.extend(mesh_table(plan))
    padded = [f"{layer.node} (+{layer.padded_rows} zero rows)" for layer in plan.layers if layer.padded_rows]
    lines.append(f"{_count(len(plan.graphs), 'segment')} on {plan.device_count} devices; "
                 f"{_count(len(plan.collectives), 'collective')} sending {total:,} bytes per device per run (ring)")
    if padded:
        lines.append("vocabulary padded to a multiple of the devices: " + ", ".join(padded))
    cases: dict[str, int] = {}
    for layer in plan.layers:  # in the Galaxy layout, the case over the columns by the case over the rows
        case = f"{layer.column_case} x {layer.case}" if layer.column_case else layer.case
        cases[case] = cases.get(case, 0) + 1
    if cases:
        lines.append("layers: " + ", ".join(f"{n} {case}" for case, n in cases.items()))
    for layer in plan.layers:
        if layer.unshared:
            lines.append(f"warning: {layer.node} stays replicated on every device: {layer.reason or 'pinned'}")
    return "\n".join(lines)
