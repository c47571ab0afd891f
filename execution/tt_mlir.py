"""tt-mlir, the real Tenstorrent compiler, on a StableHLO program: the one
jax-tt-plugin 0.1.3 holds (tt-xla's PJRT plugin), compiling for a mock
Blackhole p150 (`mock_p150.yaml`, UMD's mock cluster descriptor: no
hardware is opened). It checks that tt-mlir lowers the program through
StableHLO -> TTIR -> TTNN, not its values (the mock computes nothing).

The compile runs in a child process (`python -m forge_opt.execution.tt_mlir
FILE DUMPS`): the plugin initialises a platform of its own, extracts its
runtime (about 400 MB) under the temporary folder on first use, and fails
after the IR is written at a code-generation step it does not ship
("tt-alchemist"); the dumps (`ttir_*.mlir`, `ttnn_*.mlir`, ...) are what
tells a compiled program. The `tenstorrent` extra installs the plugin.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import write_text

DESCRIPTOR = Path(__file__).with_name("mock_p150.yaml")
#: a first compile takes about 20 s on 2 cores; a large program more
TIMEOUT = 900
#: what the plugin says after the IR is dumped, when it reaches the step it does not ship
_CODEGEN_MISSING = "tt-alchemist"


@dataclass
class TTMLIRResult:
    compiled: bool  # tt-mlir lowered the program to TTNN
    diagnostic: str = ""  # tt-mlir's first error line, where it did not
    dumps: list[Path] = field(default_factory=list)  # its IR at each stage, as it wrote it
    mesh: list[int] = field(default_factory=lambda: [1])  # the mock's chips: [P] in a line, or [R, C]

    @property
    def reached(self) -> str:
        """The last of tt-mlir's dialects the program was lowered to: TTNN, TTIR or StableHLO ("" none)."""
        names = {p.name.split("_")[0] for p in self.dumps}
        return next((stage.upper() if stage != "shlo" else "StableHLO" for stage in ("ttnn", "ttir", "shlo")
                     if stage in names), "")

    def line(self, what: str = "") -> str:
        """The report's line; `what`: the program's name where a check
        compiles several ("stage 1 ")."""
        chips = f" x{self.mesh[0]}" if self.mesh != [1] and len(self.mesh) == 1 else ""
        chips = f" {self.mesh[0]}x{self.mesh[1]} mesh" if len(self.mesh) == 2 else chips
        head = f"tt-mlir (jax-tt-plugin 0.1.3, mock Blackhole p150{chips})"
        if self.compiled:
            return f"{head}: {what}compiled to TTNN ({len(self.dumps)} dumps)"
        reached = f" (lowered to {self.reached} first)" if self.reached in ("TTIR", "TTNN") else ""
        return f"{head}: {what}did not compile{reached}: {self.diagnostic}"


def descriptor(mesh: Sequence[int]) -> str:
    """UMD's mock cluster descriptor of R x C Blackhole p150 chips (`mesh`,
    [P] for a line of P), chip r·C + c at row r, column c, each pair of
    neighbours joined by two ethernet links: to the right on logical
    channels 8 and 9 (10 and 11 on the left), downwards on 0 and 1 (2 and
    3 above). Without the links the system mesh stays 1x1; with them the
    plugin finds the grid. Its board ids follow the p150's
    (`mock_p150.yaml`), which encodes the board type."""
    rows, cols = (1, mesh[0]) if len(mesh) == 1 else (mesh[0], mesh[1])
    chips = range(rows * cols)
    first = 4476187513037
    pairs = ([(a, a + 1, 8) for a in chips if a % cols < cols - 1]  # along a row
             + [(a, a + cols, 0) for a in chips if a + cols < len(chips)])  # down a column
    links = [f"  - [{{chip: {a}, chan: {c}}}, {{chip: {b}, chan: {c + 2}}}]" for a, b, base in pairs
             for c in (base, base + 1)]
    harvest = ("    noc_translation: true\n    harvest_mask: 0\n    dram_harvesting_mask: 0\n"
               "    eth_harvesting_mask: 288\n    pcie_harvesting_mask: 2\n    l2cpu_harvesting_mask: 0")
    shape = f"{rows}x{cols} mesh of" if rows > 1 else "line of"
    return "\n".join([
        f"# Mock UMD cluster descriptor: a {shape} {len(chips)} Blackhole p150 chips (written by forge-opt)",
        "arch:", *(f"  {i}: blackhole" for i in chips), "chips:", "  {}",
        "chip_unique_ids:", *(f"  {i}: {first + i}" for i in chips),
        "ethernet_connections:", *(links or ["  []"]), "ethernet_connections_to_remote_devices:", "  []",
        "chips_with_mmio:", *(f"  - {i}: {i}" for i in chips),
        "harvesting:", *(f"  {i}:\n{harvest}" for i in chips),
        "boards:", *(f"  -\n    - board_id: {first + i}\n    - board_type: p150\n    - chips:\n        - {i}"
                     for i in chips),
        "",
    ])


