"""How P devices come to share a `tir` program: the one list of passes
`onnx-to-forge{devices=P}` runs and `device-memory` sizes each P with."""

from __future__ import annotations

from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan.graph_infos import GALAXY_LAYOUT
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.stack_experts import StackExpertsPass
from forge_opt.transforms.tp.annotate import TensorParallelPass
from forge_opt.transforms.tp.combine import CombineAllReducesPass
from forge_opt.transforms.tp.mesh import COLUMNS, ROWS, CollectivesOnMeshPass, parse_mesh
from forge_opt.transforms.tp.partition import TPPartitionPass
from forge_opt.transforms.tp.scatter_all_reduces import ScatterAllReducesPass
from forge_opt.transforms.tp.scatter_heads import ScatterAttentionHeadsPass


def sharing_passes(options: CompileOptions, devices: int) -> list[ModulePass]:
    """A mixture's experts stacked, each layer's case chosen as `options`
    ask, the program for `devices` made, its small independent all-reduces
    combined (and its collectives laid on the mesh `options` name, when
    they name one of `devices`). In the Galaxy layout the program is
    annotated and partitioned over the mesh's columns, then over its rows:
    each weight in blocks over both, each collective over one; all-reduces
    that only element-wise ops read become reduce-scatters (the gated MLP's
    on the columns, as Galaxy's), and so do the column sums that make a
    row's attention heads (each column its own heads and block of the KV
    cache)."""
    if options.mesh_layout == GALAXY_LAYOUT and not options.mesh:
        raise ForgeOptError("mesh-layout=galaxy goes with mesh=RxC: Galaxy's layout is of a mesh's two axes")
    on_mesh = bool(options.mesh) and devices == options.device_count
    if on_mesh and options.mesh_layout == GALAXY_LAYOUT:
        rows, cols = parse_mesh(options.mesh)
        return [StackExpertsPass(),
                TensorParallelPass.of(options, cols, COLUMNS), TPPartitionPass(COLUMNS),
                TensorParallelPass.of(options, rows, ROWS), TPPartitionPass(ROWS), ScatterAllReducesPass(),
                ScatterAttentionHeadsPass(), CombineAllReducesPass()]
    shared = [StackExpertsPass(), TensorParallelPass.of(options, devices), TPPartitionPass(), CombineAllReducesPass()]
    if on_mesh:
        shared.append(CollectivesOnMeshPass(options.mesh))
    return shared
