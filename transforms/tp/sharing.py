"""How P devices come to share a `tir` program: the one list of passes
`onnx-to-forge{devices=P}` runs and `device-memory` sizes each P with."""

from __future__ import annotations

from xdsl.passes import ModulePass

from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.stack_experts import StackExpertsPass
from forge_opt.transforms.tp.annotate import TensorParallelPass
from forge_opt.transforms.tp.combine import CombineAllReducesPass
from forge_opt.transforms.tp.mesh import CollectivesOnMeshPass
from forge_opt.transforms.tp.partition import TPPartitionPass


def sharing_passes(options: CompileOptions, devices: int) -> list[ModulePass]:
    """A mixture's experts stacked, each layer's case chosen as `options`
    ask, the program for `devices` made, its small independent all-reduces
    combined (and its collectives laid on the mesh `options` name, when
    they name one of `devices`)."""
    shared = [StackExpertsPass(), TensorParallelPass.of(options, devices), TPPartitionPass(), CombineAllReducesPass()]
    if options.mesh and devices == options.device_count:
        shared.append(CollectivesOnMeshPass(options.mesh))
    return shared
