"""Write `docs/executors.md`: every model of `tests/data/models` and every
example, checked by forge-check on the Forge stand-in and on XLA CPU (the
program's StableHLO form, `--executor xla`), and its StableHLO compiled by
the real tt-mlir of jax-tt-plugin for a mock Blackhole p150 (`--tt-mlir`).

    python -m forge_opt.tools.gen_executors                  # write (from the repository's root)
    python -m forge_opt.tools.gen_executors --check          # exit 1 if the page is stale
    python -m forge_opt.tools.gen_executors --check --no-tt-mlir   # the executors' columns only

A full run compiles every program with tt-mlir (about 6 s each on 2 cores).
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

from forge_opt.check.model import check_model
from forge_opt.check.report import NOT_COMPILED, VERDICTS
from forge_opt.check.split import check_fallback, check_parallel
from forge_opt.tools.generated_file import generator_main

#: relative to the repository's root, where the generator runs
PAGE = Path("docs") / "executors.md"
MODELS = [*sorted(Path("tests/data/models").glob("*.onnx")), *sorted(Path("examples").glob("*.onnxtxt"))]
#: the sizes given to symbolic dims, by name: a decode step of 4 new tokens over 3 cached, a source of 6
#: tokens, a 64x64 RGB image, a split's width of 8, 2 prompt points
DIMS = {
    "batch": 1, "batch_size": 1, "sequence": 16, "sequence_length": 4, "past_sequence_length": 3,
    "encoder_sequence_length": 6, "decoder_sequence_length": 1, "past_decoder_sequence_length": 3,
    "num_channels": 3, "height": 64, "width": 64, "point_batch_size": 1, "nb_points_per_image": 2,
}
SPLITS_WIDTH = {"splits_opset13", "splits_opset18"}  # their `width` is a split's: 8


def dims_of(path: Path) -> dict[str, int]:
    """The sizes of the model's symbolic input dims, from `DIMS`."""
    model = onnx.load(path, load_external_data=False) if path.suffix == ".onnx" else None
    if model is None:
        return {}
    names = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    names = {n for n in names if re.fullmatch(r"\w+", n)}
    sizes = {n: DIMS[n] for n in names if n in DIMS}
    if path.stem in SPLITS_WIDTH:
        sizes["width"] = 8
    return sizes


def _cell(report) -> str:
    if report.status == NOT_COMPILED:
        return f"did not compile: {_short(report.error)}"
    return VERDICTS[report.status]


def _short(text: str) -> str:
    line = (text or "").splitlines()[0] if text else ""
    return line.replace("|", "\\|")[:110]


def tt_mlir_cell(path: Path, dims: dict[str, int], split: bool = False, devices: int = 1) -> str:
    """tt-mlir on the model's one program (on `devices`, its SPMD program
    for a mock of that many chips), or (`split`) on each device sub-model
    of its split."""
    from forge_opt.api import compile_onnx
    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.execution.tt_mlir import compile_stablehlo
    from forge_opt.plan.folder import read_split
    from forge_opt.plan.graph_infos import DEVICE
    from forge_opt.split.api import split_model
    from forge_opt.targets.stablehlo import stablehlo_text

    with tempfile.TemporaryDirectory() as folder:
        try:
            if split:
                split_model(str(path), Path(folder) / "split", dims=dims or None)
                sources = [str(g.model_path) for infos in sorted((Path(folder) / "split").rglob("graph_infos.json"))
                           for g in read_split(infos.parent)[1] if g.device == DEVICE and not g.subgraphs]
            else:
                sources = [str(path)]
            pipeline = f"onnx-to-forge{{devices={devices}}}" if devices > 1 else "onnx-to-forge"
            texts = [stablehlo_text(compile_onnx(s, pipeline=pipeline, dims=None if split else dims or None))
                     for s in sources]
        except ForgeOptError as e:
            return f"no program: {_short(str(e))}"
        results = [compile_stablehlo(text, Path(folder) / f"tt_{i}") for i, text in enumerate(texts)]
    rejected = [r for r in results if not r.compiled]
    if rejected:
        return f"rejected: {_short(rejected[0].diagnostic)}"
    return f"compiled ({len(results)} device sub-model{'' if len(results) == 1 else 's'})" if split else "compiled"


