"""Where a pipeline's stages are cut: S - 1 positions in a graph's nodes
in order, chosen from what each node stores and what crosses each position.
forge-split (`split/stages.py`, on ONNX nodes) and
`partition-for-forge{stages}` (on the IR's ops) cut by this one rule:
where a layer starts, when the node names say where (`layers.N`, `h.N`,
`blocks.N`, as exporters name them), balancing the weights each stage
stores: cut k at the candidate whose share of the weights before it is
nearest k/S, the fewer activation bytes crossing the cut breaking a tie.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.names import layer_key


@dataclass
class StageInfo:
    nodes: int
    layers: str  # "0-5" (a CNN's "1.0-2.1"), or "" where the names give none
    weight_bytes: int
    sent_bytes: int  # activations sent to later stages


@dataclass
class Cut:
    """Where stage boundaries fall among the placed nodes (positions into
    their list: stage k runs `nodes[cuts[k-1]:cuts[k]]`), and the stages
    made (`stage_infos`)."""

    positions: list[int]
    how: str  # where the cuts fall: "where a layer starts", "between nodes", "as the annotations place them"
    stages: list[StageInfo] = field(default_factory=list)


def choose_cuts(names: Sequence[str], weight: Sequence[int], crossing: Sequence[int], stages: int,
                asked: str) -> Cut:
    """S - 1 cut positions into a graph's nodes in order (`names`), given
    the weight bytes each stores (`weight`) and, for each position c, the
    activation bytes nodes[:c] make and nodes[c:] read (`crossing`);
    `asked`: the flag or option that asked, as errors name it."""
    if len(names) < stages:
        raise ForgeOptError(f"{asked}: the model has {len(names)} nodes to run, fewer than the stages")
    before = np.concatenate([[0], np.cumsum(weight)])  # weights of nodes[:c]
    starts, highest = [], ()  # where a layer later than any before starts
    for c, layer in enumerate(layer_key(name) for name in names):
        if layer is not None and layer > highest:
            starts += [c] if c else []
            highest = layer
    candidates = starts if len(starts) >= stages - 1 else list(range(1, len(names)))
    total = float(before[-1]) or 1.0
    cuts: list[int] = []
    for k in range(1, stages):
        # a cut that leaves the later cuts a candidate each, and each stage a node
        later = [c for n, c in enumerate(candidates) if c > (cuts[-1] if cuts else 0)
                 and len(candidates) - n > stages - 1 - k and len(names) - c >= stages - k]
        if not later:
            raise ForgeOptError(f"{asked}: the model has no {stages - 1} places to cut it")
        target = total * k / stages
        cuts.append(min(later, key=lambda c: (abs(before[c] - target), crossing[c])))
    return Cut(cuts, "where a layer starts" if candidates is starts else "between nodes")


def crossing_bytes(count: int, lives: Iterable[tuple[int, int, int]]) -> list[int]:
    """For each cut position c among `count` nodes, the bytes alive across
    it: of each value made at one position, last read at another, of a size."""
    delta = [0] * (count + 1)
    for made, last, size in lives:
        if last > made:  # alive across the cuts made + 1 .. last
            delta[made + 1] += size
            delta[last + 1] -= size
    return [int(v) for v in np.cumsum(delta)]
