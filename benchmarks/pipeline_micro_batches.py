"""A pipeline's stages overlapping on micro-batches: one MPI process per
stage, the batch run whole (M = 1) or in M parts, against the same parts
run in one process, one stage after another. M parts through S stages take
M + S - 1 steps of 1/M of the work, against S whole steps: with 2 stages,
5/8 of the time at M = 4 when compute outweighs the messages.

    python benchmarks/pipeline_micro_batches.py [--layers 8] [--width 1024] [--batch 1024] [--runs 3]

BLAS runs on one thread in every process (OMP_NUM_THREADS=1), so that the
two processes of a 2-stage pipeline take the machine's 2 cores and the run
in one process takes one, as a device each would. Each MPI run includes
starting its processes and loading each stage's weights: the `startup`
row measures that floor (the split of the batch of one row).
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before numpy loads BLAS; mpiexec's processes inherit it

import argparse  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from forge_opt.split.api import convert, run_split, split_model  # noqa: E402
from forge_opt.split.mpi import run_mpi  # noqa: E402

STAGES = 2


def residual_mlp(path: Path, layers: int, width: int) -> str:
    """A stack of residual MLP blocks (width -> 4·width -> width) named as
    PyTorch exports `layers.i`, with a symbolic batch."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        up = rng.standard_normal((width, 4 * width), dtype=np.float32) / np.float32(np.sqrt(width))
        down = rng.standard_normal((4 * width, width), dtype=np.float32) / np.float32(np.sqrt(4 * width))
        inits += [numpy_helper.from_array(up, f"layers.{i}.up"), numpy_helper.from_array(down, f"layers.{i}.down")]
        at = f"/layers.{i}"
        nodes += [
            helper.make_node("MatMul", [x, f"layers.{i}.up"], [f"{at}/up"], name=f"{at}/up/MatMul"),
            helper.make_node("Relu", [f"{at}/up"], [f"{at}/relu"], name=f"{at}/Relu"),
            helper.make_node("MatMul", [f"{at}/relu", f"layers.{i}.down"], [f"{at}/down"], name=f"{at}/down/MatMul"),
            helper.make_node("Add", [x, f"{at}/down"], [f"{at}/out"], name=f"{at}/Add"),
        ]
        x = f"{at}/out"
    nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    graph = helper.make_graph(nodes, "residual_mlp",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", width])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return f"{layers} residual MLP blocks, {width} -> {4 * width} -> {width}, float32"


def seconds(run: Callable[..., object], *args, **kwargs) -> float:
    start = time.perf_counter()
    run(*args, **kwargs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--parts", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    x = np.random.default_rng(1).standard_normal((args.batch, args.width), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "mlp.onnx"
        title = residual_mlp(model, args.layers, args.width)
        cases = {}  # parts M (0: the startup floor, a batch of one row): its split and feeds
        for m in [*args.parts, 0]:
            folder = Path(tmp) / f"m{m}"
            split_model(model, folder, stages=STAGES, dims={"batch": args.batch // m if m else 1})
            convert(folder)
            cases[m] = (folder, {"x": x} if m else {"x": x[:1]}, max(m, 1))
            whole = run_split(cases[m][0], cases[m][1], micro_batches=cases[m][2])
            mpi = run_mpi(cases[m][0], cases[m][1], STAGES, micro_batches=cases[m][2])
            assert all(np.array_equal(whole["y"], out["y"]) for out in mpi), "the MPI processes differ"
        times: dict[int, tuple[list[float], list[float]]] = {m: ([], []) for m in cases}
        for _ in range(args.runs):  # every case in turn, each round: the machine's noise falls on all of them
            for m, (folder, feeds, parts) in cases.items():
                times[m][0].append(seconds(run_mpi, folder, feeds, STAGES, micro_batches=parts))
                times[m][1].append(seconds(run_split, folder, feeds, micro_batches=parts))
    rows = [(m, statistics.median(a), statistics.median(b)) for m, (a, b) in times.items()]
    floor = rows[-1][1]
    base = rows[0][1] - floor
    print(f"{title}; batch {args.batch}; {STAGES} stages; median of {args.runs}; BLAS on one thread a process")
    print(f"{'parts M':>8} {'steps':>6} {'ideal':>6} {'MPI s':>7} {'- startup':>10} {'x M=1':>6} "
          f"{'one process s':>14}")
    for m, mpi_s, one_s in rows:
        if not m:
            print(f"{'startup':>8} {'':>6} {'':>6} {mpi_s:>7.2f} {'':>10} {'':>6} {one_s:>14.2f}")
            continue
        ideal = (m + STAGES - 1) / (m * STAGES)
        print(f"{m:>8} {m + STAGES - 1:>6} {ideal:>6.3f} {mpi_s:>7.2f} {mpi_s - floor:>10.2f} "
              f"{(mpi_s - floor) / base:>6.3f} {one_s:>14.2f}")


if __name__ == "__main__":
    main()
