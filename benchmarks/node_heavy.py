"""Compile time per ONNX node on graphs of 1k, 10k and 100k nodes.

The graph is a chain of element-wise ops (Relu, Sigmoid, Tanh, Abs) on a
1x64 tensor, so weights play no part. For each size it prints the whole
process wall time of `forge-opt MODEL -p onnx-to-forge -t forge-python`
(median of --runs), nodes per second, time per node relative to the
smallest size, and an in-process breakdown by stage.

    python benchmarks/node_heavy.py [--sizes 1000 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

import onnx
from onnx import TensorProto, helper

OPS = ("Relu", "Sigmoid", "Tanh", "Abs")


def chain(n: int) -> onnx.ModelProto:
    nodes, x = [], "x"
    for i in range(n):
        nodes.append(helper.make_node(OPS[i % len(OPS)], [x], [f"v{i}"], name=f"n{i}"))
        x = f"v{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 64])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def whole_process(path: Path, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "forge_opt.tools.forge_opt", str(path), "-p", "onnx-to-forge",
         "-t", "forge-python", "-o", str(out)],
        check=True,
    )
    return time.perf_counter() - start


def stages(path: Path) -> dict[str, float]:
    from forge_opt.api import make_context
    from forge_opt.frontends import onnx as importer
    from forge_opt.targets.forge_python import emit_module
    from forge_opt.transforms.lower_split import LowerSplitPass
    from forge_opt.transforms.onnx_to_tir import OnnxToTirPass
    from forge_opt.transforms.tir_to_forge import TirToForgePass

    times: dict[str, float] = {}

    def timed(label, fn):
        start = time.perf_counter()
        result = fn()
        times[label] = time.perf_counter() - start
        return result

    model, base, weights = timed("load", lambda: importer.load_model_lazily(path))
    inferred = timed("shape inference", lambda: importer.infer_types(model))
    module = timed(
        "import", lambda: importer.ModuleOp([importer._Importer(model, base, inferred, weights).import_main()])
    )
    ctx = make_context()
    for p in (OnnxToTirPass(), LowerSplitPass(), TirToForgePass()):
        timed(p.name, lambda p=p: p.apply(ctx, module))
    timed("verify", module.verify)
    timed("emit", lambda: StringIO(emit_module(module).source))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"chain{n}.onnx"
            onnx.save(chain(n), path)
            wall = statistics.median(whole_process(path, Path(tmp) / "out.py") for _ in range(args.runs))
            rows.append((n, wall, stages(path)))
    base = rows[0][1] / rows[0][0]
    print(f"element-wise chain; whole process, median of {args.runs}")
    print(f"{'nodes':>8} {'wall s':>8} {'nodes/s':>9} {'s/node vs first':>16}")
    for n, wall, _ in rows:
        print(f"{n:>8} {wall:>8.2f} {n / wall:>9.0f} {wall / n / base:>16.2f}")
    labels = list(rows[0][2])
    print("\nin-process stages, seconds")
    print(f"{'nodes':>8} " + " ".join(f"{label:>15}" for label in labels))
    for n, _, times in rows:
        print(f"{n:>8} " + " ".join(f"{times[label]:>15.2f}" for label in labels))


if __name__ == "__main__":
    main()
