"""Running a tensor-parallel plan, or a split for several devices, as an
MPI job: `mpiexec -n P` processes of `tools/tp_run.py`, one per device
(mpi4py and the mpich wheel, the `distributed` extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from forge_opt.diagnostics import ForgeOptError

#: seconds an MPI run may take before forge-check stops waiting for it
MPI_TIMEOUT = 600


def run_mpi(folder: Path, feeds: dict[str, np.ndarray], devices: int) -> list[dict[str, np.ndarray]]:
    """Run the plan or split in `folder` with `mpiexec -n P` (one process
    per device, `tools/tp_run.py`); each process's outputs."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        raise ForgeOptError("--mpi needs mpiexec: pip install 'forge-opt[distributed]' (mpi4py and the mpich wheel)")
    with tempfile.TemporaryDirectory() as tmp:  # the inputs and outputs: never in the user's folder
        np.savez(Path(tmp) / "inputs.npz", **feeds)  # pyright: ignore[reportArgumentType]
        command = [mpiexec, "-n", str(devices), sys.executable, "-m", "forge_opt.tools.tp_run", str(folder),
                   "--inputs", str(Path(tmp) / "inputs.npz"), "--output", str(Path(tmp) / "outputs_{rank}.npz")]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=MPI_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise ForgeOptError(f"the MPI run did not finish in {MPI_TIMEOUT} s ({' '.join(command)})") from None
        if done.returncode != 0:
            # each failing device says so in one line; MPI's own teardown text follows, for the rest
            named = [line for line in done.stderr.splitlines() if line.startswith("tp_run (device ")]
            detail = "\n".join(named) if named else done.stderr.strip()
            raise ForgeOptError(f"the MPI run failed (exit {done.returncode}):\n{detail}")
        outputs = []
        for rank in range(devices):
            with np.load(Path(tmp) / f"outputs_{rank}.npz") as data:
                outputs.append({k: data[k] for k in data.files})
    return outputs


def run_split_mpi(folder: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`forge-split run --mpi`: the outputs of the plan or split in
    `folder`, run with one MPI process per device it is for."""
    from forge_opt.split.folder import read_split
    from forge_opt.split.runner import agreed

    infos = read_split(folder)[0]
    devices = infos["grid"]["shape"][0] if "grid" in infos else infos.get("parallel", 1)
    if devices < 2:
        raise ForgeOptError(f"{folder}: a split for one device has nothing to run under MPI "
                            "(forge-split MODEL --devices P writes one for several)")
    # a split's outputs have no split axis: each process's must then be the same
    return agreed(infos, run_mpi(folder, inputs, devices), str(folder))
