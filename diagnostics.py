"""One error type for everything a user can get wrong, and how ops are named
in messages (by the ONNX node they came from)."""

from __future__ import annotations

from xdsl.dialects.builtin import NameLoc
from xdsl.ir import Operation

from forge_opt import xdsl_internals


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


def name_loc(name: str | bytes) -> NameLoc:
    """The location of an op imported from the ONNX node or value `name`."""
    return xdsl_internals.name_loc(text(name))
