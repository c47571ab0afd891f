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
from collections import Counter
from pathlib import Path

import onnx

from forge_opt.frontends.onnx.shapes import symbol_names

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


#: the Forge call an onnxslim node of each kind becomes when it is one call (else its own name)
ONE_CALL = {
    "Conv": "Conv2d", "Relu": "Relu", "MaxPool": "MaxPool2d", "AveragePool": "AvgPool2d",
    "GlobalAveragePool": "AvgPool2d", "Gemm": "Matmul", "MatMul": "Matmul", "Concat": "Concatenate",
    "Reshape": "Reshape", "Flatten": "Reshape", "Unsqueeze": "Reshape", "Squeeze": "Reshape", "Sum": "Add",
    "Mul": "Multiply", "Div": "Divide", "Sub": "Subtract", "Pow": "Power", "ReduceMean": "ReduceAvg",
    "Cos": "Cosine", "Sin": "Sine", "Gather": "Embedding", "Slice": "Index", "Expand": "Broadcast",
    "LayerNormalization": "Layernorm", "BatchNormalization": "Batchnorm",
}


def forge_calls(module) -> Counter:
    """The module's Forge calls, by function."""
    from forge_opt.dialects import forge

    return Counter(op.FUNCTION.name for op in module.walk() if isinstance(op, forge.ForgeOp))


def slim_nodes(model: onnx.ModelProto) -> Counter:
    """The nodes onnxslim leaves, by kind."""
    import onnxslim  # pyright: ignore[reportMissingImports]  (the bench extra)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.onnx")
        onnx.save(model, path)
        slim = onnxslim.slim(path)
    return Counter(n.op_type for n in slim.graph.node)


def not_one_to_one(calls: Counter, slim: Counter) -> str:
    """The calls beyond one per onnxslim node of the kind that becomes them."""
    expected = Counter()
    for kind, n in slim.items():
        expected[ONE_CALL.get(kind, kind)] += n
    extra = calls - expected
    return ", ".join(f"{fn} +{n}" for fn, n in extra.most_common())


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
        calls, slim = forge_calls(module), slim_nodes(model)
        n_calls, n_slim = calls.total(), slim.total()
        ratio = n_calls / n_slim if n_slim else float("nan")
        rows.append((name, len(model.graph.node), n_slim, n_calls, ratio, not_one_to_one(calls, slim)))
    print("| model | ONNX nodes | onnxslim nodes | Forge calls | calls / onnxslim | calls beyond one per node |")
    print("|---|---|---|---|---|---|")
    for name, nodes, slim, calls, ratio, extra in rows:
        print(f"| {name} | {nodes} | {slim} | {calls} | {ratio:.2f} | {extra if ratio > 1 else ''} |")
    worst = max(rows, key=lambda r: r[4])
    print(f"\nworst: {worst[0]} at {worst[4]:.2f}x onnxslim's node count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
