"""Which strategy a check's options ask for: `--decode` (around the one
that runs each step's program), `--fallback`, `--stages S`, `--devices P`, or one device;
`--device-memory` around the one for the count it chooses."""

from __future__ import annotations

from forge_opt.check.decode import Decode
from forge_opt.check.model import OneDevice
from forge_opt.check.options import CheckOptions
from forge_opt.check.run import Strategy
from forge_opt.check.split import Fallback, Parallel, SizedDevices
from forge_opt.check.stages import Stages


def strategy_for(options: CheckOptions) -> Strategy:
    if options.compile.device_memory:
        return SizedDevices(options, _at_count)
    return _at_count(options)


def _at_count(options: CheckOptions) -> Strategy:
    if options.steps:
        return Decode(options)
    if options.fallback:
        return Fallback(options)
    if options.stages > 1:
        return Stages(options)
    if options.compile.device_count > 1:
        return Parallel(options)
    return OneDevice(options)
