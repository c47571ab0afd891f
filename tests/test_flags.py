"""A flag is declared once, as a field of its options record: the tool's
parser and the values read back are made from the fields (`flags.py`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields

import pytest

from forge_opt.check.options import CheckOptions
from forge_opt.diagnostics import ForgeOptError
from forge_opt.flags import add_flags, flag_values, option
from forge_opt.transforms.compile_options import CompileOptions


@dataclass(frozen=True)
class _Options:
    count: int = option("--count", 1, group="g", metavar="N", least=(2, "count at least two"), help="how many")
    names: tuple[str, ...] = option("--name", (), group="g", help="repeatable")
    quiet: bool = option("--quiet", False, group="h", help="say less")
    size: int | str = option("--size", 0, group="h", kind=str, help="a size")
    mode: str = option("--mode", "a", group="h", choices=("a", "b"), help="a choice")
    stem: str = option("--emit", "")  # no help: the tool declares it


def _parsed(argv: list[str]) -> tuple[argparse.Namespace, dict]:
    parser = argparse.ArgumentParser()
    groups: dict = {}
    add_flags(parser, groups, _Options)
    return parser.parse_args(argv), groups


def test_each_field_with_help_is_a_flag_in_its_group():
    args, groups = _parsed([])
    assert list(groups) == ["g", "h"]
    assert [a.dest for a in groups["g"]._group_actions] == ["count", "names"]
    assert flag_values(args, _Options) == {}  # nothing given: every field at its default
    assert not hasattr(args, "stem")


def test_flag_values_are_typed_as_the_fields():
    args, _ = _parsed(["--count", "3", "--name", "x", "--name", "y", "--quiet", "--size", "2MiB", "--mode", "b"])
    assert flag_values(args, _Options) == {"count": 3, "names": ("x", "y"), "quiet": True, "size": "2MiB",
                                           "mode": "b"}
    with pytest.raises(SystemExit):
        _parsed(["--mode", "c"])


def test_a_value_below_the_least_is_named():
    args, _ = _parsed(["--count", "1"])
    with pytest.raises(ForgeOptError, match=r"^--count 1: count at least two$"):
        flag_values(args, _Options)


def test_every_flag_of_the_check_is_declared_once():
    """forge-check's parser holds each flagged option with help once; only
    `--emit` (a file whose stem the options keep) is declared by hand."""
    from forge_opt.tools.forge_check import argument_parser

    declared = [s for a in argument_parser()._actions for s in a.option_strings]
    flagged = [f for record in (CheckOptions, CompileOptions) for f in fields(record) if "flag" in f.metadata]
    assert len(declared) == len(set(declared))
    assert {f.metadata["flag"] for f in flagged if f.metadata["help"]} <= set(declared)
    assert [f.metadata["flag"] for f in flagged if not f.metadata["help"]] == ["--emit", "--min-device-ops"]
