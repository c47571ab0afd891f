"""An LLM-size model stored with external data (96 layers of 4096x4096
float16, 3.2 GB): compiling it must not read its weights. Prints wall time
and peak RSS of `forge-opt ... -t forge-python` against a process that only
runs `onnx.load` (the floor), medians of `--runs`.

    python benchmarks/llm_scale.py [--layers 96] [--width 4096] [--runs 3] [--keep DIR]

Building the model writes its weights once (about two minutes for 3.2 GB);
`--keep DIR` leaves it there, and a DIR that already holds one is reused.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import PROCESSES, medians


def build(path: Path, layers: int, width: int) -> None:
    """A chain of MatMuls, each weight its own stretch of `weights.data`."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) * 0.01).astype(np.float16)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"h{i}"]))
        x = f"h{i}"
    graph = helper.make_graph(
        nodes, "llm_scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT16, [1, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)
    onnx.save(model, path, save_as_external_data=True, location="weights.data", size_threshold=1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--layers", type=int, default=96)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", metavar="DIR", help="build the model here (or reuse the one there)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "model.onnx"
        if not path.is_file():
            build(path, args.layers, args.width)
        data = (folder / "weights.data").stat().st_size / 2**20
        print(f"{args.layers} MatMuls of {args.width}x{args.width} float16: {data:,.0f} MB of external data; "
              f"median of {args.runs}")
        rows = {label: medians(body, path, args.runs) for label, body in PROCESSES.items()}
        floor = rows["onnx.load (floor)"][0]
        print(f"{'process':<20} {'wall s':>8} {'x floor':>8} {'peak RSS MB':>12} {'x data':>7}")
        for label, (wall, rss, _) in rows.items():
            print(f"{label:<20} {wall:>8.2f} {wall / floor:>8.2f} {rss:>12.0f} {rss / data:>7.3f}")


if __name__ == "__main__":
    main()
