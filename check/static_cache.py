"""The host's side of a static KV cache (`static-kv-cache`): the feeds of a
decoder with a growing cache, as Optimum's runtime passes them, as the
program with a cache of L positions takes them, and its results back.

A growing past of p positions is the static cache's first p positions, the
rest zeros; `attention_mask` [b, p + s] becomes [b, L + s], zero over the
positions not yet written, [p, L); `cache_position` is p. The static
`present.*` holds the step's entries at [p, p + s): its first p + s
positions are the growing `present.*`. A runtime that keeps the cache on
the device feeds each step's present back as the next past and never
reads it; the check converts both ways so that its loop and the oracle's
feed the same values."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from forge_opt.diagnostics import ForgeOptError
from forge_opt.transforms.static_cache import POSITION

Feeds = dict[str, np.ndarray]
#: the input that hides a cache's positions from attention (Optimum's name)
MASK = "attention_mask"


def past_length(feeds: Mapping[str, np.ndarray], pairs: Mapping[str, str]) -> int:
    """The positions the growing past holds (p)."""
    return next(iter(feeds[past] for past in pairs.values())).shape[2]


def to_static(feeds: Mapping[str, np.ndarray], pairs: Mapping[str, str], length: int) -> Feeds:
    """A growing cache's feeds as a cache of `length` positions takes them."""
    p = past_length(feeds, pairs)
    s = feeds["input_ids"].shape[1]
    if p + s > length:
        raise ForgeOptError(f"the static cache holds {length} positions; the step writes [{p}, {p + s})")
    out = dict(feeds)
    for past in pairs.values():
        grown = feeds[past]
        cache = np.zeros((*grown.shape[:2], length, *grown.shape[3:]), grown.dtype)
        cache[:, :, :p] = grown
        out[past] = cache
    if MASK in feeds:
        mask = feeds[MASK]
        out[MASK] = np.concatenate(
            [mask[:, :p], np.zeros((mask.shape[0], length - p), mask.dtype), mask[:, p:]], axis=1)
    out[POSITION] = np.array([p], np.int64)
    return out


def from_static(outputs: Mapping[str, np.ndarray], pairs: Mapping[str, str], written: int) -> Feeds:
    """The static program's results as the growing model's: each present's
    first `written` (p + s) positions."""
    out = dict(outputs)
    for present in pairs:
        out[present] = outputs[present][:, :, :written]
    return out


def cache_positions(past: int, tokens: int, steps: int, max_length: int) -> int:
    """The static cache's positions: `--max-length`, by default the prompt
    (its `past` and its `tokens`) and the steps."""
    needed = past + tokens + steps - 1
    if max_length and max_length < needed:
        raise ForgeOptError(f"--max-length {max_length}: the prompt and {steps} steps write {needed} "
                            "positions of the cache")
    return max_length or needed + 1
