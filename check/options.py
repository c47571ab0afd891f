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
from forge_opt.split.mpi import MPI_TIMEOUT
from forge_opt.transforms.compile_options import CompileOptions, option, parse_bytes


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
    freeze: tuple[str, ...] = option("--freeze", ())  # inputs compiled as constants, their values from `inputs`
    bisect: bool = option("--bisect", False)  # on a mismatch, name the first diverging ONNX node
    layers: bool = option("--layers", False)  # every node output's distance from onnxruntime's, in order
    stem: str = option("--emit", "")  # the emitted module's file name without .py (names its constants)
    mpi: bool = option("--mpi", False)  # one MPI process per device
    # seconds a device may keep the others waiting in a collective
    timeout: float = option("--timeout", MPI_TIMEOUT, ("mpi", "--timeout bounds how long MPI processes wait for "
                                                               "each other: it goes with --mpi"))
    min_device_ops: int = option("--min-device-ops", 1)  # a split's device sub-model of fewer ops goes to the CPU
    # a decode's static KV cache positions; 0: the prompt and the steps
    max_length: int = option("--max-length", 0, ("steps", "--max-length sizes the KV cache of a decode: it goes "
                                                          "with --decode N"))
    growing_cache: bool = option("--growing-cache", False)  # decode with the cache as exported: a program per shape
    steps: int = option("--decode", 0)  # greedy decode steps
    executor: str = option("--executor", "standin")  # what runs the program: the Forge stand-in, or XLA CPU
    tt_mlir: bool = option("--tt-mlir", False)  # also compile the program's StableHLO with tt-mlir
    tt_mlir_dumps: str = ""  # the folder tt-mlir's IR dumps are kept in ("": a temporary one)
    fallback: bool = option("--fallback", False)  # through the split path: CPU sub-models where Forge cannot
    stages: int = option("--stages", 1)  # a pipeline of this many stages, one device each
    annotate: str = option("--annotate", "")  # write the model with the plan as ONNX sharding annotations here

    @classmethod
    def from_args(cls, args) -> CheckOptions:
        """The options `forge-check`'s parsed flags give, each value checked
        (which flags go together is `refuse_beyond`'s, as the strategy
        chosen takes them)."""
        from forge_opt.frontends.onnx.shapes import InputShapes

        check_tolerances(args.rtol, args.atol, MIN_PCC if args.pcc is None else args.pcc)
        if args.devices is not None and args.devices < 2:
            raise ForgeOptError(f"--devices {args.devices}: tensor parallelism needs 2 devices or more "
                                "(leave --devices out to check on one device)")
        if args.stages is not None and args.stages < 2:
            raise ForgeOptError(f"--stages {args.stages}: a pipeline has 2 stages or more (leave --stages out to "
                                "check on one device)")
        if args.decode is not None and args.decode < 1:
            raise ForgeOptError(f"--decode {args.decode}: decode at least one step")
        if args.device_memory is not None and parse_bytes(args.device_memory) < 1:
            raise ForgeOptError(f"--device-memory {args.device_memory}: give a size above 0")
        if args.configuration is not None and not args.plan_from_onnx:
            raise ForgeOptError("--configuration names the sharding configuration --plan-from-onnx reads")
        if args.plan_from_onnx and not (args.devices or args.mesh or args.device_memory or args.stages):
            raise ForgeOptError("--plan-from-onnx compiles a tensor-parallel program or a pipeline: it goes with "
                                "--devices P or --stages S")
        if args.plan_from_onnx and args.plan:
            raise ForgeOptError("--plan-from-onnx takes the plan from the model's annotations: leave out --plan")
        plan = f"{args.model}#{args.configuration or ''}" if args.plan_from_onnx else args.plan
        compiled = CompileOptions(
            devices=args.devices or 1, mesh=args.mesh or "", min_size=args.min_size, plan=plan,
            require_sharded=args.require_sharded,
            data_format=args.data_format, weight_format=args.weight_format or "",
            device_memory=args.device_memory or 0,
            max_devices=CompileOptions.max_devices if args.max_devices is None else args.max_devices)
        chosen = InputShapes.parse(args.shape, args.dim)
        emit = args.emit or ""
        return cls(
            read_inputs(args.inputs) if args.inputs else None, Tolerances(args.rtol, args.atol), args.seed,
            chosen.shapes, chosen.dims, compiled, freeze=tuple(args.freeze), bisect=args.bisect, layers=args.layers,
            stem=Path(emit).stem, mpi=args.mpi, timeout=args.timeout, max_length=args.max_length or 0,
            growing_cache=args.growing_cache, steps=args.decode or 0, executor=parse_executor(args.executor),
            tt_mlir=args.tt_mlir, tt_mlir_dumps=str(Path(emit).with_suffix("")) + "_tt_mlir" if emit and args.tt_mlir
            else "", fallback=args.fallback, annotate=args.annotate or "", stages=args.stages or 1,
        ).with_pcc(args.pcc)

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
