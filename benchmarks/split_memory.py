"""Splitting a large model costs no more memory than compiling it: whole
processes, peak RSS, on an MLP of 1 GiB or more whose weights are external
data, split in the middle by a node kept on the CPU.

    python benchmarks/split_memory.py [--layers 16] [--width 4096] [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import COMPILE, FLOOR, medians
from weight_heavy import mlp

SPLIT = (
    "import tempfile\n"
    "from forge_opt.tools.forge_split import main\n"
    "sys.argv = ['forge-split', sys.argv[1], '-o', os.path.join(tempfile.mkdtemp(), 'split'),"
    " '--cpu-nodes', {node!r}]\n"
    "main()"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inline = Path(tmp) / "inline.onnx"
        title = mlp(inline, args.layers, args.width)
        path = Path(tmp) / "mlp.onnx"
        onnx.save(onnx.load(inline), path, save_as_external_data=True, location="mlp.data")
        inline.unlink()
        size = ((Path(tmp) / "mlp.data").stat().st_size + path.stat().st_size) / 2**20
        middle = f"relu{args.layers // 2}"
        processes = {
            "onnx.load (floor)": FLOOR,
            "forge-opt to Forge": COMPILE,
            "forge-split": SPLIT.format(node=middle),
        }
        rows = {label: medians(body, path, args.runs) for label, body in processes.items()}
        print(f"{title}, external data; {size:.0f} MB; split at {middle} (kept on the CPU); median of {args.runs}")
        compile_rss = rows["forge-opt to Forge"][1]
        print(f"{'process':<20} {'wall s':>8} {'peak RSS MB':>12} {'x compile':>10}")
        for label, (wall, rss, _) in rows.items():
            print(f"{label:<20} {wall:>8.2f} {rss:>12.0f} {rss / compile_rss:>10.2f}")


if __name__ == "__main__":
    main()
