"""Options users set with a command-line flag, each declared once: as a
field of its options record (`CompileOptions`, `CheckOptions`) carrying the
flag, its help and the rules it keeps. A tool's parser and the values it
reads back are made from those fields (`add_flags`, `flag_values`), so a
new flag is one field."""

from __future__ import annotations

import argparse
from dataclasses import Field, field, fields
from typing import Any

from forge_opt.diagnostics import ForgeOptError

#: the sections of a tool's help a flag is listed in
JUDGING, COMPILING, DEVICES, DECODING, EXECUTING = (
    "how outputs are judged", "what is compiled", "several devices", "decoding", "what runs the program")


def option(flag: str, default, needs: tuple[str, str] | None = None, *, help: str = "", group: str = "",
           metavar: str | None = None, choices: tuple[str, ...] | None = None, kind: type | None = None,
           least: tuple[int, str] | None = None):
    """A field users set with `flag`.

    needs: the field of the same record it goes with, and what to say when
    it is alone. help: its help in a tool's `group` (without help, a tool
    declares the flag itself, as `--emit` gives a file's stem). kind: the
    type its text is read as (the default's type unless given). least: the
    smallest value the flag takes, and why."""
    return field(default=default, metadata={
        "flag": flag, "needs": needs, "help": help, "group": group, "metavar": metavar, "choices": choices,
        "kind": kind, "least": least})


def _generated(record) -> list[Field]:
    """The record's fields a tool's parser is made from."""
    return [f for f in fields(record) if f.metadata.get("help")]


def add_flags(parser: argparse.ArgumentParser, groups: dict[str, Any], *records) -> None:
    """Add each flag of `records` to its group, by title (made on first
    use); a flag not given reads as None."""
    for f in (f for record in records for f in _generated(record)):
        m = f.metadata
        if m["group"] not in groups:
            groups[m["group"]] = parser.add_argument_group(m["group"])
        spelled: dict[str, Any] = {"dest": f.name, "help": m["help"]}
        if isinstance(f.default, bool):
            spelled["action"] = "store_true"
        else:  # a repeatable flag's values are read as text unless told
            repeated = isinstance(f.default, tuple)
            spelled |= {"type": m["kind"] or (str if repeated else type(f.default)), "metavar": m["metavar"],
                        "choices": m["choices"], **({"action": "append"} if repeated else {})}
        groups[m["group"]].add_argument(m["flag"], **spelled)


def flag_values(args: argparse.Namespace, record) -> dict[str, Any]:
    """The record's fields the parsed `args` give, by name, each at least
    its flag's least value."""
    values = {}
    for f in _generated(record):
        value = getattr(args, f.name)
        if value is None or value is False:
            continue
        least = f.metadata["least"]
        if least is not None and value < least[0]:
            raise ForgeOptError(f"{f.metadata['flag']} {value}: {least[1]}")
        values[f.name] = tuple(value) if isinstance(f.default, tuple) else value
    return values
