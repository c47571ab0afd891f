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
from collections.abc import Sequence
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


def run_stablehlo(text: str, inputs: Sequence[np.ndarray], devices: int = 1) -> list[np.ndarray]:
    """The outputs of the StableHLO module `text` on XLA CPU. With `devices`
    > 1 the module is one SPMD program (`mhlo.num_partitions`) run on that
    many virtual devices, each given `inputs`; the outputs are device 0's
    (a program's results are replicated)."""
    backend = _backend()
    import jax
    from jax._src.lib import xla_client as xc

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
    try:
        if devices == 1:
            return [np.asarray(o) for o in executable.execute([jax.device_put(np.asarray(x), chosen[0])
                                                               for x in inputs])]
        mesh = jax.sharding.Mesh(np.array(chosen), ("d",))
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        args = [jax.device_put(np.asarray(x), replicated) for x in inputs]
        outs = executable.execute_sharded(args).disassemble_into_single_device_arrays()
    except Exception as e:
        raise ForgeOptError(f"XLA cannot run the StableHLO program: {_first_line(str(e))}") from e
    return [np.asarray(o[0]) for o in outs]


def executed_by_xla() -> str:
    """The report's line naming the executor."""
    from importlib.metadata import version

    return f"executed by XLA CPU (jaxlib {version('jaxlib')}) from the program's StableHLO form, not the stand-in"
