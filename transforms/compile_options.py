"""How a model is compiled, as one record every layer takes whole: the
`onnx-to-forge` pass is one (its pass options are these fields),
`forge-check`'s options hold one, and `tensor_parallel`, `size_devices`
and the P-device writer read one. A new option is one field here; its
values are checked here only."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace

from forge_opt.data_formats import FORMATS, PROGRAM_FORMATS, FormatName
from forge_opt.diagnostics import ForgeOptError
from forge_opt.flags import COMPILING, DEVICES, option
from forge_opt.plan.graph_infos import LINE_LAYOUT, MESH_LAYOUTS
from forge_opt.transforms.data_formats import checked_formats
from forge_opt.transforms.tp.mesh import mesh_grid, parse_mesh

#: the most devices `--device-memory` considers unless told
MAX_DEVICES = 8


@dataclass(frozen=True)
class CompileOptions:
    # tensor-parallel over this many devices (`sharing_passes` when > 1)
    devices: int = option(
        "--devices", 1, group=DEVICES, metavar="P",
        least=(2, "tensor parallelism needs 2 devices or more (leave --devices out to check on one device)"),
        help="check the tensor-parallel program for P devices (simulated in this process unless --mpi)")
    min_size: int = option("--min-size", 0, group=DEVICES, metavar="N",
                           help="with --devices: layers of fewer weight elements stay replicated (default 0)")
    # read by `tp/annotate.py`
    plan: str = option("--plan", "", group=DEVICES, metavar="FILE",
                       help="with --devices: a JSON file pinning layers' cases")
    require_sharded: bool = option(
        "--require-sharded", False, group=DEVICES,
        help="with --devices: a layer of at least --min-size weight elements left replicated is an error, not a "
        "warning")
    # one of `data_formats.PROGRAM_FORMATS`
    data_format: str = option(
        "--data-format", "float32", group=COMPILING, choices=tuple(str(f) for f in PROGRAM_FORMATS),
        help="compile the program's values in this format (bfloat16: Forge's Float16_b, inputs cast to it); judged "
        "by PCC against float32 onnxruntime, with the relative L2 error and largest difference (default float32)")
    # "": the data format's
    weight_format: str = option(
        "--weight-format", "", group=COMPILING, choices=tuple(str(f) for f in FORMATS),
        help="store the matmul weights in this format: the data format's (the default) or a block float (bfp8_b, "
        "bfp4_b: tt-mlir's experimental-weight-dtype), emulated bit for bit")
    static_cache: int = 0  # a growing KV cache as one of this many positions (`static-kv-cache`)
    # bytes a device holds (a count, or `512MiB`, `24GB`): choose `devices` as the smallest count up to
    # `max_devices` whose per-device share fits (`tp/sizing`)
    device_memory: int | str = option(
        "--device-memory", 0, group=DEVICES, metavar="BYTES", kind=str,
        help="choose --devices: the smallest count whose per-device parameters and KV cache fit in BYTES (e.g. "
        "512MiB, 24GB), with the table of each count tried; with --stages, the devices of each stage, from what "
        "the stage stores")
    max_devices: int = option(
        "--max-devices", MAX_DEVICES, ("device_memory", "--max-devices goes with --device-memory"), group=DEVICES,
        metavar="N", help=f"with --device-memory: the most devices to consider (default {MAX_DEVICES})")
    # laid out by `collectives-on-mesh`
    mesh: str = option(
        "--mesh", "", group=DEVICES, metavar="RxC",
        help="check the tensor-parallel program for an R×C mesh of devices (Galaxy 8x4, T3K 2x4, n300 1x2): device "
        "r·C+c in row r, column c; each collective runs over one mesh axis at a time, and the report prints a "
        "table per axis beside the line of R·C devices")
    mesh_layout: str = option(
        "--mesh-layout", LINE_LAYOUT, ("mesh", "--mesh-layout goes with --mesh"), group=DEVICES, choices=MESH_LAYOUTS,
        help="with --mesh: 'line' splits each weight over all R·C devices as on a line of them; 'galaxy' is "
        "llama3_70b_galaxy's: the residual stream split by hidden over the C columns and whole down them, each "
        "Linear's weight in [in/C, out/R] or [in/R, out/C] blocks, so that the columns all-reduce the partial "
        "sums and norm statistics and the rows the attention's and the MLP's (default line)")

    def __post_init__(self):
        # a value no run can use is the user's mistake, said at once
        if not isinstance(self.plan, str):
            raise ForgeOptError("plan= takes the path of a plan's JSON file, as a string")
        for name, least in (("devices", 1), ("max_devices", 1), ("min_size", 0), ("static_cache", 0)):
            if getattr(self, name) < least:
                raise ForgeOptError(f"{_spelt(name)}={getattr(self, name)}: give {least} or more"
                                    + (" (2 or more for tensor parallelism)" if name == "devices" else ""))
        if self.memory < 0:
            raise ForgeOptError(f"device-memory={self.device_memory}: give a size above 0")
        if self.memory and self.devices != 1:
            raise ForgeOptError(f"devices={self.devices} with device-memory: device-memory chooses the device "
                                "count: leave devices out")
        if self.mesh:
            mesh_grid(self.devices, self.mesh)
            if self.memory:
                raise ForgeOptError(f"mesh={self.mesh} with device-memory: device-memory chooses a device count, "
                                    "the mesh gives one: leave one out")
        if self.mesh_layout not in MESH_LAYOUTS:
            raise ForgeOptError(f"mesh-layout={self.mesh_layout}: give one of {', '.join(MESH_LAYOUTS)}")
        self.formats  # noqa: B018  (an unknown format is an error at once)

    @property
    def device_count(self) -> int:
        """The devices the program runs on: the mesh's, or `devices`."""
        return self.devices if self.mesh_shape is None else self.mesh_shape[0] * self.mesh_shape[1]

    @property
    def mesh_shape(self) -> list[int] | None:
        """`mesh` as [R, C] (None: no mesh)."""
        return list(parse_mesh(self.mesh)) if self.mesh else None

    @property
    def formats(self) -> tuple[FormatName, FormatName]:
        """The program's format and its matmul weights'."""
        return checked_formats(self.data_format, self.weight_format)

    @property
    def reduced(self) -> bool:
        """The program computes in less than float32 (judged by Forge's PCC rule)."""
        return self.formats != (FormatName.FLOAT32, FormatName.FLOAT32)

    @property
    def memory(self) -> int:
        """`device_memory` in bytes (0: the device count is given)."""
        return parse_bytes(self.device_memory) if isinstance(self.device_memory, str) else self.device_memory

    def values(self) -> dict:
        """Each option's value, by field name."""
        return {f.name: getattr(self, f.name) for f in fields(CompileOptions)}

    def as_options(self) -> CompileOptions:
        """These options as the record itself (a pass built from it is one too)."""
        return CompileOptions(**self.values())

    def at(self, devices: int) -> CompileOptions:
        """These options for `devices` devices, chosen: no sizing left, and on
        one device no plan or size floor (it has no layers to pin)."""
        single = {"plan": "", "min_size": 0, "require_sharded": False} if devices == 1 else {}
        mesh, layout = (self.mesh, self.mesh_layout) if devices == self.device_count else ("", LINE_LAYOUT)
        return replace(self.as_options(), devices=devices, mesh=mesh, mesh_layout=layout, device_memory=0, **single)


def _spelt(name: str) -> str:
    return name.replace("_", "-")


_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
          "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}


def parse_bytes(text: str) -> int:
    """`24GB`, `16GiB`, `512MiB` or a plain count of bytes."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?)?b?\s*", text.lower())
    if not found:
        raise ForgeOptError(f"'{text}' is not a size in bytes (e.g. 12000000, 512MiB, 24GB)")
    return int(float(found.group(1)) * _UNITS[found.group(2) or ""])
