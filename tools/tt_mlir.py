"""`python -m forge_opt.tools.tt_mlir PROGRAM.mlir [--dumps DIR]`: compile a
StableHLO module (`forge-opt MODEL -p onnx-to-forge -t stablehlo -o
PROGRAM.mlir`) with the real tt-mlir of jax-tt-plugin for a mock Blackhole
p150. Prints whether it lowered to TTNN, or tt-mlir's first diagnostic with
the op it points at; exit 0 compiled, 1 not, 2 a usage error. The TTIR and
TTNN dumps go to DIR (default: PROGRAM's name + _tt_mlir)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from forge_opt.diagnostics import ForgeOptError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m forge_opt.tools.tt_mlir",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("program", help="a StableHLO module, as forge-opt -t stablehlo prints it")
    parser.add_argument("--dumps", metavar="DIR", help="where tt-mlir's IR dumps go")
    args = parser.parse_args(argv)
    from forge_opt.execution.tt_mlir import compile_stablehlo

    program = Path(args.program)
    try:
        text = program.read_text()
    except OSError as e:
        print(f"tt_mlir: error: {args.program}: {e.strerror}", file=sys.stderr)
        return 2
    dumps = Path(args.dumps) if args.dumps else program.with_name(program.stem.split(".")[0] + "_tt_mlir")
    try:
        result = compile_stablehlo(text, dumps)
    except ForgeOptError as e:
        print(f"tt_mlir: error: {e}", file=sys.stderr)
        return 2
    print(result.line() + (f"; its IR in {dumps}" if result.dumps else ""))
    return 0 if result.compiled else 1


if __name__ == "__main__":
    sys.exit(main())
