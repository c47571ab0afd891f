"""Generate `frontends/onnx/lowered_ops.py`: the ONNX op types that have a
lowering (`transforms/onnx_lowerings`), which the importer reads to expand
the function body of every other op, without importing the passes above it.

    python -m forge_opt.tools.gen_lowered_ops            # rewrite the file
    python -m forge_opt.tools.gen_lowered_ops --check    # exit 1 if stale
"""

from __future__ import annotations

import sys
from pathlib import Path

from forge_opt.tools.generated_file import generator_main

OUTPUT = Path(__file__).resolve().parent.parent / "frontends" / "onnx" / "lowered_ops.py"


def generate() -> str:
    from forge_opt.transforms.onnx_lowerings.table import ONNX_LOWERINGS

    names = sorted({getattr(cls, "ONNX_OP_TYPE", "") for cls in ONNX_LOWERINGS} - {""})
    lines = [
        '"""The ONNX op types forge-opt lowers, generated from `transforms/onnx_lowerings` by',
        "`python -m forge_opt.tools.gen_lowered_ops` (a test fails when it is stale). The importer",
        "expands the function body of any other op that has one (`functions.py`); a table of names,",
        'so that the frontend imports nothing from the passes above it."""',
        "",
        "LOWERED_OPS = frozenset({",
        *(f'    "{name}",' for name in names),
        "})",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return generator_main(__doc__, OUTPUT, generate, "forge_opt.tools.gen_lowered_ops", argv)


if __name__ == "__main__":
    sys.exit(main())
