"""Outputs the oracle cannot reproduce itself: ill-conditioned at the inputs.

With random weights a detector scores hundreds of candidates alike, and
TopK or NonMaxSuppression choose among ties that the last rounding bit
decides: onnxruntime with its graph optimizations on differs from itself
with them off as much as a correct program does. Such an output is neither
a match nor a mismatch. An output that failed the comparison is called
ill-conditioned when one of the oracle's own runs under a rounding-level
change fails the same comparison against the oracle, by at least a tenth of
the program's own error: onnxruntime with its graph optimizations on, and
onnxruntime on the float inputs nudged by `NUDGE_ULPS` units in the last
place (seeded random signs). The check then verifies what it still can
(every device sub-model of a split on its own inputs) and exits with
`ILL_CONDITIONED`, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from onnx import ModelProto

from forge_opt.check.compare import OutputResult
from forge_opt.execution.oracle import onnxruntime_outputs

#: units in the last place each float input is moved by (up or down, at random)
NUDGE_ULPS = 4
#: the smallest fraction of the program's error the oracle's own must reach
SAME_ORDER = 0.1


def nudged(feeds: dict[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """`feeds` with every float value moved by NUDGE_ULPS units in its last
    place, up or down at random; the other inputs as they are."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, x in feeds.items():
        if x.dtype.kind == "f":
            signs = rng.choice(np.array([-1, 1], x.dtype), size=x.shape)
            out[name] = (x + signs * NUDGE_ULPS * np.spacing(x)).astype(x.dtype)
        else:
            out[name] = x
    return out


def unstable_outputs(
    model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], oracle: Sequence[np.ndarray],
    results: list[OutputResult], compare: Callable[[str, np.ndarray, np.ndarray], OutputResult],
) -> dict[str, str]:
    """Of `results`' outputs that failed on their values, those one of the
    oracle's own variant runs does not reproduce either: each with what
    showed it. `compare(name, want, got)` is the check's own rule."""
    failing = [r for r in results if not r.ok and not r.reason]
    if not failing:
        return {}
    names = [o.name for o in model.graph.output]
    variants = [("onnxruntime with its graph optimizations on", lambda: onnxruntime_outputs(
        model, base, feeds, optimized=True))]
    if any(x.dtype.kind == "f" for x in feeds.values()):
        variants.append((f"onnxruntime on the float inputs moved by {NUDGE_ULPS} units in the last place",
                         lambda: onnxruntime_outputs(model, base, nudged(feeds))))
    found: dict[str, str] = {}
    for how, run in variants:
        try:
            outputs = run()
        except Exception:  # (the variant cannot run: it shows nothing)
            continue
        for r in failing:
            if r.name in found:
                continue
            i = names.index(r.name)
            own = compare(r.name, np.asarray(oracle[i]), np.asarray(outputs[i]))
            if not own.ok and own.max_abs_error >= SAME_ORDER * r.max_abs_error:
                found[r.name] = f"{how} differs from it by {own.max_abs_error:.3e} (this program: " \
                                f"{r.max_abs_error:.3e})"
        if len(found) == len(failing):
            break
    return found
