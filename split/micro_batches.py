"""Micro-batches: a batch cut along axis 0 (the batch axis of every input
and output, as exporters lay them out) into M equal parts that run one
after another through a split, and the parts' outputs joined back. Through
a pipeline under MPI, stage k works on part m while stage k + 1 works on
part m - 1: M + S - 1 steps instead of M·S."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from forge_opt.diagnostics import ForgeOptError


def micro_shapes(shapes: Mapping[str, Sequence[int]], parts: int) -> dict[str, tuple[int, ...]]:
    """Each input's shape for one of `parts` micro-batches: its axis 0 divided."""
    out = {}
    for name, shape in shapes.items():
        if not shape or shape[0] < 1 or shape[0] % parts:
            raise ForgeOptError(f"--micro-batches {parts}: input '{name}' of shape {list(shape)} has no batch axis "
                                f"that {parts} divides (axis 0)")
        out[name] = (shape[0] // parts, *shape[1:])
    return out


def cut_inputs(shapes: Mapping[str, Sequence[int]], inputs: Mapping[str, np.ndarray],
               parts: int) -> list[dict[str, np.ndarray]]:
    """`inputs` as `parts` micro-batches of the split's input `shapes`:
    each input whose axis 0 is `parts` times the split's, cut along it."""
    cut: list[dict[str, np.ndarray]] = [{} for _ in range(parts)]
    for name, x in inputs.items():
        want = shapes.get(name)
        if want is None:  # not read by the split
            continue
        x = np.asarray(x)
        if x.ndim == len(want) >= 1 and x.shape[0] == parts * want[0] and list(x.shape[1:]) == list(want[1:]):
            for part, piece in zip(cut, np.split(x, parts, axis=0)):
                part[name] = piece
            continue
        whole = [parts * want[0], *want[1:]] if want else want
        raise ForgeOptError(f"input '{name}' has shape {list(x.shape)}: {parts} micro-batches of the split's "
                            f"{list(want)} take {whole} (cut along axis 0)")
    return cut


def join_outputs(parts: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The micro-batches' outputs, each joined along axis 0."""
    joined = {}
    for name, first in parts[0].items():
        if np.ndim(first) == 0:
            raise ForgeOptError(f"output '{name}' is a scalar: micro-batches join outputs along their batch axis "
                                "(axis 0)")
        joined[name] = np.concatenate([p[name] for p in parts], axis=0)
    return joined
