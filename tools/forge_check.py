"""`forge-check MODEL [--inputs x.npz]`: does the emitted Forge module compute
what onnxruntime computes? Exit 0 match, 1 mismatch, 2 did not compile, 3 ill-conditioned
(the outputs that differ differ as much in onnxruntime's own runs under rounding-level changes)."""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import numpy as np

from forge_opt.check.compare import ATOL, MIN_PCC, REDUCED_PCC, RTOL
from forge_opt.data_formats import FORMATS, PROGRAM_FORMATS
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.mpi import MPI_TIMEOUT
from forge_opt.transforms.compile_options import CompileOptions


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    from forge_opt.check.report import NOT_COMPILED

    try:
        with np.errstate(all="ignore"):  # a model's own inf and NaN, as onnxruntime computes them: silently
            report = _check(args)
    except ForgeOptError as e:
        print(f"forge-check: error: {e}", file=sys.stderr)
        sys.exit(NOT_COMPILED)
    except Exception as e:
        if args.debug:
            traceback.print_exc()
        print(f"forge-check: error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(NOT_COMPILED)
    if args.emit and report.emitted is not None:
        from forge_opt.files import write_text
        from forge_opt.targets.forge_python import save_constants

        try:  # the module and, beside it, the constants it loads
            save_constants(report.emitted, Path(args.emit).parent)
            write_text(args.emit, report.emitted.source)
        except OSError as e:
            print(f"forge-check: error: --emit {args.emit}: {e.strerror}", file=sys.stderr)
            sys.exit(NOT_COMPILED)
    if report.status == NOT_COMPILED:
        print(f"forge-check: error: {report.error}", file=sys.stderr)
    else:
        said = "\n".join(filter(None, [report.summary, report.error]))
        if said:
            print(f"forge-check: {said}" if "\n" not in said else said, file=sys.stderr)
        print(report.format())
    sys.exit(report.status)


def _check(args: argparse.Namespace):
    """The options the flags give, the strategy they ask for, the check's report."""
    from forge_opt.check.options import CheckOptions
    from forge_opt.check.run import run_check
    from forge_opt.check.strategies import strategy_for
    from forge_opt.frontends.onnx.weights import overwritten_input

    if args.emit:
        _check_emit_path(args.emit, args.model)  # before the run: its verdict is not lost to a bad path
    if args.annotate and (read := overwritten_input(args.annotate, args.model)) is not None:
        raise ForgeOptError(f"--annotate {args.annotate}: is {read}, which the check reads; name another file")
    options = CheckOptions.from_args(args)
    return run_check(args.model, options, strategy_for(options))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forge-check", description=(__doc__ or "").splitlines()[0],
        epilog="exit status: 0 match, 1 mismatch, 2 did not compile, 3 ill-conditioned (every output that differs "
               "differs as much in onnxruntime's own runs with its graph optimizations on or on inputs moved by a "
               "few units in the last place: ties a rounding bit decides; no verdict on those outputs)")
    parser.add_argument("model", help="an .onnx or .onnxtxt model")
    parser.add_argument("--inputs", help=".npz file with one array per graph input, by input name")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument(
        "--dim", metavar="SYMBOL=N", action="append", default=[],
        help="size of every input dimension named SYMBOL, e.g. --dim batch=1 (repeatable)",
    )
    parser.add_argument(
        "--shape", metavar="NAME=D0,D1,...", action="append", default=[],
        help="the whole shape of input NAME (repeatable); --inputs fixes shapes by itself",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks")
    _judging(parser.add_argument_group("how outputs are judged"))
    _compiling(parser.add_argument_group("what is compiled"))
    _devices(parser.add_argument_group("several devices"))
    _decoding(parser.add_argument_group("decoding"))
    _executing(parser.add_argument_group("what runs the program"))
    return parser


def _judging(group) -> None:
    group.add_argument(
        "--rtol", type=float, default=RTOL,
        help=f"tolerance relative to each output's scale, its largest magnitude (default {RTOL})",
    )
    group.add_argument("--atol", type=float, default=ATOL, help=f"absolute floor of the tolerance (default {ATOL})")
    group.add_argument(
        "--pcc", type=float,
        help=f"minimum PCC of outputs of more than one element whose spread exceeds the tolerance (default {MIN_PCC}; "
        f"{REDUCED_PCC}, Forge's own, with a reduced --data-format or --weight-format)",
    )
    group.add_argument(
        "--bisect",
        action="store_true",
        help="on a mismatch, name the first ONNX node whose output diverges from onnxruntime (for a reduced "
             "format, the first whose PCC is below --pcc)",
    )
    group.add_argument(
        "--layers",
        action="store_true",
        help="print every ONNX node output's PCC, relative L2 error and max abs error against onnxruntime's, "
             "in order: where a reduced format loses accuracy",
    )


def _compiling(group) -> None:
    group.add_argument(
        "--data-format", choices=[str(f) for f in PROGRAM_FORMATS], default="float32",
        help="compile the program's values in this format (bfloat16: Forge's Float16_b, inputs cast to it); "
        "judged by PCC against float32 onnxruntime, with the relative L2 error and largest difference",
    )
    group.add_argument(
        "--weight-format", choices=[str(f) for f in FORMATS],
        help="store the matmul weights in this format: the data format's (the default) or a block float "
        "(bfp8_b, bfp4_b: tt-mlir's experimental-weight-dtype), emulated bit for bit",
    )
    group.add_argument(
        "--freeze",
        metavar="NAME",
        action="append",
        default=[],
        help="compile this graph input as a constant with its value from --inputs (repeatable)",
    )
    group.add_argument("--emit", metavar="FILE", help="also write the emitted Forge Python here")


def _devices(group) -> None:
    group.add_argument(
        "--fallback",
        action="store_true",
        help="check through the split path: device sub-models where Forge can, CPU ones elsewhere (forge-split)",
    )
    group.add_argument(
        "--stages", type=int, metavar="S",
        help="check the model as a pipeline of S stages, one device each, contiguous layers balanced by stored "
             "weights; its outputs must equal the one-stage program's bit for bit, and the report prints the "
             "stages and their schedule",
    )
    group.add_argument(
        "--devices", type=int, metavar="P",
        help="check the tensor-parallel program for P devices (simulated in this process unless --mpi)",
    )
    group.add_argument(
        "--mesh", metavar="RxC",
        help="check the tensor-parallel program for an R×C mesh of devices (Galaxy 8x4, T3K 2x4, n300 1x2): "
             "device r·C+c in row r, column c; each collective runs over one mesh axis at a time, and the report "
             "prints a table per axis beside the line of R·C devices",
    )
    group.add_argument("--mpi", action="store_true",
                       help="with --devices or --mesh: run one MPI process per device (mpiexec)")
    group.add_argument("--timeout", type=float, default=MPI_TIMEOUT, metavar="S",
                       help="with --mpi: end the run when a device has not reached, S seconds after the first "
                       "device entered it, a collective the others wait in, naming it (default %(default)g)")
    group.add_argument("--plan", metavar="FILE", default="", help="with --devices: a JSON file pinning layers' cases")
    group.add_argument("--annotate", metavar="OUT.onnx",
                       help="with --devices or --stages: write the model with the plan chosen as ONNX sharding "
                       "annotations (IR 11), one configuration named after the system (n300, t3k, galaxy, pN; a "
                       "pipeline's n300-s2, each node its pipeline_stage); an OUT of the same graph keeps its other "
                       "configurations")
    group.add_argument("--plan-from-onnx", action="store_true",
                       help="with --devices or --stages: compile with the plan (or the pipeline's cuts) the model's "
                       "own sharding annotations carry")
    group.add_argument("--configuration", metavar="NAME",
                       help="with --plan-from-onnx: the configuration to read (needed where the model has several)")
    group.add_argument("--device-memory", metavar="BYTES",
                       help="choose --devices: the smallest count whose per-device parameters and KV cache fit in "
                       "BYTES (e.g. 512MiB, 24GB), with the table of each count tried")
    group.add_argument("--max-devices", type=int, metavar="N",
                       help="with --device-memory: the most devices to consider (default "
                       f"{CompileOptions.max_devices})")
    group.add_argument("--min-size", type=int, default=0, metavar="N",
                       help="with --devices: layers of fewer weight elements stay replicated (default 0)")
    group.add_argument("--require-sharded", action="store_true",
                       help="with --devices: a layer of at least --min-size weight elements left replicated is an "
                       "error, not a warning")


def _decoding(group) -> None:
    group.add_argument(
        "--decode", type=int, metavar="N",
        help="run N greedy decode steps of a decoder with its KV cache (token after token, the cache fed back) "
        "and the same loop on onnxruntime; a match when every token and the logits agree",
    )
    group.add_argument(
        "--max-length", type=int, metavar="L",
        help="with --decode: the positions of the static KV cache the programs keep (default: the prompt, its past "
        "and the steps); every step then runs one of 2 programs, a prefill and a decode step",
    )
    group.add_argument("--growing-cache", action="store_true",
                       help="with --decode: the cache as exported, one program per input shape")


def _executing(group) -> None:
    group.add_argument("--executor", default="standin", metavar="NAME",
                       help="what runs the program: standin (the emitted Forge Python on the Forge stand-in, the "
                       "default) or xla (its StableHLO form on XLA CPU, the `xla` extra)")
    group.add_argument("--tt-mlir", action="store_true",
                       help="also compile the program's StableHLO form with tt-mlir (jax-tt-plugin, the "
                       "`tenstorrent` extra) for a mock Blackhole p150 and report whether it lowers to TTNN; its "
                       "TTIR/TTNN dumps are kept beside --emit (FILE's name + _tt_mlir)")


def _check_emit_path(path: str, model: str) -> None:
    """`--emit FILE` names a file that can be written: in a folder that
    exists and takes files, not a folder itself, nor the model's files."""
    import os

    from forge_opt.frontends.onnx.weights import overwritten_input

    read = overwritten_input(path, model)
    if read:
        raise ForgeOptError(f"--emit {path}: is {read}, which the check reads; name another file")
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ForgeOptError(f"--emit {path}: is a folder; name the module's file")
    if not os.path.isdir(folder):
        raise ForgeOptError(f"--emit {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ForgeOptError(f"--emit {path}: the folder {folder} cannot be written")


if __name__ == "__main__":
    main()
