"""What forge-opt offers to stock `xdsl-opt` (entry point `xdsl.universe`)
and to `forge-opt` itself. Names do not clash with xDSL's own."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe
from xdsl.utils.target import Target


def _onnx() -> Dialect:
    from forge_opt.dialects.onnx import ONNX

    return ONNX


def _tir() -> Dialect:
    from forge_opt.dialects.tir import TIR

    return TIR


def _forge() -> Dialect:
    from forge_opt.dialects.forge import FORGE

    return FORGE


def shard_dialect() -> Dialect:
    """MLIR's `shard` with the collectives xDSL lacks: xDSL's own dialect,
    which they join when `forge_opt.dialects.shard` is imported. Not in the
    universe under its name (xDSL's universe has it); this plug-in imports
    that module when it loads, so stock xdsl-opt knows them too."""
    from forge_opt.dialects.shard import SHARD

    return SHARD


shard_dialect()  # stock xdsl-opt loads this module before it parses: the collectives join xDSL's `shard`


def _pass(name: str) -> Callable[[], type[ModulePass]]:
    def factory() -> type[ModulePass]:
        from forge_opt.transforms.pipelines import ALL_PASSES

        return ALL_PASSES[name]

    return factory


def _forge_python() -> type[Target]:
    from forge_opt.targets.forge_python_target import ForgePythonTarget

    return ForgePythonTarget


def _stablehlo() -> type[Target]:
    from forge_opt.targets.stablehlo import StableHLOTarget

    return StableHLOTarget


def _stablehlo_dialect() -> Dialect:
    from forge_opt.dialects.stablehlo import STABLEHLO

    return STABLEHLO


def _chlo_dialect() -> Dialect:
    from forge_opt.dialects.stablehlo import CHLO

    return CHLO


def _sdy_dialect() -> Dialect:
    from forge_opt.dialects.sdy import SDY

    return SDY


def _dot() -> type[Target]:
    from forge_opt.targets.dot import DotTarget

    return DotTarget


DIALECTS: dict[str, Callable[[], Dialect]] = {
    "onnx": _onnx, "tir": _tir, "forge": _forge,
    "stablehlo": _stablehlo_dialect, "chlo": _chlo_dialect, "sdy": _sdy_dialect,
}
PASSES: dict[str, Callable[[], type[ModulePass]]] = {
    name: _pass(name)
    for name in (
        "onnx-to-tir", "fuse-patterns", "merge-equal-ops", "lower-split", "tir-to-forge", "fold-weight-layouts",
        "tir-data-format", "mark-weight-formats", "static-kv-cache", "onnx-to-forge", "partition-for-forge",
        "stack-experts", "tensor-parallel", "tp-partition", "scatter-all-reduces", "scatter-attention-heads",
        "combine-all-reduces", "collectives-on-mesh", "forge-to-stablehlo",
    )
}
TARGETS: dict[str, Callable[[], type[Target]]] = {
    "forge-python": _forge_python, "dot": _dot, "stablehlo": _stablehlo,
}

FORGE_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES, all_targets=TARGETS)


def make_context() -> Context:
    """A context with builtin, func and forge-opt's dialects loaded."""
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Func)
    for factory in DIALECTS.values():
        ctx.load_dialect(factory())
    ctx.load_dialect(shard_dialect())
    return ctx
