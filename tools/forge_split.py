"""`forge-split`: AutoSplit for Forge. Divide a model into device and CPU
sub-models (`forge-split MODEL -o DIR`), compile the device ones
(`forge-split convert DIR`), run them in order (`forge-split run DIR`).

    forge-split MODEL -o DIR [--convert] [--cpu-ops OP ...] [--cpu-nodes NODE ...]
                [--min-device-ops N] [--layout NCHW|NHWC] [--force] [--dot FILE] [--why] [--devices P] [--mesh RxC]
                [--mesh-layout line|galaxy] [--stages S]
    forge-split convert DIR
    forge-split run DIR [--inputs x.npz] [--mode device|cpu] [--recompile] [--mpi] [--check [--model MODEL]]
                [--loop-seconds S]

`run --check` compares the outputs with onnxruntime (exit 0 match, 1
mismatch, 2 did not compile, as forge-check): with the whole model given by
`--model`, else with the split's sub-models all run on onnxruntime (which
sees a lowering's error, not the split's own).
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from pathlib import Path

import numpy as np

from forge_opt.check.compare import ATOL, MIN_PCC, RTOL, check_tolerances
from forge_opt.diagnostics import ForgeOptError
from forge_opt.plan.graph_infos import LINE_LAYOUT, MESH_LAYOUTS
from forge_opt.split.mpi import MPI_TIMEOUT

MATCH, MISMATCH, NOT_COMPILED = 0, 1, 2


def _split_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="forge-split", description=(__doc__ or "").splitlines()[0])
    p.add_argument("model", help="an .onnx or .onnxtxt model")
    p.add_argument("-o", "--output", required=True, help="the folder to write the split into")
    p.add_argument("--convert", action="store_true", help="also compile the device sub-models")
    p.add_argument("--cpu-ops", nargs="+", default=[], metavar="OP", help="op types to keep on the CPU")
    p.add_argument("--cpu-nodes", nargs="+", default=[], metavar="NODE", help="node names to keep on the CPU")
    p.add_argument("--min-device-ops", type=int, default=1, metavar="N",
                   help="a device sub-model of fewer ops goes to the CPU (default 1)")
    p.add_argument("--layout", choices=["NCHW", "NHWC"], default="NCHW", help="recorded in graph_infos.json")
    p.add_argument("--force", action="store_true", help="replace the split in a folder that is not empty")
    p.add_argument("--dot", metavar="FILE", help="also draw the split as Graphviz, sub-models coloured by device")
    p.add_argument("--why", action="store_true",
                   help="also say why each node of a CPU sub-model is on the CPU (graph_infos.json's 'why')")
    p.add_argument("--dim", metavar="SYMBOL=N", action="append", default=[],
                   help="size of every input dimension named SYMBOL, e.g. --dim batch=1 (repeatable)")
    p.add_argument("--shape", metavar="NAME=D0,D1,...", action="append", default=[],
                   help="the whole shape of input NAME (repeatable)")
    p.add_argument("--devices", type=int, default=1, metavar="P",
                   help="convert each device sub-model tensor-parallel for P devices (graph_infos.json's 'parallel')")
    p.add_argument("--mesh", metavar="RxC", default="",
                   help="convert each device sub-model tensor-parallel for an R×C mesh of devices, each collective "
                        "over one mesh axis at a time (graph_infos.json's 'parallel' and 'mesh')")
    p.add_argument("--mesh-layout", choices=MESH_LAYOUTS, default=LINE_LAYOUT,
                   help="with --mesh: each weight split over all R·C devices as on a line (line, the default), or "
                        "Galaxy's blocks over both axes with the residual stream split over the columns (galaxy)")
    p.add_argument("--stages", type=int, default=1, metavar="S",
                   help="a pipeline: S device sub-models of contiguous layers balanced by stored weights, one device "
                        "(or P with --devices) each, exchanging only activations (graph_infos.json's 'stage')")
    return p


def _report(partition, plan, folder: Path) -> str:
    """Per sub-model: device, op count, inputs, outputs, and the bytes it
    takes from or gives to the other kind of device per run."""
    maker = {x: g.device for g in plan.graphs for x in g.outputs}

    def size(name: str) -> float:
        t = plan.tensors[name]
        if any(d < 0 for d in t.shape):
            return math.nan
        return math.prod(t.shape) * np.dtype(t.dtype).itemsize

    lines = [f"{'graph':<8} {'device':<7} {'ops':>5} {'inputs':>7} {'outputs':>8} {'bytes across':>13}"]
    total = 0.0
    for n, (sub, entry) in enumerate(zip(partition.graphs, plan.graphs)):
        device = entry.device
        crossing = [x for x in entry.inputs if maker.get(x, "cpu") != device]
        moved = sum(size(x) for x in crossing)
        total += moved
        shown = "?" if math.isnan(moved) else f"{int(moved):,}"
        lines.append(f"graph_{n:<2} {device:<7} {len(sub.nodes):>5} {len(entry.inputs):>7} "
                     f"{len(entry.outputs):>8} {shown:>13}")
        for which, branch in _branches_of(entry, folder):
            lines.append(f"  {which}: {branch}")
    across = "?" if math.isnan(total) else f"{int(total):,}"
    lines.append(f"{len(plan.graphs)} sub-models; {across} bytes cross between CPU and device per run")
    if plan.parallel > 1:
        on = f" on a {plan.mesh[0]}x{plan.mesh[1]} mesh" if plan.mesh else ""
        on += " in Galaxy's layout" if plan.mesh and plan.mesh_layout != LINE_LAYOUT else ""
        lines.append(f"each device sub-model is converted tensor-parallel for {plan.parallel} devices{on}")
    return "\n".join(lines)


def _why(plan, folder: Path, where: str = "") -> str:
    """Per CPU sub-model, each node and why it is on the CPU; inside a
    run-time If's branches and a Loop's body too, named by their folder."""
    from forge_opt.plan.folder import read_split

    lines = []
    for n, entry in enumerate(plan.graphs):
        for node, reason in entry.why.items():
            lines.append(f"{where}graph_{n} (cpu): node '{node}': {reason}")
        for sub in entry.sub_folders().values():
            inner = _why(read_split(folder / sub)[0], folder / sub, f"{where}{sub}/")
            if inner != "every node runs on the device":
                lines.append(inner)
    return "\n".join(lines) or "every node runs on the device"


def _branches_of(entry, folder: Path) -> list[tuple[str, str]]:
    """A run-time If's branches, or a Loop's body: each one's folder and its sub-models' devices."""
    from forge_opt.plan.folder import read_split

    if entry.branches is not None:
        info = entry.branches
        kinds = {w: (info.of(w).folder, f"when '{info.condition}' is {'true' if w == 'then' else 'false'}")
                 for w in ("then", "else")}
    elif entry.loop is not None:
        loop = entry.loop
        count = f"{loop.trip_count!r} times" if loop.trip_count else "while its condition holds"
        kinds = {"body": (loop.body.folder, f"run {count}")}
    else:
        return []
    out = []
    for which, (sub, when) in kinds.items():
        devices = [g.device for g in read_split(folder / sub)[0].graphs]
        count = f"{len(devices)} sub-model{'' if len(devices) == 1 else 's'}"
        out.append((which, f"{sub}/ ({count}: {', '.join(devices)}), {when}"))
    return out


def _split(argv: list[str]) -> int:
    args = _split_parser().parse_args(argv)
    from forge_opt.frontends.onnx.shapes import InputShapes
    from forge_opt.split.api import convert, split_model

    chosen = InputShapes.parse(args.shape, args.dim)
    partition, plan = split_model(
        args.model, args.output, cpu_ops=tuple(args.cpu_ops), cpu_nodes=tuple(args.cpu_nodes),
        min_device_ops=args.min_device_ops, layout=args.layout, force=args.force,
        shapes=chosen.shapes, dims=chosen.dims, devices=args.devices, stages=args.stages, mesh=args.mesh,
        mesh_layout=args.mesh_layout,
    )
    print(_report(partition, plan, Path(args.output)))
    if partition.cut is not None:
        from forge_opt.split.stages import schedule_report

        print(schedule_report(partition.cut))
    if args.why:
        print(_why(plan, Path(args.output)))
    if args.dot:
        from forge_opt.files import write_text
        from forge_opt.split.dot import split_dot

        write_text(args.dot, split_dot(partition))
    if args.convert:
        for path in convert(args.output):
            print(f"wrote {path}")
    return 0


def _convert(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="forge-split convert", description="compile a split's device sub-models")
    p.add_argument("folder")
    args = p.parse_args(argv)
    from forge_opt.split.api import convert

    for path in convert(args.folder):
        print(f"wrote {path}")
    return 0


def _add_model_inputs(inputs: dict[str, np.ndarray], model_path: str) -> None:
    """Random values for the model's inputs the split does not read (one
    whose only use folded away), so the whole model can run beside it."""
    import onnx

    from forge_opt.execution.engine import random_array
    from forge_opt.execution.oracle import graph_inputs
    from forge_opt.frontends.onnx import load_model
    from forge_opt.frontends.onnx.shapes import is_known

    rng = np.random.default_rng(1)
    for info in graph_inputs(load_model(model_path)[0]):
        if info.name in inputs:
            continue
        dims = info.type.tensor_type.shape.dim
        if not all(is_known(d) for d in dims):
            raise ForgeOptError(f"the model's input '{info.name}' is not read by the split and has unknown sizes: "
                                "pass --inputs")
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type))
        inputs[info.name] = random_array([d.dim_value for d in dims], dtype, rng)


def _load_inputs(path: str | None, folder: Path, micro_batches: int = 1) -> dict[str, np.ndarray]:
    import onnx

    from forge_opt.execution.engine import index_bounds, random_array
    from forge_opt.plan.folder import read_split

    plan, graphs = read_split(folder)
    if path:
        from forge_opt.check.options import read_inputs

        return read_inputs(path)
    rng = np.random.default_rng(0)
    bounds: dict[str, int] = {}
    for g in graphs:  # an index into a table stays inside it, whichever sub-model holds the table
        for name, size in index_bounds(onnx.load(g.on(0).model_path, load_external_data=False)).items():
            bounds[name] = min(size, bounds.get(name, size))
    inputs = {}
    for name in plan.inputs():
        shape = plan.whole_shape(name)  # a KV cache's past: the plan lists one device's block
        if micro_batches > 1 and shape:
            shape[0] *= micro_batches
        if any(d < 0 for d in shape):
            raise ForgeOptError(f"input '{name}' has no static shape; pass --inputs")
        inputs[name] = random_array(shape, np.dtype(plan.tensors[name].dtype), rng, bounds.get(name))
    return inputs


def _run(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="forge-split run", description="run a split's sub-models in order")
    p.add_argument("folder")
    p.add_argument("--inputs", help=".npz file with one array per model input, by name (default: seeded random)")
    p.add_argument("--mode", choices=["device", "cpu"], default="device",
                   help="cpu runs the device sub-models on onnxruntime too (tells a split bug from a lowering bug)")
    p.add_argument("--check", action="store_true", help="compare with onnxruntime; exit 0 match, 1 mismatch")
    p.add_argument("--model", help="with --check: the whole model to compare with")
    p.add_argument("--recompile", action="store_true",
                   help="compile each device sub-model from its ONNX instead of running its converted module "
                        "(debugging the compiler; a check of what ships runs the converted modules)")
    p.add_argument("--mpi", action="store_true",
                   help="a plan or a split for several devices: run one MPI process per device (mpiexec)")
    p.add_argument("--timeout", type=float, default=MPI_TIMEOUT, metavar="S",
                   help="with --mpi: end the run when a device has kept another waiting S seconds, in a collective "
                   "of theirs or for a message it sends, naming it (default %(default)g)")
    p.add_argument("--rtol", type=float, default=RTOL,
                   help=f"tolerance relative to each output's scale (default {RTOL})")
    p.add_argument("--atol", type=float, default=ATOL, help=f"absolute floor of the tolerance (default {ATOL})")
    p.add_argument("--pcc", type=float, default=MIN_PCC, help=f"minimum PCC (default {MIN_PCC})")
    p.add_argument("--micro-batches", type=int, default=1, metavar="M",
                   help="the inputs are M times the split's batch (axis 0): run them in M parts, one after another, "
                        "and join the outputs; under --mpi a pipeline's stages work on different parts at once")
    p.add_argument("--loop-seconds", type=float, default=60.0, metavar="S",
                   help="how long a run-time Loop may run before the run stops it (default 60)")
    args = p.parse_args(argv)
    check_tolerances(args.rtol, args.atol, args.pcc)
    if not args.loop_seconds > 0:
        raise ForgeOptError(f"--loop-seconds {args.loop_seconds}: give a positive number of seconds")
    from forge_opt.execution.oracle import expected_outputs
    from forge_opt.frontends.onnx import load_model
    from forge_opt.split.api import run_split

    if args.micro_batches < 1:
        raise ForgeOptError(f"--micro-batches {args.micro_batches}: give 1 or more")
    folder = Path(args.folder)
    inputs = _load_inputs(args.inputs, folder, args.micro_batches)
    if args.check and args.model and not args.inputs:
        _add_model_inputs(inputs, args.model)
    from forge_opt.plan.folder import read_split

    plan = read_split(folder)[0].is_parallel
    if plan and args.recompile:
        raise ForgeOptError(f"{folder}: a tensor-parallel plan has no ONNX sub-models to recompile (compile the model "
                            "again with forge-opt)")
    if plan and args.check and not args.model and args.mode == "device":
        raise ForgeOptError(f"{folder}: a tensor-parallel plan has no CPU mode to compare with: give --model MODEL "
                            "(the whole model, run on onnxruntime)")
    if args.timeout != MPI_TIMEOUT and not args.mpi:
        raise ForgeOptError("--timeout bounds how long MPI processes wait for each other: it goes with --mpi")
    if args.mpi:
        if args.mode == "cpu" or args.recompile:
            raise ForgeOptError("--mpi runs the converted modules on the devices: leave out --mode cpu and --recompile")
        from forge_opt.split.mpi import run_split_mpi

        outputs = run_split_mpi(folder, inputs, args.timeout, args.micro_batches)
    else:
        outputs = run_split(folder, inputs, mode=args.mode, recompile=args.recompile, loop_seconds=args.loop_seconds,
                            micro_batches=args.micro_batches)
    if not args.check:
        for name, value in outputs.items():
            print(f"{name}: shape {list(value.shape)} dtype {value.dtype}")
        return MATCH
    if args.model:
        model, base = load_model(args.model)
        names = [o.name for o in model.graph.output]
        graph_inputs = {i.name for i in model.graph.input} - {t.name for t in model.graph.initializer}
        reference = expected_outputs(model, base, {k: inputs[k] for k in graph_inputs})
        if reference.oracle != "onnxruntime":
            print(f"oracle: {reference.oracle} ({reference.why})")
        want = dict(zip(names, reference.outputs))
    else:
        # the same split with its device sub-models on onnxruntime: tells a lowering bug, not a split's
        print("reference: this split on the CPU (give --model to compare with the whole model: only that "
              "sees an error of the split itself)")
        want = run_split(folder, inputs, mode="cpu", loop_seconds=args.loop_seconds, micro_batches=args.micro_batches)
    return _compared(want, outputs, args)


def _compared(want: dict, outputs: dict, args: argparse.Namespace) -> int:
    """`run --check`: the split's outputs against `want`, the table and the verdict printed; its status."""
    from forge_opt.check.compare import compare_output
    from forge_opt.check.report import format_results, verdict

    missing = [name for name in want if name not in outputs]
    if missing:
        raise ForgeOptError(f"the split returns no output '{missing[0]}' of the model; nothing to compare it with")
    results = [
        compare_output(name, value, outputs[name], rtol=args.rtol, atol=args.atol, min_pcc=args.pcc, formats=False)
        for name, value in want.items()
    ]
    print("\n".join(format_results(results)))
    status, why = verdict(results, len(want))
    if why:
        print(f"forge-split: {why}", file=sys.stderr)
    print("match" if status == MATCH else "mismatch")
    return status


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    command = {"convert": _convert, "run": _run}.get(argv[0] if argv else "", _split)
    try:
        with np.errstate(all="ignore"):  # a model's own inf and NaN, as onnxruntime computes them: silently
            code = command(argv[1:] if command is not _split else argv)
    except ForgeOptError as e:
        print(f"forge-split: error: {e}", file=sys.stderr)
        code = NOT_COMPILED
    except OSError as e:  # a folder that cannot be written, a full disk: the user's to fix
        if debug:
            traceback.print_exc()
        print(f"forge-split: error: {e.filename or ''}{': ' if e.filename else ''}{e.strerror or e}", file=sys.stderr)
        code = NOT_COMPILED
    except Exception as e:  # a bug of ours: one line, the traceback with --debug
        if debug:
            traceback.print_exc()
        print(f"forge-split: error: {type(e).__name__}: {e}", file=sys.stderr)
        code = NOT_COMPILED
    sys.exit(code)


if __name__ == "__main__":
    main()
