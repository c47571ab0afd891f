"""What the benchmark scripts share: timing whole processes (wall time and
peak RSS) against the `onnx.load` floor, and timing the compile's stages in
this process."""

from __future__ import annotations

import gc
import statistics
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

# The child measures itself; peak RSS from VmHWM (ru_maxrss would keep the
# forked parent's peak across exec). It reports at exit, and `forge-opt`
# ends its process with `os._exit`, which skips exit handlers, so from there too.
_MEASURE = """
import atexit, os, sys, time
t = time.perf_counter()
def report():
    if report.done:
        return
    report.done = True
    hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(time.perf_counter() - t, int(hwm.split()[1]) / 1024, file=sys.stderr, flush=True)
report.done = False
def report_and_exit(code, _exit=os._exit):
    report()
    _exit(code)
os._exit = report_and_exit
atexit.register(report)
{body}
"""

FLOOR = "import onnx\nonnx.load(sys.argv[1])"
# `forge-opt` as its console script runs it
_FORGE_OPT = "from forge_opt.tools.forge_opt import main\nsys.argv = ['forge-opt', sys.argv[1], {args}]\nmain()"
IMPORT = _FORGE_OPT.format(args="'-o', '/dev/null'")
COMPILE = (
    "import tempfile\n"
    "out = os.path.join(tempfile.mkdtemp(), 'model.py')\n"
    + _FORGE_OPT.format(args="'-p', 'onnx-to-forge', '-t', 'forge-python', '-o', out")
)
PROCESSES = {"onnx.load (floor)": FLOOR, "forge-opt import": IMPORT, "forge-opt to Forge": COMPILE}


def importing(checkout: Path, folder: Path) -> str:
    """Lines that make a process body import forge_opt from `checkout` (the
    repository's root is the package), through a link in `folder`."""
    folder.mkdir()
    (folder / "forge_opt").symlink_to(checkout.resolve(), target_is_directory=True)
    return (f"sys.path.insert(0, {str(folder)!r})\nimport forge_opt\n"
            f"assert forge_opt.__file__.startswith({str(folder)!r}), forge_opt.__file__\n")


def whole_process(body: str, model: Path, *args: str) -> tuple[float, float]:
    """Wall seconds (interpreter start to exit) and peak RSS in MB; `body`
    reads the model's path as `sys.argv[1]` and `args` after it."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE.format(body=body), str(model), *args], capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    _, rss = proc.stderr.strip().splitlines()[-1].split()
    return wall, float(rss)


def medians(body: str, model: Path, runs: int) -> tuple[float, float, float]:
    """Median wall seconds, median peak RSS in MB, and the fastest wall
    seconds (the least disturbed run on a shared machine)."""
    samples = [whole_process(body, model) for _ in range(runs)]
    walls = [s[0] for s in samples]
    return statistics.median(walls), statistics.median(s[1] for s in samples), min(walls)


def stages(path: Path) -> dict[str, float]:
    """Seconds per stage of `forge-opt PATH -p onnx-to-forge -t forge-python`
    in this process, with the cyclic GC off as forge-opt runs."""
    from forge_opt.frontends import onnx as importer
    from forge_opt.targets.forge_python import emit_module
    from forge_opt.transforms.pipelines import OnnxToForgePass
    from forge_opt.universe import make_context

    times: dict[str, float] = {}

    def timed(label, fn):
        start = time.perf_counter()
        result = fn()
        times[label] = time.perf_counter() - start
        return result

    collecting = gc.isenabled()
    gc.disable()
    try:
        model, base, weights = timed("load", lambda: importer.load_model_lazily(path))
        inferred = timed("shape inference", lambda: importer.infer_types(model))
        module = timed(
            "import", lambda: importer.ModuleOp([importer.Importer(model, base, inferred, weights).import_main()])
        )
        timed("verify", module.verify)
        ctx = make_context()
        for p in OnnxToForgePass().passes():
            timed(p.name, lambda p=p: p.apply(ctx, module))
        start = time.perf_counter()
        module.verify()
        times["verify"] += time.perf_counter() - start
        timed("emit", lambda: StringIO(emit_module(module).source))
    finally:
        if collecting:
            gc.enable()
    return times


def print_stages(rows: list[tuple[str, dict[str, float]]]) -> None:
    labels = list(rows[0][1])
    width = max(len(name) for name, _ in rows)
    print("\nin-process stages, seconds (verify: before and after the passes, as forge-opt does)")
    print(f"{'':<{width}} " + " ".join(f"{label:>15}" for label in labels))
    for name, times in rows:
        print(f"{name:<{width}} " + " ".join(f"{times[label]:>15.2f}" for label in labels))
