"""This checkout against another one, in the same command: whole-process
`forge-opt MODEL -p onnx-to-forge -t forge-python` runs of the two,
interleaved, on the node-heavy chains.

On a shared machine whose speed drifts from one minute to the next, two
separate benchmark runs cannot show a change smaller than the drift; runs
taken in turn can.

    git worktree add /tmp/baseline main~3
    python benchmarks/compare.py /tmp/baseline [--sizes 10000 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure import COMPILE, importing, whole_process
from node_heavy import chain


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("baseline", type=Path, help="a checkout of forge-opt to compare against")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if not (args.baseline / "frontends" / "onnx" / "__init__.py").is_file():
        raise SystemExit(f"{args.baseline} is not a forge-opt checkout")
    this = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        bodies = {
            "baseline": importing(args.baseline, Path(tmp) / "baseline") + COMPILE,
            "this": importing(this, Path(tmp) / "this") + COMPILE,
        }
        print(f"element-wise chains; whole processes taken in turn, median of {args.runs}")
        print(
            f"{'nodes':>8} {'baseline s':>11} {'this s':>8} {'ratio':>6} {'baseline nodes/s':>17} {'this nodes/s':>13}"
        )
        for n in args.sizes:
            model = Path(tmp) / f"chain{n}.onnx"
            onnx.save(chain(n), model)
            walls: dict[str, list[float]] = {k: [] for k in bodies}
            for _ in range(args.runs):
                for k, body in bodies.items():
                    walls[k].append(whole_process(body, model)[0])
            base, new = (statistics.median(walls[k]) for k in ("baseline", "this"))
            print(f"{n:>8} {base:>11.2f} {new:>8.2f} {new / base:>6.2f} {n / base:>17.0f} {n / new:>13.0f}")


if __name__ == "__main__":
    main()
