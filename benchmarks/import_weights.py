"""Import cost of a weight-heavy model against the `onnx.load` floor.

Builds a 24-layer MLP with 2048x2048 float32 weights (~400 MB; smaller with
--layers/--width), then times whole processes (medians of --runs):

- floor:  python, `import onnx`, `onnx.load(model)`
- import: `forge-opt MODEL -o /dev/null` (load, shape inference, import,
          print with weights elided)
- compile: `forge-opt MODEL -p onnx-to-forge -t forge-python -o model.py`

and prints a table with peak RSS and the ratio against the floor measured
in the same run.

    python benchmarks/import_weights.py [--layers 24] [--width 2048] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(layers: int, width: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        b = rng.standard_normal((width,), dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"mm{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"add{i}"),
            helper.make_node("Relu", [f"add{i}"], [f"h{i}"], name=f"relu{i}"),
        ]
        x = f"h{i}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


# Peak RSS from VmHWM: ru_maxrss would keep the forked parent's peak across exec.
_MEASURE = """
import sys, time
t = time.perf_counter()
{body}
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(time.perf_counter() - t, int(hwm.split()[1]) / 1024, file=sys.stderr)
"""

FLOOR = "import onnx\nonnx.load(sys.argv[1])"
IMPORT = (
    "from forge_opt.tools.forge_opt import run\n"
    "assert run([sys.argv[1], '-o', '/dev/null']) == 0"
)
COMPILE = (
    "import os, tempfile\n"
    "from forge_opt.tools.forge_opt import run\n"
    "out = os.path.join(tempfile.mkdtemp(), 'model.py')\n"
    "assert run([sys.argv[1], '-p', 'onnx-to-forge', '-t', 'forge-python', '-o', out]) == 0"
)


def run(body: str, model: Path) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE.format(body=body), str(model)],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    _, rss = proc.stderr.strip().splitlines()[-1].split()
    return wall, float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlp.onnx"
        onnx.save(mlp(args.layers, args.width), path)
        size = path.stat().st_size / 2**20
        rows = {}
        for label, body in (
            ("onnx.load (floor)", FLOOR),
            ("forge-opt import", IMPORT),
            ("forge-opt to Forge", COMPILE),
        ):
            samples = [run(body, path) for _ in range(args.runs)]
            rows[label] = (
                statistics.median(s[0] for s in samples),
                statistics.median(s[1] for s in samples),
            )
    floor = rows["onnx.load (floor)"][0]
    print(f"model: {args.layers}-layer MLP, {args.width}x{args.width} f32 weights, {size:.0f} MB; median of {args.runs}")
    print(f"{'process':<20} {'wall s':>8} {'x floor':>8} {'peak RSS MB':>12} {'x file':>7}")
    for label, (wall, rss) in rows.items():
        print(f"{label:<20} {wall:>8.2f} {wall / floor:>8.2f} {rss:>12.0f} {rss / size:>7.2f}")


if __name__ == "__main__":
    main()
