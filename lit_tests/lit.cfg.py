# lit configuration for forge-opt: `lit lit_tests -v`.
import os
import shutil
import sys

import lit.formats

config.name = "forge-opt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".onnxtxt"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Inputs"]

# The tools of the Python that runs lit (the project's venv).
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
for tool in ("forge-opt", "forge-check", "xdsl-opt", "filecheck"):
    if shutil.which(tool, path=config.environment["PATH"]) is None:
        lit_config.fatal(f"'{tool}' not found next to {sys.executable}: install forge-opt with its test extra")
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(
    (
        "FORGE_ROUNDTRIP",
        "forge-opt %s --print-op-generic --split-input-file | forge-opt --split-input-file | filecheck %s",
    )
)

# Real MLIR: the native torch-mlir-opt inside the torch-mlir wheel (extra
# `interop`), not its Python wrapper. Tests that need it say `REQUIRES: torch-mlir`.
import importlib.util

_spec = importlib.util.find_spec("torch_mlir")
if _spec is not None and _spec.submodule_search_locations:
    native = os.path.join(list(_spec.submodule_search_locations)[0], "_mlir_libs", "torch-mlir-opt")
    if os.path.exists(native):
        config.available_features.add("torch-mlir")
        config.substitutions.append(("%torch-mlir-opt", native))
