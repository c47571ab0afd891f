"""`forge-check MODEL [--inputs x.npz]`: does the emitted Forge module compute
what onnxruntime computes? Exit 0 match, 1 mismatch, 2 did not compile, 3 ill-conditioned
(the outputs that differ differ as much in onnxruntime's own runs under rounding-level changes)."""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

import numpy as np

from forge_opt.check.compare import ATOL, MIN_PCC, REDUCED_PCC, RTOL, check_tolerances
from forge_opt.data_formats import FORMATS, PROGRAM_FORMATS
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.mpi import MPI_TIMEOUT


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="forge-check", description=(__doc__ or "").splitlines()[0],
        epilog="exit status: 0 match, 1 mismatch, 2 did not compile, 3 ill-conditioned (every output that differs "
               "differs as much in onnxruntime's own runs with its graph optimizations on or on inputs moved by a "
               "few units in the last place: ties a rounding bit decides; no verdict on those outputs)")
    parser.add_argument("model", help="an .onnx or .onnxtxt model")
    parser.add_argument("--inputs", help=".npz file with one array per graph input, by input name")
    parser.add_argument(
        "--rtol", type=float, default=RTOL,
        help=f"tolerance relative to each output's scale, its largest magnitude (default {RTOL})",
    )
    parser.add_argument("--atol", type=float, default=ATOL, help=f"absolute floor of the tolerance (default {ATOL})")
    parser.add_argument(
        "--pcc", type=float,
        help=f"minimum PCC of outputs of more than one element whose spread exceeds the tolerance (default {MIN_PCC}; "
        f"{REDUCED_PCC}, Forge's own, with a reduced --data-format or --weight-format)",
    )
    parser.add_argument(
        "--data-format", choices=[str(f) for f in PROGRAM_FORMATS], default="float32",
        help="compile the program's values in this format (bfloat16: Forge's Float16_b, inputs cast to it); "
        "judged by PCC against float32 onnxruntime, with the relative L2 error and largest difference",
    )
    parser.add_argument(
        "--weight-format", choices=[str(f) for f in FORMATS],
        help="store the matmul weights in this format: the data format's (the default) or a block float "
        "(bfp8_b, bfp4_b: tt-mlir's experimental-weight-dtype), emulated bit for bit",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    parser.add_argument(
        "--freeze",
        metavar="NAME",
        action="append",
        default=[],
        help="compile this graph input as a constant with its value from --inputs (repeatable)",
    )
    parser.add_argument(
        "--bisect",
        action="store_true",
        help="on a mismatch, name the first ONNX node whose output diverges from onnxruntime (for a reduced "
             "format, the first whose PCC is below --pcc)",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="print every ONNX node output's PCC, relative L2 error and max abs error against onnxruntime's, "
             "in order: where a reduced format loses accuracy",
    )
    parser.add_argument(
        "--fallback",
        action="store_true",
        help="check through the split path: device sub-models where Forge can, CPU ones elsewhere (forge-split)",
    )
    parser.add_argument(
        "--devices", type=int, metavar="P",
        help="check the tensor-parallel program for P devices (simulated in this process unless --mpi)",
    )
    parser.add_argument("--mpi", action="store_true", help="with --devices: run one MPI process per device (mpiexec)")
    parser.add_argument("--timeout", type=float, default=MPI_TIMEOUT, metavar="S",
                        help="with --mpi: end the run when a device has not reached, S seconds after the first "
                        "device entered it, a collective the others wait in, naming it (default %(default)g)")
    parser.add_argument("--plan", metavar="FILE", default="", help="with --devices: a JSON file pinning layers' cases")
    parser.add_argument("--device-memory", metavar="BYTES",
                        help="choose --devices: the smallest count whose per-device parameters and KV cache fit in "
                        "BYTES (e.g. 512MiB, 24GB), with the table of each count tried")
    parser.add_argument("--max-devices", type=int, metavar="N",
                        help="with --device-memory: the most devices to consider (default 8)")
    parser.add_argument("--min-size", type=int, default=0, metavar="N",
                        help="with --devices: layers of fewer weight elements stay replicated (default 0)")
    parser.add_argument("--require-sharded", action="store_true",
                        help="with --devices: a layer of at least --min-size weight elements left replicated is an "
                        "error, not a warning")
    parser.add_argument(
        "--dim", metavar="SYMBOL=N", action="append", default=[],
        help="size of every input dimension named SYMBOL, e.g. --dim batch=1 (repeatable)",
    )
    parser.add_argument(
        "--shape", metavar="NAME=D0,D1,...", action="append", default=[],
        help="the whole shape of input NAME (repeatable); --inputs fixes shapes by itself",
    )
    parser.add_argument(
        "--decode", type=int, metavar="N",
        help="run N greedy decode steps of a decoder with its KV cache (token after token, the cache fed back) "
        "and the same loop on onnxruntime; a match when every token and the logits agree",
    )
    parser.add_argument(
        "--max-length", type=int, metavar="L",
        help="with --decode: the positions of the static KV cache the programs keep (default: the prompt, its past "
        "and the steps); every step then runs one of 2 programs, a prefill and a decode step",
    )
    parser.add_argument("--growing-cache", action="store_true",
                        help="with --decode: the cache as exported, one program per input shape")
    parser.add_argument("--executor", default="standin", metavar="NAME",
                        help="what runs the program: standin (the emitted Forge Python on the Forge stand-in, the "
                        "default) or xla (its StableHLO form on XLA CPU, the `xla` extra)")
    parser.add_argument("--tt-mlir", action="store_true",
                        help="also compile the program's StableHLO form with tt-mlir (jax-tt-plugin, the "
                        "`tenstorrent` extra) for a mock Blackhole p150 and report whether it lowers to TTNN; its "
                        "TTIR/TTNN dumps are kept beside --emit (FILE's name + _tt_mlir)")
    parser.add_argument("--emit", metavar="FILE", help="also write the emitted Forge Python here")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks")
    args = parser.parse_args(argv)
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
    """The options the flags give, the strategy they choose, the check's report."""
    from forge_opt.check.options import CheckOptions, Tolerances, parse_executor
    from forge_opt.check.run import run_check
    from forge_opt.frontends.onnx.shapes import InputShapes

    check_tolerances(args.rtol, args.atol, MIN_PCC if args.pcc is None else args.pcc)
    if args.emit:
        _check_emit_path(args.emit, args.model)  # before the run: its verdict is not lost to a bad path
    inputs = None
    if args.inputs:
        from forge_opt.check.driver import read_inputs

        inputs = read_inputs(args.inputs)
    chosen = InputShapes.parse(args.shape, args.dim)
    devices = args.devices
    if args.device_memory is not None:
        devices = _sized(args, inputs, chosen)
        if devices == 1:  # --plan and --min-size chose the count; one device has no layers to pin
            args.plan, args.min_size = "", 0
    elif args.max_devices is not None:
        raise ForgeOptError("--max-devices goes with --device-memory")
    elif devices is not None and devices < 2:
        raise ForgeOptError(f"--devices {devices}: tensor parallelism needs 2 devices or more "
                            "(leave --devices out to check on one device)")
    options = CheckOptions(
        inputs, Tolerances(args.rtol, args.atol), args.seed, chosen.shapes, chosen.dims,
        freeze=tuple(args.freeze), bisect=args.bisect, layers=args.layers,
        stem=Path(args.emit).stem if args.emit else "",
        devices=devices or 1, mpi=args.mpi, plan=args.plan, min_size=args.min_size,
        require_sharded=args.require_sharded, steps=args.decode or 0, timeout=args.timeout,
        data_format=args.data_format, weight_format=args.weight_format or "", max_length=args.max_length or 0,
        growing_cache=args.growing_cache, executor=parse_executor(args.executor), tt_mlir=args.tt_mlir,
        tt_mlir_dumps=str(Path(args.emit).with_suffix("")) + "_tt_mlir" if args.emit and args.tt_mlir else "",
    ).with_pcc(args.pcc)
    return run_check(args.model, options, _strategy(args, options))


def _strategy(args: argparse.Namespace, options):
    """The mode the flags ask for: --decode, --fallback, --devices, or one device."""
    if args.decode is not None:
        from forge_opt.check.decode import Decode

        return Decode(options)
    if args.fallback:
        from forge_opt.check.split import Fallback

        return Fallback(options)
    if options.devices > 1:
        from forge_opt.check.split import Parallel

        return Parallel(options)
    from forge_opt.check.model import OneDevice

    return OneDevice(options)


def _sized(args: argparse.Namespace, inputs, chosen) -> int:
    """`--device-memory`: the device count chosen, its table printed."""
    most = 8 if args.max_devices is None else args.max_devices
    if most < 1:
        raise ForgeOptError(f"--max-devices {most}: give 1 or more")
    if args.devices is not None or args.fallback:
        raise ForgeOptError("--device-memory chooses the device count for a tensor-parallel check: leave out "
                            "--devices and --fallback")
    from forge_opt.check.split import size_devices
    from forge_opt.transforms.tp.sizing import parse_bytes

    sizing = size_devices(args.model, parse_bytes(args.device_memory), most, inputs,
                          min_size=args.min_size, plan=args.plan, shapes=chosen.shapes, dims=chosen.dims,
                          data_format=args.data_format, weight_format=args.weight_format or "",
                          steps=args.decode or 0, max_length=args.max_length or 0, growing_cache=args.growing_cache)
    print("\n".join([*sizing.table, f"devices: {sizing.devices}"]), file=sys.stderr)
    return sizing.devices


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
