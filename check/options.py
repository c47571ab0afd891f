"""What a check is asked to do, as one record that every strategy reads:
a flag a strategy does not take is an error naming the flag and the mode,
never a flag dropped in silence."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
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


@dataclass(frozen=True)
class Tolerances:
    rtol: float = RTOL
    atol: float = ATOL
    min_pcc: float = MIN_PCC


def _flag(name: str, default, needs: tuple[str, str] | None = None):
    """An option a user sets with `name`, which only some strategies take;
    `needs`: the option it goes with, and what to say when it is alone."""
    return field(default=default, metadata={"flag": name, "needs": needs})


@dataclass(frozen=True)
class CheckOptions:
    inputs: dict[str, np.ndarray] | Sequence[np.ndarray] | None = None  # None: seeded random ones
    tolerances: Tolerances = Tolerances()
    seed: int = 0
    shapes: Mapping[str, Iterable[int]] | None = None  # whole input shapes (as import_onnx's)
    dims: Mapping[str, int] | None = None  # sizes of symbolic dims
    freeze: tuple[str, ...] = _flag("--freeze", ())  # inputs compiled as constants, their values from `inputs`
    bisect: bool = _flag("--bisect", False)  # on a mismatch, name the first diverging ONNX node
    layers: bool = _flag("--layers", False)  # every node output's distance from onnxruntime's, in order
    stem: str = _flag("--emit", "")  # the emitted module's file name without .py (names its constants)
    devices: int = _flag("--devices", 1)  # tensor-parallel on this many devices
    mpi: bool = _flag("--mpi", False)  # one MPI process per device
    # seconds a device may keep the others waiting in a collective
    timeout: float = _flag("--timeout", MPI_TIMEOUT, ("mpi", "--timeout bounds how long MPI processes wait for each "
                                                              "other: it goes with --mpi"))
    plan: str = _flag("--plan", "")  # a JSON file pinning layers' tensor-parallel cases
    min_size: int = _flag("--min-size", 0)  # layers of fewer weight elements stay replicated
    require_sharded: bool = _flag("--require-sharded", False)
    min_device_ops: int = _flag("--min-device-ops", 1)  # a split's device sub-model of fewer ops goes to the CPU
    data_format: str = _flag("--data-format", "float32")  # the program's (`data_formats.PROGRAM_FORMATS`)
    weight_format: str = _flag("--weight-format", "")  # the matmul weights': the data format's, or a block float
    # a decode's static KV cache positions; 0: the prompt and the steps
    max_length: int = _flag("--max-length", 0, ("steps", "--max-length sizes the KV cache of a decode: it goes with "
                                                          "--decode N"))
    growing_cache: bool = _flag("--growing-cache", False)  # decode with the cache as exported: a program per shape
    steps: int = _flag("--decode", 0)  # greedy decode steps
    executor: str = _flag("--executor", "standin")  # what runs the program: the Forge stand-in, or XLA CPU
    tt_mlir: bool = _flag("--tt-mlir", False)  # also compile the program's StableHLO with tt-mlir
    tt_mlir_dumps: str = ""  # the folder tt-mlir's IR dumps are kept in ("": a temporary one)
    fallback: bool = _flag("--fallback", False)  # through the split path: CPU sub-models where Forge cannot
    device_memory: int = _flag("--device-memory", 0)  # bytes a device holds: choose `devices` to fit them
    max_devices: int = _flag("--max-devices", 0, ("device_memory", "--max-devices goes with --device-memory"))

    @classmethod
    def from_args(cls, args) -> CheckOptions:
        """The options `forge-check`'s parsed flags give, each value checked
        (which flags go together is `refuse_beyond`'s, as the strategy
        chosen takes them)."""
        from forge_opt.frontends.onnx.shapes import InputShapes
        from forge_opt.transforms.tp.sizing import parse_bytes

        check_tolerances(args.rtol, args.atol, MIN_PCC if args.pcc is None else args.pcc)
        if args.devices is not None and args.devices < 2:
            raise ForgeOptError(f"--devices {args.devices}: tensor parallelism needs 2 devices or more "
                                "(leave --devices out to check on one device)")
        if args.max_devices is not None and args.max_devices < 1:
            raise ForgeOptError(f"--max-devices {args.max_devices}: give 1 or more")
        if args.decode is not None and args.decode < 1:
            raise ForgeOptError(f"--decode {args.decode}: decode at least one step")
        chosen = InputShapes.parse(args.shape, args.dim)
        emit = args.emit or ""
        return cls(
            read_inputs(args.inputs) if args.inputs else None, Tolerances(args.rtol, args.atol), args.seed,
            chosen.shapes, chosen.dims, freeze=tuple(args.freeze), bisect=args.bisect, layers=args.layers,
            stem=Path(emit).stem, devices=args.devices or 1, mpi=args.mpi, timeout=args.timeout, plan=args.plan,
            min_size=args.min_size, require_sharded=args.require_sharded, data_format=args.data_format,
            weight_format=args.weight_format or "", max_length=args.max_length or 0,
            growing_cache=args.growing_cache, steps=args.decode or 0, executor=parse_executor(args.executor),
            tt_mlir=args.tt_mlir, tt_mlir_dumps=str(Path(emit).with_suffix("")) + "_tt_mlir" if emit and args.tt_mlir
            else "", fallback=args.fallback,
            device_memory=0 if args.device_memory is None else _positive(parse_bytes(args.device_memory),
                                                                          "--device-memory"),
            max_devices=args.max_devices or 0,
        ).with_pcc(args.pcc)

    @property
    def reduced(self) -> bool:
        """The program computes in less than float32: judged by Forge's PCC rule."""
        return (self.data_format, self.weight_format) not in (("float32", ""), ("float32", "float32"))

    def with_pcc(self, min_pcc: float | None) -> CheckOptions:
        """These options with the PCC threshold given, or (None) the default
        for their formats: `MIN_PCC`, or Forge's `REDUCED_PCC`."""
        if min_pcc is None:
            min_pcc = REDUCED_PCC if self.reduced else MIN_PCC
        return replace(self, tolerances=replace(self.tolerances, min_pcc=min_pcc))

    def rule(self) -> Callable[[str, np.ndarray, np.ndarray], OutputResult]:
        """The fixed comparison of one output `(name, want, got)`, as these
        options set it: the tolerances, and Forge's PCC rule in a reduced format."""
        t = self.tolerances
        if self.reduced:
            return lambda name, want, got: compare_reduced(name, want, got, min_pcc=t.min_pcc, atol=t.atol)
        return lambda name, want, got: compare_output(name, want, got, rtol=t.rtol, atol=t.atol, min_pcc=t.min_pcc)

    def pipeline(self, static_cache: int = 0) -> str:
        """onnx-to-forge with these formats, and a static KV cache of
        `static_cache` positions if not 0."""
        options = []
        if self.reduced:
            options.append(f"data-format={self.data_format}")
        if self.reduced and self.weight_format:
            options.append(f"weight-format={self.weight_format}")
        if static_cache:
            options.append(f"static-cache={static_cache}")
        return f"onnx-to-forge{{{' '.join(options)}}}" if options else "onnx-to-forge"

    def refuse_beyond(self, takes: Iterable[str], mode: str) -> None:
        """An error naming the first option given (not at its default)
        without the option it goes with, or that a check in `mode` does
        not take."""
        for f in fields(self):
            if "flag" not in f.metadata or getattr(self, f.name) == f.default:
                continue
            needs = f.metadata["needs"]
            if needs is not None and not getattr(self, needs[0]):
                raise ForgeOptError(needs[1])
            if f.name not in takes:
                raise ForgeOptError(f"{f.metadata['flag']} does not combine with {mode}")


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


def _positive(count: int, flag: str) -> int:
    if count < 1:
        raise ForgeOptError(f"{flag} {count}: give a size above 0")
    return count


def parse_executor(name: str) -> str:
    """`--executor`'s value, or an error naming the choices."""
    from forge_opt.execution.engine import EXECUTORS

    if name not in EXECUTORS:
        raise ForgeOptError(f"--executor {name}: give one of {', '.join(EXECUTORS)}")
    return name
