"""How a model is compiled, as one record every layer takes whole: the
`onnx-to-forge` pass is one (its pass options are these fields),
`forge-check`'s options hold one, and `tensor_parallel`, `size_devices`
and the P-device writer read one. A new option is one field here; its
values are checked here only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace

from forge_opt.data_formats import FormatName
from forge_opt.diagnostics import ForgeOptError
from forge_opt.transforms.data_formats import checked_formats
from forge_opt.transforms.tp.mesh import parse_mesh


def option(flag: str, default, needs: tuple[str, str] | None = None):
    """A field users set with the command-line `flag`; `needs`: the field it
    goes with (in the same record), and what to say when it is alone."""
    return field(default=default, metadata={"flag": flag, "needs": needs})


@dataclass(frozen=True)
class CompileOptions:
    devices: int = option("--devices", 1)  # tensor-parallel over this many (`sharing_passes` when > 1)
    min_size: int = option("--min-size", 0)  # layers of fewer weight elements stay replicated
    plan: str = option("--plan", "")  # a JSON file pinning layers' cases (`tp/annotate.py`)
    require_sharded: bool = option("--require-sharded", False)  # a larger layer left whole is an error
    data_format: str = option("--data-format", "float32")  # the program's (`data_formats.PROGRAM_FORMATS`)
    weight_format: str = option("--weight-format", "")  # the matmul weights': the data format's, or a block float
    static_cache: int = 0  # a growing KV cache as one of this many positions (`static-kv-cache`)
    # bytes a device holds (a count, or `512MiB`, `24GB`): choose `devices` as the smallest count up to
    # `max_devices` whose per-device share fits (`tp/sizing`)
    device_memory: int | str = option("--device-memory", 0)
    max_devices: int = option("--max-devices", 8, ("device_memory", "--max-devices goes with --device-memory"))
    # the devices as an R×C mesh (`RxC`): every collective over one mesh axis at a time (`collectives-on-mesh`)
    mesh: str = option("--mesh", "")

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
        if self.mesh_shape is not None:
            rows, cols = self.mesh_shape
            if self.devices not in (1, rows * cols):
                raise ForgeOptError(f"devices={self.devices} with mesh={self.mesh}: the mesh has {rows * cols} "
                                    "devices: leave devices out")
            if self.memory:
                raise ForgeOptError(f"mesh={self.mesh} with device-memory: device-memory chooses a device count, "
                                    "the mesh gives one: leave one out")
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
        mesh = self.mesh if devices == self.device_count else ""
        return replace(self.as_options(), devices=devices, mesh=mesh, device_memory=0, **single)


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
