"""XLA's CPU compiler as a second executor of a program: the StableHLO text
of `-t stablehlo` compiled by jaxlib (`compile_and_load`) and run, on one
device or on P virtual ones.

Only jax's CPU backend is started: jax otherwise discovers every installed
PJRT plugin first, and the Tenstorrent one (jax-tt-plugin) then unpacks its
runtime, which two processes starting at once can break (tt-mlir runs in a
process of its own, `tt_mlir.py`). jax and jaxlib are the `xla` extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from forge_opt.diagnostics import ForgeOptError

#: virtual CPU devices of the client: as many as any program here asks for
MAX_DEVICES = 8


@cache
def _backend():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # XLA's C++ logs a line per device at INFO
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={MAX_DEVICES}".strip()
    try:
        import jax
        from jax._src import xla_bridge
    except ImportError as e:
        raise ForgeOptError("the XLA executor needs jax and jaxlib: pip install 'forge-opt[xla]'") from e
    jax.config.update("jax_enable_x64", True)  # else device_put narrows an int64 input to int32
    xla_bridge._plugins_registered = True  # CPU only: no plugin is discovered (above)  # pyright: ignore
    return xla_bridge.get_backend("cpu")


def _first_line(message: str) -> str:
    lines = [line for line in str(message).splitlines() if line.strip()]
    return re.sub(r"\s+", " ", lines[0] if lines else str(message))[:500]


def run_stablehlo(text: str, inputs: Sequence[np.ndarray], devices: int = 1,
                  in_axes: Sequence[int | None] = (), out_axes: Sequence[int | None] = (),
                  in_blocks: Sequence[int | None] = (), out_blocks: Sequence[int | None] = ()) -> list[np.ndarray]:
    """The outputs of the StableHLO module `text` on XLA CPU. With `devices`
    > 1 the module is one SPMD program (`mhlo.num_partitions`, a Shardy
    manual computation) on that many virtual devices: an input with an axis
    in `in_axes` is split along it (in `in_blocks` blocks by a mesh's rows,
    where it gives a count), the others replicated, and an output with an
    axis in `out_axes` is joined along it, the others taken from device 0."""
    return xla_program(text, devices)(inputs, in_axes, out_axes, in_blocks, out_blocks)


def xla_program(text: str, devices: int = 1) -> Callable[..., list[np.ndarray]]:
    """The StableHLO module `text` compiled once for XLA CPU, to run on
    many inputs (a Loop body's iterations): `run_stablehlo`'s run."""
    backend = _backend()
    from jaxlib import xla_client as xc

    if devices > len(backend.devices()):
        raise ForgeOptError(f"the XLA executor has {len(backend.devices())} virtual devices, not {devices}")
    chosen = backend.devices()[:devices]
    options = xc.CompileOptions()
    if devices > 1:
        options.num_partitions = devices
        build = options.executable_build_options
        build.num_partitions = devices
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = True
        build.device_assignment = xc.DeviceAssignment.create(np.arange(devices).reshape(1, devices))
    try:
        executable = backend.compile_and_load(text, xc.DeviceList(tuple(chosen)), options)
    except Exception as e:  # jaxlib raises its own XlaRuntimeError
        raise ForgeOptError(f"XLA cannot compile the StableHLO program: {_first_line(str(e))}") from e
    return lambda inputs, in_axes=(), out_axes=(), in_blocks=(), out_blocks=(): _execute(
        executable, chosen, inputs, in_axes, out_axes, in_blocks, out_blocks)


def _execute(executable, chosen, inputs: Sequence[np.ndarray], in_axes: Sequence[int | None],
             out_axes: Sequence[int | None], in_blocks: Sequence[int | None] = (),
             out_blocks: Sequence[int | None] = ()) -> list[np.ndarray]:
    import jax

    devices = len(chosen)
    try:
        if devices == 1:
            return [np.asarray(o) for o in executable.execute([jax.device_put(np.asarray(x), chosen[0])
                                                               for x in inputs])]
        rows = next((b for b in [*in_blocks, *out_blocks] if b), 0)  # a mesh's, where a value is split by them
        mesh = jax.sharding.Mesh(np.array(chosen).reshape(rows, -1), ("r", "c")) if rows else \
            jax.sharding.Mesh(np.array(chosen), ("d",))

        def spec(axis: int | None, blocks: int | None, rank: int):
            dims: list[str | tuple[str, ...] | None] = [None] * rank
            if axis is not None:
                dims[axis] = "r" if blocks else ("r", "c") if rows else "d"
            return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*dims))
        in_axes = list(in_axes) or [None] * len(inputs)
        in_blocks = list(in_blocks) or [None] * len(inputs)
        args = [jax.device_put(np.asarray(x), spec(a, b, np.ndim(x))) for x, a, b in zip(inputs, in_axes, in_blocks)]
        pieces = executable.execute_sharded(args).disassemble_into_single_device_arrays()
    except Exception as e:
        raise ForgeOptError(f"XLA cannot run the StableHLO program: {_first_line(str(e))}") from e
    out_axes = list(out_axes) or [None] * len(pieces)
    out_blocks = list(out_blocks) or [None] * len(pieces)
    # a value split by rows: one block from the first device of each row
    return [np.asarray(p[0]) if a is None else np.concatenate([np.asarray(x) for x in p[::devices // (b or devices)]],
                                                              axis=a)
            for p, a, b in zip(pieces, out_axes, out_blocks)]


def executed_by_xla() -> str:
    """The report's line naming the executor."""
    from importlib.metadata import version

    return f"executed by XLA CPU (jaxlib {version('jaxlib')}) from the program's StableHLO form, not the stand-in"
