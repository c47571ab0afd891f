"""A JSON object as a typed record and back, read from the record's own
field annotations: `graph_infos.py`'s records state their format once, and
this writes and reads it (a field's JSON key is its name, or its
`metadata["key"]` where the name is a Python keyword; a field that is None
is left out). What refers to what (a tensor a graph reads, a cache's
present output) is the caller's to check.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")

#: each record's field types, read once (a plan has a record per collective and per layer)
_hints = functools.cache(typing.get_type_hints)


def key(f: dataclasses.Field) -> str:
    return f.metadata.get("key", f.name)


def to_json(record: Any) -> dict[str, Any]:
    """The record's JSON object: each field that is not None, records nested
    in it written the same way."""
    out = {}
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if value is not None:
            out[key(f)] = _json_value(value)
    return out


def _json_value(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


class Reader:
    """Reads records, each error made by `fail` and naming where in the file
    (`collectives[0]`, `graphs[2].loop.body`) it is."""

    def __init__(self, fail: Callable[[str], Exception]):
        self.fail = fail

    def record(self, kind: type[R], entry: Any, where: str, extra: bool = False) -> R:
        """A `kind` from `entry`: every field without a default present, each
        of its annotated type; a key of no field refused unless `extra`."""
        if not isinstance(entry, dict):
            raise self.fail(f"{where} must be an object")
        fields = {key(f): f for f in dataclasses.fields(kind)}  # type: ignore[arg-type]
        unknown = sorted(set(entry) - set(fields))
        if unknown and not extra:
            raise self.fail(f"{where}: unknown field '{unknown[0]}'")
        hints = _hints(kind)
        values = {}
        for name, f in fields.items():
            if name in entry:
                values[f.name] = self.value(hints[f.name], entry[name], where, name)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise self.fail(f"{where}: the field '{name}' is missing")
        return kind(**values)

    def value(self, hint: Any, value: Any, where: str, name: str) -> Any:
        """`value` as `hint` types it: a record, a list or map of them, or
        one of the JSON scalars (an int never a bool)."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            if value is None and type(None) in args:
                return None
            kinds = [a for a in args if a is not type(None)]
            if len(kinds) == 1:
                return self.value(kinds[0], value, where, name)
            return self.scalar(tuple(kinds), value, where, name)
        if origin is list:
            if not isinstance(value, list):
                raise self.fail(f"{where}: '{name}' is {value!r}, not a list")
            if dataclasses.is_dataclass(args[0]):
                return [self.record(args[0], v, f"{where}.{name}[{i}]")  # type: ignore[arg-type]
                        for i, v in enumerate(value)]
            return [self.value(args[0], v, where, name) for v in value]
        if origin is dict:
            if not isinstance(value, dict):
                raise self.fail(f"{where}: '{name}' is {value!r}, not an object")
            return {k: self.value(args[1], v, where, f"{name}.{k}") for k, v in value.items()}
        if dataclasses.is_dataclass(hint):
            return self.record(hint, value, f"{where}.{name}")  # type: ignore[arg-type]
        return self.scalar((hint,), value, where, name)

    def scalar(self, kinds: tuple, value: Any, where: str, name: str) -> Any:
        if type(value) not in kinds:  # `type`, not isinstance: True is no int here
            raise self.fail(f"{where}: '{name}' is {value!r}, not {' or '.join(k.__name__ for k in kinds)}")
        return value
