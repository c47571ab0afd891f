"""One layout a weight. An unrolled recurrence reads its recurrence weight
once a step, a model sharing weights across layers (ALBERT) once a layer;
each device should store one block of it, however many ops read it.

Where the readers of a model weight would take different cases, a first
walk (`annotate`, on a copy of the program) takes the case most of them
take by Megatron's pairing (column where a reader's output is taken apart
into parts, as a recurrence's gates are: packing needs it), and every
reader follows it where its input allows (a split input gathered, a
replicated one sliced): ALBERT's first layer then pays one all-gather, its
other layers none. Other weights keep the case their first reader chose. A
reader that cannot follow (pinned, or its input split along another axis)
keeps its own case, and its reason in the report says that the
weight is stored in two layouts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from xdsl.ir import Operation, SSAValue

from forge_opt.dialects import tir
from forge_opt.plan.graph_infos import COLUMN, REPLICATE, ROW
from forge_opt.transforms.tp.rules import REPLICATED, Sharding, split, weight_chain

#: a weight as its readers see it: the constant (a model weight by its name, as a copy of the program
#: names it too), and what lays it out (each op's name, properties and index)
Key = tuple[object, tuple[tuple[str, str, str], ...]]


def layout_key(v: SSAValue) -> Key | None:
    """The constant `v` is laid out from and how (`rules.weight_chain`,
    compared by what each op does: two Gemms' `transB` transposes of one
    initializer read it alike); None for a weight dequantized on the way."""
    chain = weight_chain(v)
    if chain is None:
        return None
    steps = []
    for value in chain[:-1]:
        op = value.owner
        if isinstance(op, tir.BinaryOp):
            return None
        assert isinstance(op, Operation)
        index = str(cast(tir.ConstantOp, op.indices.owner).value) if isinstance(op, tir.GatherOp) else ""
        steps.append((op.name, str(sorted((k, str(a)) for k, a in op.properties.items())), index))
    root = cast(tir.ConstantOp, chain[-1].owner)
    return (root.weight_name.data if root.weight_name is not None else root, tuple(steps))


def _stored(case: str, packed: int) -> str:
    return "whole" if case == REPLICATE else f"{case}-split" + (f" in {packed} packed parts" if packed else "")


@dataclass
class WeightLayouts:
    """The layout each weight is stored in so far, and by which reader;
    the layouts chosen for weights read several times (`settled`)."""

    chosen: dict[Key, tuple[str, int, str]] = field(default_factory=dict)  # (case, packed parts, first reader)
    preferred: dict[Key, str] = field(default_factory=dict)  # a case for all readers (`settled`)
    following: bool = True  # False on the first walk: each reader's own case
    cases: dict[Key, list[str]] = field(default_factory=dict)  # the readers' own cases, on the first walk
    packed: set[Key] = field(default_factory=set)  # weights a reader's output is taken apart from

    def note(self, weight: SSAValue, case: str, parts: bool) -> None:
        """On the first walk: a reader's own case, and whether its output is taken apart into parts."""
        key = layout_key(weight)
        if self.following or key is None:
            return
        self.cases.setdefault(key, []).append(case)
        if parts:
            self.packed.add(key)

    def settled(self) -> dict[Key, str]:
        """After the first walk: for each weight whose readers disagreed, the case for all."""
        chosen = {}
        for key, cases in self.cases.items():
            if COLUMN in cases and ROW in cases:
                column = key in self.packed or cases.count(COLUMN) >= cases.count(ROW)
                chosen[key] = COLUMN if column else ROW
        return chosen

    def follow(self, weight: SSAValue, x: Sharding, last: int) -> tuple[str, str] | None:
        """The case (and why) that keeps `weight` in the layout it has,
        for a Linear whose input `x` would lead it elsewhere at no more than
        a gather: column with its input (split along `last`) all-gathered,
        or row with its input (replicated) sliced."""
        key = layout_key(weight)
        if not self.following or key is None:
            return None
        if key in self.preferred:
            case = self.preferred[key]
            if case == COLUMN and x == split(last):
                return COLUMN, "its weight is column-split for all its readers: its input all-gathered"
            if case == ROW and x == REPLICATED:
                return ROW, "its weight is row-split for all its readers: its input sliced"
            return None
        if key not in self.chosen:
            return None
        case, _, reader = self.chosen[key]
        if case == COLUMN and x == split(last):
            return COLUMN, f"its weight is column-split for {reader}: one block a device, its input all-gathered"
        if case == ROW and x == REPLICATED:
            return ROW, f"its weight is row-split for {reader}: one block a device, its input sliced"
        return None

    def record(self, weight: SSAValue, case: str, packed: int, reader: str) -> str:
        """Note `weight`'s layout for this reader; a note for its reason if
        the weight was stored otherwise for an earlier one."""
        key = layout_key(weight)
        if key is None:
            return ""
        first = self.chosen.setdefault(key, (case, packed, reader))
        if first[:2] == (case, packed):
            return ""
        return f"; its weight is also stored {_stored(*first[:2])} for {first[2]} (two layouts a device)"


def read_twice(weights: list[SSAValue]) -> bool:
    """Whether two of these Linears' weights are one weight laid out alike."""
    keys = [key for w in weights if (key := layout_key(w)) is not None]
    return len(set(keys)) < len(keys)
