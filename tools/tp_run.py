"""`mpiexec -n P python -m forge_opt.tools.tp_run FOLDER --inputs x.npz`:
run a tensor-parallel plan (written by `forge-opt -p 'onnx-to-forge{devices=P}'
-t forge-python -o FOLDER`) or a split for P devices (`forge-split MODEL
--devices P --convert`), this process being one device; the collectives
are MPI's (mpi4py). Rank 0 prints the outputs' shapes; `--output` saves
each device's outputs (`{rank}` in the name is the device): its blocks of
a plan's split outputs, a split's outputs whole."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from forge_opt.diagnostics import ForgeOptError
from forge_opt.files import load_arrays, save_arrays, write_text


class _OsExit(SystemExit):
    """os._exit called during the run."""


def _exit_said(code: int) -> None:
    raise _OsExit(code)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tp_run", description=(__doc__ or "").splitlines()[0])
    p.add_argument("folder", help="the plan's folder (graph_infos.json with a grid)")
    p.add_argument("--inputs", required=True, help=".npz file with one array per model input")
    p.add_argument("--output", metavar="FILE", help="save this device's outputs ({rank} is the device)")
    p.add_argument("--error", metavar="FILE",
                   help="where a device that fails writes why ({rank} is the device): mpiexec may end the job "
                        "before a failing device's last words on stderr are passed on")
    p.add_argument("--progress", metavar="FILE",
                   help="where each device says which collective it has reached ({rank} is the device), for a "
                        "launcher to name a device the others wait for")
    p.add_argument("--micro-batches", type=int, default=1, metavar="M",
                   help="the inputs are M times the split's batch: run them in M parts along axis 0, one after "
                        "another (a pipeline's stages overlap)")
    args = p.parse_args(argv)
    from forge_opt.interpreters.shard import MpiMember
    from forge_opt.plan.folder import read_split
    from forge_opt.split.runner import run_parallel, run_split

    member = MpiMember(progress=args.progress)
    if args.output and member.size > 1 and "{rank}" not in args.output:
        if member.rank == 0:
            print(f"tp_run: error: --output {args.output}: name each device's file with {{rank}} "
                  "(every device would write the same file)", file=sys.stderr, flush=True)
        return 2
    real_exit = os._exit
    os._exit = _exit_said  # a module's os._exit ends the job with a word, not silently with its status
    try:
        inputs = load_arrays(args.inputs)
        folder = Path(args.folder)
        plan = read_split(folder)[0]
        if plan.is_parallel and args.micro_batches == 1:  # (run_split refuses micro-batches of a plan)
            outputs = run_parallel(folder, inputs, member)[0]
        else:
            outputs = run_split(folder, inputs, member=member, micro_batches=args.micro_batches)
        if args.output:
            save_arrays(args.output.replace("{rank}", str(member.rank)), outputs)
        # every device completed: one that ended early without a word (os._exit, a signal) fails the job here
        # instead of leaving it to exit 0
        member.reached("done")
        member.comm.Barrier()
    except BaseException as e:
        # Any way one device ends early (an error, a module calling sys.exit, Ctrl-C) ends every
        # device: the others would wait in their next collective forever. MPI_Abort ends the job, as
        # `python -m mpi4py` does for an uncaught exception.
        if isinstance(e, _OsExit):
            what = f"the run called os._exit({e.code!r}) before it completed"
        elif isinstance(e, SystemExit):
            what = f"the run called sys.exit({e.code!r}) before it completed"
        elif isinstance(e, ForgeOptError | OSError):
            what = str(e)
        else:
            what = f"{type(e).__name__}: {e}"
        said = f"tp_run (device {member.rank}): error: {what}"
        print(said, file=sys.stderr, flush=True)
        if args.error:
            write_text(args.error.replace("{rank}", str(member.rank)), said + "\n")
        member.comm.Abort(2)
        return 2
    finally:
        os._exit = real_exit
    if member.rank == 0:
        split = {name: t for name, t in plan.tensors.items() if t.split_axis is not None}
        for name, value in outputs.items():
            whose = "" if name not in split else "  (device 0's row's block)" if split[name].split_blocks else \
                "  (device 0's block)"
            print(f"{name}: {value.dtype} {list(value.shape)}{whose}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
