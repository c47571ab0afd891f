"""forge-opt: an MLIR-style compiler on xDSL from ONNX to Tenstorrent Forge."""

# pyright: reportUnsupportedDunderAll=false
# (the names in __all__ come from __getattr__, so `import forge_opt` stays cheap)

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "ForgeOptError",
    "check_model",
    "compile_onnx",
    "convert",
    "device_values",
    "emit_forge_python",
    "import_onnx",
    "run_parallel",
    "run_split",
    "split_model",
    "tensor_parallel",
]


def __getattr__(name: str) -> Any:
    # Loaded on first use so `import forge_opt` stays cheap for the tools.
    if name in ("import_onnx", "compile_onnx", "emit_forge_python", "check_model"):
        from forge_opt import api

        return getattr(api, name)
    if name in ("split_model", "convert", "run_split", "tensor_parallel", "run_parallel"):
        from forge_opt.split import api as split

        return getattr(split, name)
    if name == "device_values":
        from forge_opt.data_formats import device_values

        return device_values
    if name == "ForgeOptError":
        from forge_opt.diagnostics import ForgeOptError

        return ForgeOptError
    raise AttributeError(f"module 'forge_opt' has no attribute {name!r}")
