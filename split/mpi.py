"""Running a tensor-parallel plan, or a split for several devices, as an
MPI job: `mpiexec -n P` processes of `tools/tp_run.py`, one per device
(mpi4py and the mpich wheel, the `distributed` extra)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import load_arrays, save_arrays
from forge_opt.interpreters.mpi_progress import Progress, describe, read_progress, waits, where

#: seconds a device may take to reach the collective the other devices wait in (`--timeout`)
MPI_TIMEOUT = 600.0
#: how often the launcher reads the devices' progress
_POLL = 0.2


def run_mpi(folder: Path, feeds: dict[str, np.ndarray], devices: int,
            timeout: float = MPI_TIMEOUT, micro_batches: int = 1) -> list[dict[str, np.ndarray]]:
    """Run the plan or split in `folder` with `mpiexec -n P` (one process
    per device, `tools/tp_run.py`); each process's outputs. A device that
    keeps another waiting `timeout` seconds (in a collective of theirs, or
    for a message it sends: `mpi_progress`) ends the run, and the error
    names it; so does a device that ended early, however it ended.
    `micro_batches`: as `run_split`'s."""
    mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
    if mpiexec is None:
        raise ForgeOptError("--mpi needs mpiexec: pip install 'forge-opt[distributed]' (mpi4py and the mpich wheel)")
    if not timeout > 0:
        raise ForgeOptError(f"--timeout {timeout}: give a number of seconds above 0")
    with tempfile.TemporaryDirectory() as tmp:  # the inputs and outputs: never in the user's folder
        at = Path(tmp)
        save_arrays(at / "inputs.npz", feeds)
        command = [mpiexec, "-n", str(devices), sys.executable, "-m", "forge_opt.tools.tp_run", str(folder),
                   "--inputs", str(at / "inputs.npz"), "--output", str(at / "outputs_{rank}.npz"),
                   "--error", str(at / "error_{rank}.txt"), "--progress", str(at / "progress_{rank}.txt"),
                   "--micro-batches", str(micro_batches)]
        with open(at / "stdout.txt", "w") as out, open(at / "stderr.txt", "w") as err:
            job = subprocess.Popen(command, stdout=out, stderr=err, text=True, start_new_session=True)
            late = _wait(job, at, devices, timeout)
        stdout, stderr = (at / "stdout.txt").read_text(), (at / "stderr.txt").read_text()
        progress = read_progress(at, devices)
        if late:
            raise ForgeOptError(late + where(progress))
        missing = [rank for rank in range(devices) if not (at / f"outputs_{rank}.npz").is_file()]
        if job.returncode != 0 or missing:
            said = [at / f"error_{rank}.txt" for rank in range(devices)]
            raise ForgeOptError(_failure(job.returncode, stdout, stderr, missing,
                                         [p.read_text().strip() for p in said if p.is_file()], progress))
        return [load_arrays(at / f"outputs_{rank}.npz") for rank in range(devices)]


def _wait(job: subprocess.Popen, at: Path, devices: int, timeout: float) -> str:
    """Wait for the job; end it (its whole process group) when a device has
    kept another waiting in a collective, send or receive for `timeout`
    seconds, and say which ("" when it ended by itself)."""
    since: dict[tuple[int, str, int], float] = {}  # each wait, from when it was first seen
    while job.poll() is None:
        time.sleep(_POLL)
        now, seen = time.monotonic(), waits(read_progress(at, devices), devices)
        since = {(w.waiter, w.key, w.seq): since.get((w.waiter, w.key, w.seq), now) for w in seen}
        stuck = [w for w in seen if now - since[(w.waiter, w.key, w.seq)] >= timeout]
        if stuck:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            return describe(stuck, devices, timeout)
    return ""


def _failure(code: int, stdout: str, stderr: str, missing: list[int], said: list[str],
             progress: dict[int, Progress]) -> str:
    """Why an MPI run failed: each device that said so (in its error file,
    `said`, or on stderr), in its own line; else how mpiexec saw its
    processes end (exit status or signal, which MPICH's launcher prints to
    standard output), each named by device through the process ids the
    devices reported; and the devices that ended without their outputs."""
    named = said or [line for line in stderr.splitlines() if line.startswith("tp_run (device ")]
    ended = [line.strip() for line in (stdout + stderr).splitlines()
             if "BAD TERMINATION" in line or "EXIT STATUS" in line or "signal" in line.lower()]
    by_pid = {p.pid: rank for rank, p in progress.items()}
    for pid in map(int, re.findall(r"PID (\d+)", stdout + stderr)):
        if pid in by_pid:
            ended.append(f"device {by_pid[pid]} (process {pid}) ended abnormally")
    lines = named or ended or [line for line in stderr.strip().splitlines() if line.strip()][-5:]
    if missing:
        unfinished = [rank for rank in missing if rank not in progress or progress[rank].what != "done"]
        lines.append(f"device{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}: no outputs "
                     "(the process ended before the run completed)")
        if unfinished and not named:
            lines.append(f"device{'s' if len(unfinished) > 1 else ''} {', '.join(map(str, unfinished))} never "
                         "reached the end of the run")
    how = f"exit {code}" if code >= 0 else f"signal {-code}"
    return f"the MPI run failed ({how}):\n" + "\n".join(lines) + where(progress)


def run_split_mpi(folder: Path, inputs: dict[str, np.ndarray], timeout: float = MPI_TIMEOUT,
                  micro_batches: int = 1) -> dict[str, np.ndarray]:
    """`forge-split run --mpi`: the outputs of the plan or split in
    `folder`, run with one MPI process per device it is for."""
    from forge_opt.plan.folder import read_split
    from forge_opt.split.runner import agreed

    plan = read_split(folder)[0]
    devices = plan.device_count
    if devices < 2:
        raise ForgeOptError(f"{folder}: a split for one device has nothing to run under MPI "
                            "(forge-split MODEL --devices P writes one for several)")
    # a split's outputs have no split axis: each process's must then be the same
    return agreed(plan, run_mpi(folder, inputs, devices, timeout, micro_batches), str(folder))