def row(path: Path, tt_mlir: bool) -> str:
    dims = dims_of(path)
    with np.errstate(all="ignore"):
        standin = check_model(str(path), dims=dims or None)
        xla = check_model(str(path), dims=dims or None, executor="xla")
        split = standin.status == NOT_COMPILED
        if split:  # control flow or NMS: the device sub-models of its split, each on the executor
            standin = check_fallback(str(path), dims=dims or None)
            xla = check_fallback(str(path), dims=dims or None, executor="xla")
    agree = "yes" if standin.status == xla.status else "**no**"
    if standin.status == xla.status == NOT_COMPILED:
        agree = "–"
    sized = ", ".join(f"{k}={v}" for k, v in sorted(dims.items())) or "–"
    two = "–"
    if xla.status != NOT_COMPILED and not split:
        with np.errstate(all="ignore"):
            two = _cell(check_parallel(str(path), 2, dims=dims or None, executor="xla"))
    how = " (`--fallback`)" if split else ""
    cells = [f"`{path.as_posix()}`", sized, _cell(standin) + how, _cell(xla) + how, agree, two]
    if tt_mlir:
        cells.append(tt_mlir_cell(path, dims, split) if xla.status != NOT_COMPILED else "–")
        cells.append(tt_mlir_cell(path, dims, devices=2) if two != "–" and not two.startswith("did not") else "–")
    return "| " + " | ".join(cells) + " |"


def page(tt_mlir: bool = True) -> str:
    return render([row(p, tt_mlir) for p in MODELS], tt_mlir)


def render(rows: list[str], tt_mlir: bool = True) -> str:
    """The page around its table's rows."""
    header = ["model", "dims", "stand-in", "XLA CPU", "agree", "XLA CPU, 2 devices",
              *(["tt-mlir (Blackhole p150 mock)", "tt-mlir, 2 chips"] if tt_mlir else [])]
    lines = [
        "# Executors: the stand-in, XLA CPU and tt-mlir",
        "",
        "Generated by `python -m forge_opt.tools.gen_executors` (a test fails when its executor columns are",
        "stale). Each model is checked by `forge-check` against onnxruntime twice, with the same verdict:",
        "its Forge Python on the Forge stand-in, and its StableHLO form (`forge-opt -t stablehlo`) on XLA",
        "CPU (`--executor xla`, jaxlib); then its 2-device program (`--devices 2 --executor xla`), one",
        "SPMD StableHLO module on 2 virtual XLA devices. The last two columns are the real tt-mlir compiler",
        "(jax-tt-plugin 0.1.3) lowering the one-device StableHLO (of each device sub-model, for a split) to",
        "TTIR and TTNN for a mock Blackhole p150 (`--tt-mlir`), then the 2-device SPMD module for a mock of",
        "two p150s joined by ethernet; the mock computes nothing, so it says whether Tenstorrent's compiler",
        "takes the program, not what it computes. Symbolic dims are sized as the `dims` column says; inputs are",
        "forge-check's seeded random ones. A model that does not compile on one device (control flow",
        "known only at run time, NMS) is checked with `--fallback`: split, its device sub-models run by",
        "the executor (on XLA, each compiled again to StableHLO), the rest by onnxruntime.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *rows,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--no-tt-mlir" in argv:  # the test's check: the executors' columns (tt-mlir takes minutes)
        argv.remove("--no-tt-mlir")
        if argv != ["--check"]:
            raise SystemExit("--no-tt-mlir goes with --check alone")
        current = PAGE.read_text() if PAGE.exists() else ""
        if without_last_column(current) == page(tt_mlir=False):
            return 0
        print(f"{PAGE}'s executor columns are out of date: run python -m forge_opt.tools.gen_executors")
        return 1
    return generator_main(__doc__, PAGE, page, "forge_opt.tools.gen_executors", argv)


def without_last_column(text: str, count: int = 2) -> str:
    """The page with its tables' last `count` columns (tt-mlir's) dropped."""
    lines = []
    for line in text.splitlines():
        if line.startswith("|---"):
            line = line[: -len("---|") * count]
        elif line.startswith("| "):
            line = line.rsplit(" | ", count)[0] + " |"
        lines.append(line)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
