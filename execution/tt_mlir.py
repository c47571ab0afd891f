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

import os
import re
import subprocess
import sys
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
    devices: int = 1  # the mock's chips

    @property
    def reached(self) -> str:
        """The last of tt-mlir's dialects the program was lowered to: TTNN, TTIR or StableHLO ("" none)."""
        names = {p.name.split("_")[0] for p in self.dumps}
        return next((stage.upper() if stage != "shlo" else "StableHLO" for stage in ("ttnn", "ttir", "shlo")
                     if stage in names), "")

    def line(self) -> str:
        head = f"tt-mlir (jax-tt-plugin 0.1.3, mock Blackhole p150{f' x{self.devices}' if self.devices > 1 else ''})"
        if self.compiled:
            return f"{head}: compiled to TTNN ({len(self.dumps)} dumps)"
        reached = f" (lowered to {self.reached} first)" if self.reached in ("TTIR", "TTNN") else ""
        return f"{head}: did not compile{reached}: {self.diagnostic}"


def descriptor(devices: int) -> str:
    """UMD's mock cluster descriptor of `devices` Blackhole p150 chips in a
    line, each pair of neighbours joined by two ethernet links (without the
    links the system mesh stays 1x1); its board ids follow the p150's
    (`mock_p150.yaml`), which encodes the board type."""
    chips = range(devices)
    first = 4476187513037
    # a chip's links to the right on logical channels 8 and 9, to the left on 10 and 11 (12 of 14 unharvested)
    links = [f"  - [{{chip: {a}, chan: {c}}}, {{chip: {a + 1}, chan: {c + 2}}}]" for a in chips[:-1] for c in (8, 9)]
    harvest = ("    noc_translation: true\n    harvest_mask: 0\n    dram_harvesting_mask: 0\n"
               "    eth_harvesting_mask: 288\n    pcie_harvesting_mask: 2\n    l2cpu_harvesting_mask: 0")
    return "\n".join([
        f"# Mock UMD cluster descriptor: {devices} Blackhole p150 chips in a line (written by forge-opt)",
        "arch:", *(f"  {i}: blackhole" for i in chips), "chips:", "  {}",
        "chip_unique_ids:", *(f"  {i}: {first + i}" for i in chips),
        "ethernet_connections:", *(links or ["  []"]), "ethernet_connections_to_remote_devices:", "  []",
        "chips_with_mmio:", *(f"  - {i}: {i}" for i in chips),
        "harvesting:", *(f"  {i}:\n{harvest}" for i in chips),
        "boards:", *(f"  -\n    - board_id: {first + i}\n    - board_type: p150\n    - chips:\n        - {i}"
                     for i in chips),
        "",
    ])


def available() -> bool:
    from importlib.util import find_spec

    return find_spec("jax_plugins.libtt") is not None


def compile_stablehlo(text: str, folder: Path, devices: int = 1) -> TTMLIRResult:
    """Compile the StableHLO module `text` with tt-mlir, its dumps written in
    `folder` (created), in a child process."""
    if not available():
        raise ForgeOptError("the tt-mlir check needs jax-tt-plugin: pip install 'forge-opt[tenstorrent]'")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "program.stablehlo.mlir"
    write_text(source, text)  # a temporary name, then renamed: never through a link in the user's folder
    cluster = DESCRIPTOR
    if devices > 1:  # P chips joined by ethernet: the plugin opens a 1xP mesh
        cluster = folder / f"mock_p150_x{devices}.yaml"
        write_text(cluster, descriptor(devices))
    env = dict(os.environ, TT_METAL_MOCK_CLUSTER_DESC_PATH=str(cluster), TTXLA_CODEGEN_EXPORT_DIR=str(folder),
               JAX_PLATFORMS="tt")
    try:
        done = subprocess.run([sys.executable, "-m", "forge_opt.execution.tt_mlir", str(source), str(devices)],
                              env=env, capture_output=True, text=True, timeout=TIMEOUT, cwd=folder)
    except subprocess.TimeoutExpired:
        return TTMLIRResult(False, f"no answer in {TIMEOUT} s", devices=devices)
    dumps = sorted(p for p in folder.rglob("*.mlir") if p != source)
    lowered = any(p.name.startswith("ttnn") for p in dumps)
    said = done.stdout + done.stderr
    if done.returncode == 0 or (lowered and _CODEGEN_MISSING in said):
        return TTMLIRResult(lowered, "" if lowered else "tt-mlir wrote no TTNN", dumps, devices)
    return TTMLIRResult(False, first_error(said, text), dumps, devices)


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