def mesh_graph(mesh: Sequence[int]) -> str:
    """tt-metal's mesh graph descriptor of an R x C Blackhole mesh on one
    host. 32 p150 chips (a Galaxy's 8x4) are a cluster of no type tt-metal
    knows, which it opens only with the descriptor given
    (`TT_MESH_GRAPH_DESC_PATH`); a 2x2 or 2x4 one it would find by itself."""
    return "\n".join([
        "# tt-metal mesh graph descriptor (written by forge-opt)",
        "mesh_descriptors {", '  name: "M0"', "  arch: BLACKHOLE",
        f"  device_topology {{ dims: [ {mesh[0]}, {mesh[1]} ] }}", "  host_topology { dims: [ 1, 1 ] }",
        "  channels { count: 2 policy: RELAXED }", "}",
        'top_level_instance { mesh { mesh_descriptor: "M0" mesh_id: 0 } }', ""])


def program_mesh(text: str) -> list[int]:
    """The mesh a StableHLO program declares (its `sdy.mesh`): [P] for a
    line, [R, C] for a mesh, [1] for a program of one device."""
    found = re.search(r"sdy\.mesh\s+@[\w.$-]+\s*=\s*<\[([^\]]*)\]>", text)
    sizes = [int(x) for x in re.findall(r'"\w+"\s*=\s*(\d+)', found.group(1))] if found else []
    return sizes or [1]


def available() -> bool:
    from importlib.util import find_spec

    return find_spec("jax_plugins.libtt") is not None


def compile_stablehlo(text: str, folder: Path) -> TTMLIRResult:
    """Compile the StableHLO module `text` with tt-mlir, its dumps written in
    `folder` (created), in a child process, on as many mock chips as the
    program declares, laid out as its mesh (`program_mesh`)."""
    if not available():
        raise ForgeOptError("the tt-mlir check needs jax-tt-plugin: pip install 'forge-opt[tenstorrent]'")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "program.stablehlo.mlir"
    write_text(source, text)  # a temporary name, then renamed: never through a link in the user's folder
    mesh = program_mesh(text)
    devices = math.prod(mesh)
    cluster = DESCRIPTOR
    env = dict(os.environ, TTXLA_CODEGEN_EXPORT_DIR=str(folder), JAX_PLATFORMS="tt")
    if devices > 1:  # P chips joined by ethernet as the program's mesh: the plugin opens that mesh
        cluster = folder / f"mock_p150_{'x'.join(map(str, mesh))}.yaml"
        write_text(cluster, descriptor(mesh))
    if len(mesh) == 2:
        write_text(folder / "mesh_graph.textproto", mesh_graph(mesh))
        env["TT_MESH_GRAPH_DESC_PATH"] = str(folder / "mesh_graph.textproto")
    env["TT_METAL_MOCK_CLUSTER_DESC_PATH"] = str(cluster)
    try:
        done = subprocess.run([sys.executable, "-m", "forge_opt.execution.tt_mlir", str(source), str(devices)],
                              env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=folder)
    except subprocess.TimeoutExpired:
        return TTMLIRResult(False, f"no answer in {TIMEOUT} s", mesh=mesh)
    dumps = sorted(p for p in folder.rglob("*.mlir") if p != source)
    lowered = any(p.name.startswith("ttnn") for p in dumps)
    said = done.stdout + done.stderr
    if done.returncode == 0 or (lowered and _CODEGEN_MISSING in said):
        return TTMLIRResult(lowered, "" if lowered else "tt-mlir wrote no TTNN", dumps, mesh)
    return TTMLIRResult(False, first_error(said, text), dumps, mesh)


def first_error(output: str, text: str = "") -> str:
    """The first line of the child's output that reads as an error, with the
    op of `text` (the StableHLO given) it points at, and so the Forge op's
    result it computes (the SSA names are the ONNX values')."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = next((line for line in lines if re.search(r"error|TT_FATAL|failed|Exception", line, re.IGNORECASE)
                 and "| info" not in line), lines[-1] if lines else "no output")
    said = re.sub(r"^.*?\|\s*(critical|error)\s*\|\s*\w+\s*\|\s*", "", said)  # tt-metal's log prefix
    said = re.sub(r"\s+", " ", said)[:400]
    at = re.search(r'(?:loc\("-":|-:)(\d+):\d+', output)
    source = text.splitlines()
    if at and 0 < int(at.group(1)) <= len(source):
        op = re.match(r'\s*(%[\w.$-]+)(?::\d+)?(?:, %[\w.$-]+)* = "([\w.]+)"', source[int(at.group(1)) - 1])
        if op:
            said += f" (at line {at.group(1)}: {op.group(2)} computing {op.group(1)})"
    return said


def _main(path: str, devices: str) -> int:
    """In the child: compile the file's module on the plugin's devices."""
    from jax._src import xla_bridge
    from jaxlib import xla_client as xc

    backend = xla_bridge.get_backend("tt")
    chosen = backend.devices()[: int(devices)]
    options = xc.CompileOptions()
    if int(devices) > 1:
        options.num_partitions = int(devices)
        build = options.executable_build_options
        build.num_partitions = int(devices)
        build.use_spmd_partitioning = True
    backend.compile_and_load(Path(path).read_text(), xc.DeviceList(tuple(chosen)), options)
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:]))
