"""Compile time per ONNX node on graphs of 1k, 10k and 100k nodes.

The graph is a chain of element-wise ops (Relu, Sigmoid, Tanh, Abs) on a
1x64 tensor, so weights play no part. For each size it times whole
processes (medians of --runs): `forge-opt MODEL -p onnx-to-forge -t
forge-python -o model.py` and, as the floor, a process that only runs
`onnx.load`. It prints nodes per second, time per node relative to the
smallest size, peak RSS, and an in-process breakdown by stage.

    python benchmarks/node_heavy.py [--sizes 1000 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import COMPILE, FLOOR, medians, print_stages, stages

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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"chain{n}.onnx"
            onnx.save(chain(n), path)
            floor, _, _ = medians(FLOOR, path, args.runs)
            wall, rss, best = medians(COMPILE, path, args.runs)
            if not rows:
                stages(path)  # warm up: the first call pays for lazy imports
            rows.append((n, floor, wall, best, rss, stages(path)))
    base = rows[0][2] / rows[0][0]
    print(f"element-wise chain; whole processes, median of {args.runs} (nodes/s also from the fastest run)")
    print(
        f"{'nodes':>8} {'floor s':>8} {'wall s':>8} {'x floor':>8} {'nodes/s':>9} {'fastest':>9} "
        f"{'s/node vs first':>16} {'peak RSS MB':>12}"
    )
    for n, floor, wall, best, rss, _ in rows:
        print(
            f"{n:>8} {floor:>8.2f} {wall:>8.2f} {wall / floor:>8.1f} {n / wall:>9.0f} {n / best:>9.0f} "
            f"{wall / n / base:>16.2f} {rss:>12.0f}"
        )
    print_stages([(f"{n} nodes", times) for n, *_, times in rows])
    per_node = [sum(times.values()) / n * 1e6 for n, *_, times in rows]
    print(
        "\nin-process µs/node: "
        + ", ".join(f"{n}: {us:.0f}" for (n, *_), us in zip(rows, per_node))
        + f" (last/first {per_node[-1] / per_node[0]:.2f})"
    )


if __name__ == "__main__":
    main()
