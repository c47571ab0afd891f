"""What a check is asked to do, as one record that every strategy reads:
a flag a strategy does not take is an error naming the flag and the mode,
never a flag dropped in silence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np

from forge_opt.check.compare import (
    ATOL,
    MIN_PCC,
    REDUCED_PCC,
    RTOL,
    OutputResult,
    check_tolerances,
    compare_output,
    compare_reduced,
)
from forge_opt.diagnostics import ForgeOptError
from forge_opt.flags import COMPILING, DECODING, DEVICES, EXECUTING, JUDGING, flag_values, option
from forge_opt.split.mpi import MPI_TIMEOUT
from forge_opt.transforms.compile_options import CompileOptions, parse_bytes


@dataclass(frozen=True)
class Tolerances:
    rtol: float = RTOL
    atol: float = ATOL
    min_pcc: float = MIN_PCC


@dataclass(frozen=True)
class CheckOptions:
    inputs: dict[str, np.ndarray] | Sequence[np.ndarray] | None = None  # None: seeded random ones
    tolerances: Tolerances = Tolerances()
    seed: int = 0
    shapes: Mapping[str, Iterable[int]] | None = None  # whole input shapes (as import_onnx's)
    dims: Mapping[str, int] | None = None  # sizes of symbolic dims
    compile: CompileOptions = field(default_factory=CompileOptions)  # how the program is compiled
    freeze: tuple[str, ...] = option("--freeze", (), group=COMPILING, metavar="NAME",
                                     help="compile this graph input as a constant with its value from --inputs "
                                     "(repeatable)")
    bisect: bool = option("--bisect", False, group=JUDGING,
                          help="on a mismatch, name the first ONNX node whose output diverges from onnxruntime (for "
                          "a reduced format, the first whose PCC is below --pcc)")
    layers: bool = option("--layers", False, group=JUDGING,
                          help="print every ONNX node output's PCC, relative L2 error and max abs error against "
                          "onnxruntime's, in order: where a reduced format loses accuracy")
    stem: str = option("--emit", "")  # the emitted module's file name without .py (names its constants)
    mpi: bool = option("--mpi", False, group=DEVICES,
                       help="with --devices or --mesh: run one MPI process per device (mpiexec)")
    timeout: float = option(
        "--timeout", MPI_TIMEOUT, ("mpi", "--timeout bounds how long MPI processes wait for each other: it goes "
                                          "with --mpi"), group=DEVICES, metavar="S",
        help="with --mpi: end the run when a device has kept another waiting S seconds, in a collective of theirs or "
        f"for a message it sends, naming it (default {MPI_TIMEOUT:g})")
    min_device_ops: int = option("--min-device-ops", 1)  # a split's device sub-model of fewer ops goes to the CPU
    max_length: int = option(
        "--max-length", 0, ("steps", "--max-length sizes the KV cache of a decode: it goes with --decode N"),
        group=DECODING, metavar="L",
        help="with --decode: the positions of the static KV cache the programs keep (default: the prompt, its past "
        "and the steps); every step then runs one of 2 programs, a prefill and a decode step")
    growing_cache: bool = option("--growing-cache", False, group=DECODING,
                                 help="with --decode: the cache as exported, one program per input shape")
    steps: int = option(
        "--decode", 0, group=DECODING, metavar="N", least=(1, "decode at least one step"),
        help="run N greedy decode steps of a decoder with its KV cache (token after token, the cache fed back) and "
        "the same loop on onnxruntime; a match when every token and the logits agree")
    executor: str = option(
        "--executor", "standin", group=EXECUTING, metavar="NAME",
        help="what runs the program: standin (the emitted Forge Python on the Forge stand-in, the default) or xla "
        "(its StableHLO form on XLA CPU, the `xla` extra)")
    tt_mlir: bool = option(
        "--tt-mlir", False, group=EXECUTING,
        help="also compile the program's StableHLO form with tt-mlir (jax-tt-plugin, the `tenstorrent` extra) for a "
        "mock Blackhole p150 and report whether it lowers to TTNN; its TTIR/TTNN dumps are kept beside --emit "
        "(FILE's name + _tt_mlir)")
    tt_mlir_dumps: str = ""  # the folder tt-mlir's IR dumps are kept in ("": a temporary one)
    fallback: bool = option(
        "--fallback", False, group=DEVICES,
        help="check through the split path: device sub-models where Forge can, CPU ones elsewhere (forge-split)")
    stages: int = option(
        "--stages", 1, group=DEVICES, metavar="S",
        least=(2, "a pipeline has 2 stages or more (leave --stages out to check on one device)"),
        help="check the model as a pipeline of S stages, one device each, contiguous layers balanced by stored "
        "weights; its outputs must equal the one-stage program's bit for bit, and the report prints the stages "
        "and their schedule")
    micro_batches: int = option(
        "--micro-batches", 1, group=DEVICES, metavar="M", least=(1, "give 1 or more"),
        help="with --stages: compile the stages for 1/M of the batch (axis 0 of every input) and run the batch "
        "through them in M parts, the outputs joined; under --mpi the stages work on different parts at once")
    annotate: str = option(
        "--annotate", "", group=DEVICES, metavar="OUT.onnx",
        help="with --devices or --stages: write the model with the plan chosen as ONNX sharding annotations (IR 11), "
        "one configuration named after the system (n300, t3k, galaxy, pN; a pipeline's n300-s2, each node its "
        "pipeline_stage); an OUT of the same graph keeps its other configurations")

    @classmethod
    def from_args(cls, args) -> CheckOptions:
        """The options `forge-check`'s parsed flags give, each value checked
        (which flags go together is `refuse_beyond`'s, as the strategy
        chosen takes them)."""
        from forge_opt.frontends.onnx.shapes import InputShapes

        check_tolerances(args.rtol, args.atol, MIN_PCC if args.pcc is None else args.pcc)
        if args.device_memory is not None and parse_bytes(args.device_memory) < 1:
            raise ForgeOptError(f"--device-memory {args.device_memory}: give a size above 0")
        if args.configuration is not None and not args.plan_from_onnx:
            raise ForgeOptError("--configuration names the sharding configuration --plan-from-onnx reads")
        compiled = CompileOptions(**flag_values(args, CompileOptions))
        if args.plan_from_onnx:
            if compiled.device_count == 1 and not compiled.memory and args.stages is None:
                raise ForgeOptError("--plan-from-onnx compiles a tensor-parallel program or a pipeline: it goes "
                                    "with --devices P or --stages S")
            if compiled.plan:
                raise ForgeOptError("--plan-from-onnx takes the plan from the model's annotations: leave out --plan")
            compiled = replace(compiled, plan=f"{args.model}#{args.configuration or ''}")
        chosen, emit = InputShapes.parse(args.shape, args.dim), args.emit or ""
        given = flag_values(args, cls)
        parse_executor(given.get("executor", cls.executor))
        dumps = str(Path(emit).with_suffix("")) + "_tt_mlir" if emit and given.get("tt_mlir") else ""
        return cls(read_inputs(args.inputs) if args.inputs else None, Tolerances(args.rtol, args.atol), args.seed,
                   chosen.shapes, chosen.dims, compiled, stem=Path(emit).stem, tt_mlir_dumps=dumps,
                   **given).with_pcc(args.pcc)

    def with_pcc(self, min_pcc: float | None) -> CheckOptions:
        """These options with the PCC threshold given, or (None) the default
        for their formats: `MIN_PCC`, or Forge's `REDUCED_PCC`."""
        if min_pcc is None:
            min_pcc = REDUCED_PCC if self.compile.reduced else MIN_PCC
        return replace(self, tolerances=replace(self.tolerances, min_pcc=min_pcc))

    def rule(self, quanta: Mapping[str, float] | None = None) -> Callable[[str, np.ndarray, np.ndarray], OutputResult]:
        """The fixed comparison of one output `(name, want, got)`, as these
        options set it: the tolerances, Forge's PCC rule in a reduced format,
        and the quantization step of an output a DequantizeLinear computes
        (`quanta`, by name)."""
        t, steps = self.tolerances, quanta or {}
        if self.compile.reduced:
            return lambda name, want, got: compare_reduced(name, want, got, min_pcc=t.min_pcc, atol=t.atol)
        return lambda name, want, got: compare_output(name, want, got, rtol=t.rtol, atol=t.atol, min_pcc=t.min_pcc,
                                                      quantum=steps.get(name, 0.0))

    def given(self) -> Iterator[tuple[str, str]]:
        """Each option set from its default: its field name and its flag;
        first an error for one given without the option it goes with."""
        for record in (self, self.compile):
            for f in fields(record):
                if "flag" not in f.metadata or getattr(record, f.name) == f.default:
                    continue
                needs = f.metadata["needs"]
                if needs is not None and not getattr(record, needs[0]):
                    raise ForgeOptError(needs[1])
                yield f.name, f.metadata["flag"]

    def refuse_beyond(self, takes: Iterable[str], mode: str) -> None:
        """An error naming the first option given (not at its default)
        without the option it goes with, or that a check in `mode` does
        not take."""
        for name, flag in self.given():
            if name not in takes:
                raise ForgeOptError(f"{flag} does not combine with {mode}")


def read_inputs(path: str) -> dict[str, np.ndarray]:
    """`--inputs x.npz`: one array per input, by name."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ForgeOptError(f"{path}: cannot read the inputs (an .npz file of one array per input, by name): "
                            f"{e}") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ForgeOptError(f"{path}: one array, not an .npz file of one array per input by name "
                            "(np.savez(path, input_ids=..., attention_mask=...))")
    with data:
        arrays = {}
        for k in data.files:
            try:
                arrays[k] = data[k]
            except ValueError:  # numpy refuses pickled (object) arrays without allow_pickle
                raise ForgeOptError(f"{path}: input '{k}' is an array of Python objects; give numbers "
                                    "(np.savez(path, x=np.asarray(x, np.float32)))") from None
        return arrays


def parse_executor(name: str) -> str:
    """`--executor`'s value, or an error naming the choices."""
    from forge_opt.execution.engine import EXECUTORS

    if name not in EXECUTORS:
        raise ForgeOptError(f"--executor {name}: give one of {', '.join(EXECUTORS)}")
    return name
