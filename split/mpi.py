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
from forge_opt.files import load_arrays, save_arrays

#: seconds an MPI run may take before forge-check stops waiting for it
MPI_TIMEOUT = 600


def run_mpi(folder: Path, feeds: dict[str, np.ndarray], devices: int) -> list[dict[str, np.ndarray]]:
    """Run the plan or split in `folder` with `mpiexec -n P` (one process
    per device, `tools/tp_run.py`); each process's outputs."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        raise ForgeOptError("--mpi needs mpiexec: pip install 'forge-opt[distributed]' (mpi4py and the mpich wheel)")
    with tempfile.TemporaryDirectory() as tmp:  # the inputs and outputs: never in the user's folder
        save_arrays(Path(tmp) / "inputs.npz", feeds)
        command = [mpiexec, "-n", str(devices), sys.executable, "-m", "forge_opt.tools.tp_run", str(folder),
                   "--inputs", str(Path(tmp) / "inputs.npz"), "--output", str(Path(tmp) / "outputs_{rank}.npz"),
                   "--error", str(Path(tmp) / "error_{rank}.txt")]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=MPI_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise ForgeOptError(f"the MPI run did not finish in {MPI_TIMEOUT} s ({' '.join(command)})") from None
        missing = [rank for rank in range(devices) if not (Path(tmp) / f"outputs_{rank}.npz").is_file()]
        if done.returncode != 0 or missing:
            said = [(Path(tmp) / f"error_{rank}.txt") for rank in range(devices)]
            raise ForgeOptError(_failure(done, missing, [p.read_text().strip() for p in said if p.is_file()]))
        return [load_arrays(Path(tmp) / f"outputs_{rank}.npz") for rank in range(devices)]


def _failure(done: subprocess.CompletedProcess, missing: list[int], said: list[str]) -> str:
    """Why an MPI run failed: each device that said so (in its error file,
    `said`, or on stderr), in its own line; else how mpiexec saw its
    processes end (exit status or signal, which MPICH's launcher prints to
    standard output); and the devices that ended without their outputs."""
    named = said or [line for line in done.stderr.splitlines() if line.startswith("tp_run (device ")]
    ended = [line.strip() for line in (done.stdout + done.stderr).splitlines()
             if "BAD TERMINATION" in line or "EXIT STATUS" in line or "signal" in line.lower()]
    lines = named or ended or [line for line in done.stderr.strip().splitlines() if line.strip()][-5:]
    if missing:
        lines.append(f"device{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}: no outputs "
                     "(the process ended before the run completed)")
    how = f"exit {done.returncode}" if done.returncode >= 0 else f"signal {-done.returncode}"
    return f"the MPI run failed ({how}):\n" + "\n".join(lines)


def run_split_mpi(folder: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`forge-split run --mpi`: the outputs of the plan or split in
    `folder`, run with one MPI process per device it is for."""
    from forge_opt.split.folder import read_split
    from forge_opt.split.runner import agreed

    plan = read_split(folder)[0]
    devices = plan.device_count
    if devices < 2:
        raise ForgeOptError(f"{folder}: a split for one device has nothing to run under MPI "
                            "(forge-split MODEL --devices P writes one for several)")
    # a split's outputs have no split axis: each process's must then be the same
    return agreed(plan, run_mpi(folder, inputs, devices), str(folder))
