"""How many Forge calls the emitted module makes, against how many nodes the
model has before and after onnxslim (the simplifier users run before
compiling). Fewer calls: less device work and device compile time.

    python benchmarks/op_counts.py        # needs onnxslim (pip install onnxslim)

Models: the exports in tests/data/models/ (symbolic sizes at 1 for a
batch, 16 otherwise), a LLaMA-style block at opset 23, and the 9 light models of
the onnx package. Prints a table; nothing is timed.
"""

from __future__ import annotations

import glob
import os
import sys
import tempfile
from pathlib import Path

import onnx

from forge_opt.frontends.onnx_shapes import symbol_names

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def forge_calls(module) -> int:
    from forge_opt.dialects import forge

    return sum(
        1 for op in module.walk()
        if isinstance(op, forge.ForgeOp) and not isinstance(op, forge.ParameterOp | forge.ConstantOp)
    )


def slim_nodes(model: onnx.ModelProto) -> int:
    import onnxslim  # pyright: ignore[reportMissingImports]  (the bench extra)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        onnx.save(model, path)
        slim = onnxslim.slim(path)
    return len(slim.graph.node)


def models() -> list[tuple[str, onnx.ModelProto, dict]]:
    found = []
    data = ROOT / "tests" / "data" / "models"
    for path in sorted(data.glob("*.onnx")):
        if path.stem.endswith("_merged"):  # a run-time If: forge-split's, not one module's
            continue
        model = onnx.load(str(path))
        symbols = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
        # a symbol that is a sum of others (Optimum's total length) is sized from them
        plain = {s for s in symbols if symbol_names(s) == [s]}
        found.append((path.stem, model, {s: 1 if "batch" in s else 16 for s in plain}))
    # the opset-23 block the op-breadth tests build
    from test_function_expansion import llama_block  # pyright: ignore[reportMissingImports]

    found.append(("llama_block_opset23", llama_block(), {}))
    from onnx.backend import test as backend_test

    light = os.path.join(os.path.dirname(backend_test.__file__), "data", "light", "*.onnx")
    for path in sorted(glob.glob(light)):
        found.append((os.path.basename(path)[len("light_"):-len(".onnx")], onnx.load(path), {}))
    return found


def main() -> int:
    import forge_opt

    rows = []
    for name, model, dims in models():
        module = forge_opt.compile_onnx(model, dims=dims or None)
        calls = forge_calls(module)
        slim = slim_nodes(model)
        rows.append((name, len(model.graph.node), slim, calls, calls / slim if slim else float("nan")))
    print("| model | ONNX nodes | onnxslim nodes | Forge calls | calls / onnxslim |")
    print("|---|---|---|---|---|")
    for name, nodes, slim, calls, ratio in rows:
        print(f"| {name} | {nodes} | {slim} | {calls} | {ratio:.2f} |")
    worst = max(rows, key=lambda r: r[4])
    print(f"\nworst: {worst[0]} at {worst[4]:.2f}x onnxslim's node count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
