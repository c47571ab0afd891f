"""One error type for everything a user can get wrong, and how ops are named
in messages (by the ONNX node they came from)."""

from __future__ import annotations

from xdsl.dialects.builtin import NameLoc, StringAttr, UnknownLoc
from xdsl.ir import Operation


class ForgeOptError(Exception):
    """A user error: a bad model, an unsupported op, an illegal attribute.

    Tools print it as one line (`forge-opt: error: ...`) and exit non-zero.
    """


def node_name(op: Operation) -> str | None:
    """The ONNX node name an op was imported from or lowered from."""
    loc = op.location
    if isinstance(loc, NameLoc):
        return loc.desc.data
    return None


def describe(op: Operation) -> str:
    """`node 'split1' (onnx.Split)`, or just the op name when there is no node."""
    name = node_name(op)
    return f"node '{name}' ({op.name})" if name else f"'{op.name}'"


def text(name: str | bytes) -> str:
    """A name as text: protobuf hands back bytes for invalid UTF-8."""
    return name.decode("utf-8", errors="replace") if isinstance(name, bytes) else name


_UNKNOWN = UnknownLoc()


def name_loc(name: str | bytes) -> NameLoc:
    """`NameLoc(StringAttr(name), UnknownLoc())`, without re-verifying its
    parameters, which are right by construction: every imported op gets
    one, and verifying them is most of what building one costs."""
    desc = object.__new__(StringAttr)
    object.__setattr__(desc, "data", text(name))
    loc = object.__new__(NameLoc)
    object.__setattr__(loc, "desc", desc)
    object.__setattr__(loc, "location", _UNKNOWN)
    return loc
