"""A mesh plan's collectives per mesh axis, beside what the same program's
collectives would cost on a line of all R·C devices: the report's table
for `--mesh RxC`."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import ModuleOp

from forge_opt.frontends.onnx.names import layer_key
from forge_opt.plan.graph_infos import COLUMN, GALAXY_LAYOUT, Collective, LinePlan, Plan
from forge_opt.targets.devices.program import COLLECTIVE_OPS, Program, moved_bytes, ring_bytes

AXIS_NAMES = ("rows", "columns")  # grid axis 0 runs down each column's R devices; axis 1 along each row's C


def ring_steps(kind: str, devices: int) -> int:
    """The steps of a ring over `devices`: an all-reduce 2·(n−1) (a
    reduce-scatter, then an all-gather), the others n−1."""
    return (2 if kind == "all_reduce" else 1) * (devices - 1)


def chains(collectives: list[Collective]) -> list[list[Collective]]:
    """The mesh's collectives by the line collective each came from
    (`collectives-on-mesh` made each a chain of one to three, and marked
    each with it: `line`); one made over one axis is a chain of its own."""
    out: list[list[Collective]] = []
    for c in collectives:
        if out and c.line is not None and out[-1][-1].line == c.line:
            out[-1].append(c)
        else:
            out.append([c])
    return out


def line_collectives(collectives: list[Collective]) -> list[tuple[str, int]]:
    """The collectives of the line the mesh's came from, each as (kind,
    bytes): a reduce-scatter, an all-reduce and an all-gather are an
    all-reduce of the reduce-scatter's input."""
    line = []
    for chain in chains(collectives):
        kind = "all_reduce" if any(c.op == "all_reduce" for c in chain) else chain[0].op
        line.append((kind, max(c.bytes for c in chain)))
    return line


def per_layer(plan: Plan) -> dict[tuple[int, ...], int]:
    """The mesh collectives of each decoder layer (the layer the tensor its
    chain starts from is in)."""
    counts: dict[tuple[int, ...], int] = {}
    for chain in chains(plan.collectives):
        layer = layer_key(chain[0].input)
        if layer is not None:
            counts[layer] = counts.get(layer, 0) + len(chain)
    return counts


def line_plan(module: ModuleOp) -> LinePlan:
    """What a 1-d program's collectives cost on its line of devices,
    priced as a plan's are."""
    program = Program(module)
    return _priced([(COLLECTIVE_OPS[type(c.op)], moved_bytes(c.op)) for c in program.collectives], program.devices)


def _priced(collectives: list[tuple[str, int]], devices: int) -> LinePlan:
    """Collectives, each (kind, bytes), on a ring of `devices`."""
    return LinePlan(len(collectives), sum(ring_steps(k, devices) for k, _ in collectives),
                    sum(ring_bytes(k, b, devices) for k, b in collectives))


def _kv_cache(plan: Plan) -> list[str]:
    """Where Galaxy's layout keeps the inputs it splits (a KV cache): over every device, each column its
    own heads (`scatter-attention-heads`), or a row's block whole on each of its columns, and why."""
    assert plan.mesh is not None
    rows, cols = plan.mesh
    split = [t for t in plan.tensors.values() if t.attr == "input" and t.split_axis is not None]
    if not split:
        return []
    by_rows = [t for t in split if t.split_blocks]
    if not by_rows:
        return [f"KV cache: {len(split)} inputs split over all {rows * cols} devices, each column making its own "
                "heads of its row's by one reduce-scatter"]
    heads = sorted({t.shape[t.split_axis] for t in by_rows if t.split_axis is not None})
    row = f"{'/'.join(map(str, heads))} KV head{'' if heads == [1] else 's'} a row"
    why = (f"{row}, which {cols} columns do not divide" if all(h % cols for h in heads) else
           "no split of the attention's heads over the columns sends fewer bytes")
    return [f"KV cache: {len(by_rows)} inputs split by the rows, a row's block whole on each of its {cols} columns "
            f"({why}: the heads' sums all-reduced there)"]


def mesh_table(plan: Plan) -> list[str]:
    """Per mesh axis: its collectives, ring steps and bytes each device sends
    per run; then the mesh's total and the line of R·C devices': for a
    line's program laid on the mesh, the same collectives on the line; for
    Galaxy's layout, the 1-d plan's own (`line_plan`), where recorded."""
    assert plan.mesh is not None
    rows, cols = plan.mesh
    galaxy = plan.mesh_layout == GALAXY_LAYOUT
    by_rows = sum(1 for layer in plan.layers if layer.blocks)
    rowwise = f" (but {by_rows} layers' heads, {rows} blocks, one a row)" if by_rows else ""
    by_hidden = any(layer.kind == "embedding" and layer.column_case == COLUMN for layer in plan.layers)
    stream = f"the residual stream split by hidden over the {cols} columns, " if by_hidden else ""
    shared = (f"Galaxy's layout: {stream}each weight in blocks over both axes" if galaxy else
              f"the weights split over all {rows * cols} as on a line{rowwise}")
    lines = [f"mesh {rows}x{cols}: device r*{cols}+c in row r, column c; {shared}, each collective over one mesh axis",
             *(_kv_cache(plan) if galaxy else []),
             f"{'axis':<22} {'group':>5} {'collectives':>11} {'ring steps':>10} {'sent per device':>16}"]
    total = [0, 0, 0]
    for axis, name in enumerate(AXIS_NAMES):
        mine = [c for c in plan.collectives if c.mesh_axis == axis]
        steps = sum(ring_steps(c.op, plan.mesh[axis]) for c in mine)
        sent = sum(c.ring_bytes_per_device for c in mine)
        kinds = ", ".join(f"{sum(c.op == k for c in mine)} {k}" for k in sorted({c.op for c in mine}))
        label = f"{name} (axis {axis})"
        lines.append(f"{label:<22} {plan.mesh[axis]:>5} {len(mine):>11} {steps:>10} {sent:>16,}"
                     + (f"  {kinds}" if kinds else ""))
        total = [total[0] + len(mine), total[1] + steps, total[2] + sent]
    lines.append(f"{'mesh':<22} {rows * cols:>5} {total[0]:>11} {total[1]:>10} {total[2]:>16,}")
    p = math.prod(plan.mesh)
    # Galaxy's collectives are not a line's laid on the mesh: its 1-d plan is its own, where recorded
    line, label = (plan.line_plan, f"line of {p} (its plan)") if galaxy else \
        (_priced(line_collectives(plan.collectives), p), f"line of {p}")
    if line is not None:
        lines.append(f"{label:<22} {p:>5} {line.collectives:>11} {line.ring_steps:>10} "
                     f"{line.ring_bytes_per_device:>16,}")
    return lines
