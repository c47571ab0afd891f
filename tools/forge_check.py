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
from forge_opt.check.options import CheckOptions
from forge_opt.diagnostics import ForgeOptError
from forge_opt.flags import COMPILING, DEVICES, JUDGING, add_flags
from forge_opt.transforms.compile_options import CompileOptions


def main(argv: list[str] | None = None) -> None:
    args = argument_parser().parse_args(argv)
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
    from forge_opt.check.run import run_check
    from forge_opt.check.strategies import strategy_for
    from forge_opt.frontends.onnx.weights import overwritten_input

    if args.emit:
        _check_emit_path(args.emit, args.model)  # before the run: its verdict is not lost to a bad path
    if args.annotate and (read := overwritten_input(args.annotate, args.model)) is not None:
        raise ForgeOptError(f"--annotate {args.annotate}: is {read}, which the check reads; name another file")
    options = CheckOptions.from_args(args)
    return run_check(args.model, options, strategy_for(options))


def argument_parser() -> argparse.ArgumentParser:
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
    groups = {title: parser.add_argument_group(title) for title in (JUDGING, COMPILING)}
    _judging(groups[JUDGING])
    groups[COMPILING].add_argument("--emit", metavar="FILE", help="also write the emitted Forge Python here")
    add_flags(parser, groups, CheckOptions, CompileOptions)
    groups[DEVICES].add_argument("--plan-from-onnx", action="store_true",
                                 help="with --devices or --stages: compile with the plan (or the pipeline's cuts) "
                                 "the model's own sharding annotations carry")
    groups[DEVICES].add_argument("--configuration", metavar="NAME",
                                 help="with --plan-from-onnx: the configuration to read (needed where the model has "
                                 "several)")
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
