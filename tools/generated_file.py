"""The command line of a generator of a checked-in source file: write it,
or (`--check`) exit 1 when the file differs from what it would write."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from forge_opt.files import write_text


def generator_main(
    doc: str | None, output: Path, generate: Callable[[], str], module: str, argv: list[str] | None
) -> int:
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        if not output.exists() or output.read_text() != text:
            print(f"{output} is out of date: run python -m {module}")
            return 1
        return 0
    write_text(output, text)  # whole or not at all, never through a link (`files`)
    return 0
