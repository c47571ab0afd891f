"""Outputs the oracle cannot reproduce itself: ill-conditioned at the inputs,
position by position.

With random weights a detector scores hundreds of candidates alike, and
TopK, ArgMax or NonMaxSuppression choose among ties that the last rounding
bit decides: onnxruntime with its graph optimizations on can differ from
itself with them off as much as a correct program does. Such a position is
neither a match nor a mismatch. At each position of an output in doubt
(`in_doubt`) that still fails (`OutputResult.off`), the oracle's own runs
under a rounding-level change are asked (`unstable_outputs`): onnxruntime
with its graph optimizations on, onnxruntime on the float inputs nudged by
`NUDGE_ULPS` units in the last place (seeded random signs), onnxruntime
with each ArgMax and TopK choosing the other of two near-tied scores (what a
Gather by it reads: `TiesFlipped`), onnxruntime with each quantizer and
rounding op taking its other result at a near-tie (`RoundingFlipped`), and
the wide run (`wide.py`). The position is ill-conditioned where one of them
fails the same rule there, by at least a tenth of the program's own error
(for an index: in a row where it chooses otherwise), or where an ArgMax
behind the output chose a value onnxruntime's own run ties with the
largest (`near_tied_rows`). An output is
ill-conditioned when every position that fails is; a position the variants
reproduce and the program does not is a mismatch, however many others are
ill-conditioned. An output that fails as a whole (its run-time size, its PCC
alone) is judged as a whole: ill-conditioned when a variant fails the rule
by the same order.

For a split, an output is also ill-conditioned when each device sub-model
matches onnxruntime on the inputs the run gave it and the split on
onnxruntime alone matches the model (`AMPLIFIED`): the rest is onnxruntime
itself, amplifying rounding. `judge_doubts` gives the verdict:
`ILL_CONDITIONED` when every output in doubt is so, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from onnx import ModelProto

from forge_opt.check.compare import REDUCED_PCC, OutputResult
from forge_opt.check.report import ILL_CONDITIONED, MISMATCH
from forge_opt.check.ties import (
    NEAR_TIE,
    NUDGE_ULPS,
    ROUNDING_FLIPPED,
    TIES_FLIPPED,
    RoundingFlipped,
    TiesFlipped,
    near_tied_rows,
)
from forge_opt.check.wide import WideRun
from forge_opt.execution.oracle import onnxruntime_outputs

#: the smallest fraction of the program's error the oracle's own must reach
SAME_ORDER = 0.1
#: why an output of a split is ill-conditioned when its device sub-models each match onnxruntime
AMPLIFIED = ("onnxruntime's own sub-models on the host turn the device sub-models' values, each within the "
             "tolerance of onnxruntime's on the same inputs, into it")


def nudged(feeds: dict[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """`feeds` with every float value moved by NUDGE_ULPS units in its last
    place, up or down at random (a 16-bit float by one: its unit is already
    4,096 times float32's); the other inputs as they are."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, x in feeds.items():
        if x.dtype.kind == "f":
            signs = rng.choice(np.array([-1, 1], x.dtype), size=x.shape)
            units = NUDGE_ULPS if x.dtype.itemsize >= 4 else 1
            out[name] = (x + signs * units * np.spacing(x)).astype(x.dtype)
        else:
            out[name] = x
    return out


def in_doubt(r: OutputResult) -> bool:
    """An output whose verdict a tie may have decided: one that failed on its
    values or on a run-time size (how many boxes survive NMS), or one that
    passed only by the float64 budget at a PCC Forge's own rule would fail
    (float32 onnxruntime far from float64 is what a tie makes too; a
    near-constant map's rounding keeps a PCC near 1)."""
    return (not r.ok and (not r.reason or r.reason.startswith("shape"))) or \
        (r.ok and r.budget in ("float64", "float32") and r.pcc < REDUCED_PCC)


@dataclass
class Probed:
    """What the oracle's variants showed: the outputs ill-conditioned at
    every position that fails (with what showed it), and the results with
    each probed output's ill-conditioned positions counted (`ill`) and the
    positions no variant reproduces left `off`."""

    ill: dict[str, str]
    results: list[OutputResult]


def unstable_outputs(
    model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], oracle: Sequence[np.ndarray],
    results: list[OutputResult], got: Mapping[str, np.ndarray],
    compare: Callable[[str, np.ndarray, np.ndarray], OutputResult], wide: WideRun | None = None,
) -> Probed:
    """`results`' outputs in doubt (`in_doubt`) probed by the oracle's own
    variant runs, position by position (the module's docstring). `got` is
    the program's outputs; `compare(name, want, got)` the check's own rule
    (for an output judged as a whole); `wide` the model's wide run (`wide.WideRun`)."""
    failing = [r for r in results if in_doubt(r)]
    if not failing:
        return Probed({}, results)
    names = [o.name for o in model.graph.output]
    ties = TiesFlipped(model, base, feeds)  # its scores probed once, for the near-tied rows and the variants
    variants: list[tuple[str, Callable[[], list | None]]] = [
        ("onnxruntime with its graph optimizations on",
         lambda: onnxruntime_outputs(model, base, feeds, optimized=True))]
    if any(x.dtype.kind == "f" for x in feeds.values()):
        variants.append((f"onnxruntime on the float inputs moved by {NUDGE_ULPS} units in the last place",
                         lambda: onnxruntime_outputs(model, base, nudged(feeds))))
    variants += [(TIES_FLIPPED, ties.outputs), (TIES_FLIPPED + ", paired from the last", lambda: ties.outputs(True)),
                 (ROUNDING_FLIPPED, RoundingFlipped(model, base, feeds).outputs)]
    if wide is not None:
        variants.append(("the model run wider", lambda: wide.outputs))
    whole: dict[str, str] = {}  # outputs judged as a whole, ill-conditioned
    left = {r.name: r.off.copy() for r in failing if r.off is not None}  # positions no probe has explained yet
    shown: dict[str, dict[str, int]] = {name: {} for name in left}  # per output: how many positions each probe showed
    for r in failing:
        if r.name in left and not np.issubdtype(np.asarray(oracle[names.index(r.name)]).dtype, np.floating):
            i = names.index(r.name)
            _explain(left[r.name], shown[r.name], NEAR_TIE, near_tied_rows(
                model, base, feeds, r.name, np.asarray(oracle[i]), np.asarray(got[r.name]), ties))
    for how, run in variants:
        if all(r.name in whole or (r.name in left and not left[r.name].any()) for r in failing):
            break
        try:
            outputs = run()
        except Exception:  # (the variant cannot run: it shows nothing)
            continue
        if outputs is None:
            continue
        for r in failing:
            i = names.index(r.name)
            want, other = np.asarray(oracle[i]), np.asarray(outputs[i])
            if r.name in left:
                _explain(left[r.name], shown[r.name], how, _moved(r, want, other, np.asarray(got[r.name])))
            elif r.name not in whole:
                own = compare(r.name, want, other.astype(want.dtype) if other.shape == want.shape else other)
                if not own.ok and own.max_abs_error >= SAME_ORDER * r.max_abs_error:
                    whole[r.name] = f"{how} differs from it by {own.max_abs_error:.3e} (this program: " \
                                    f"{r.max_abs_error:.3e})"
    ill = dict(whole)
    probed = []
    for r in results:
        if r.name in left and r.off is not None:  # (what `left` holds: an output with positions off)
            count = int(r.off.sum() - left[r.name].sum())
            if not left[r.name].any():
                ill[r.name] = _positions(count, r.off.size, shown[r.name])
            r = replace(r, off=left[r.name], ill=count)
        probed.append(r)
    return Probed(ill, probed)


def _explain(left: np.ndarray, shown: dict[str, int], how: str, moved: np.ndarray | None) -> None:
    """Mark the positions of `left` a probe explains (`moved`), counting them under `how`."""
    if moved is None:
        return
    explained = left & moved
    if explained.any():
        shown[how] = shown.get(how, 0) + int(explained.sum())
        left &= ~explained


def _moved(r: OutputResult, want: np.ndarray, other: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The positions where a variant run `other` is as far from the oracle
    `want` as the program `got` is: an index chosen otherwise, or a float
    beyond the output's tolerance by at least SAME_ORDER of the program's
    error there (a quantized value, 8 or 16 bits: as many steps the same
    way); for an index of rank 2 or more, every entry of a row the
    variant chose otherwise. A variant of another run-time size moves every
    position."""
    if other.shape != want.shape:
        return np.ones(want.shape, bool)
    if want.dtype.kind in "iu" and want.dtype.itemsize <= 2:  # quantized values, each its own
        # whole steps: rounding moves a value a step to either side of a tie, never further nor the other way
        theirs, ours = (a.astype(np.int64) - want.astype(np.int64) for a in (other, got))
        return (theirs != 0) & (np.sign(theirs) == np.sign(ours)) & (np.abs(theirs) >= np.abs(ours))
    if not np.issubdtype(want.dtype, np.floating):
        # indices come in rows (TopK's k along the last axis, NMS's [batch, class, box]): a tie that reorders
        # a row can move each of its entries
        chosen = want != other
        return np.broadcast_to(chosen.any(axis=-1, keepdims=True), want.shape) if want.ndim > 1 else chosen
    w, v, g = (a.astype(np.float64) for a in (want, other, got))
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = np.where(np.isnan(w) & np.isnan(v), 0.0, np.abs(v - w))
        ours = np.abs(g - w)
        return ~np.isfinite(theirs) | ((theirs > r.tolerance) & (theirs >= SAME_ORDER * np.nan_to_num(ours, nan=0.0)))


def _positions(count: int, size: int, shown: dict[str, int]) -> str:
    """How an output ill-conditioned position by position is described."""
    how = "; ".join(f"{label} ({n})" for label, n in shown.items())
    return f"{count:,} of {size:,} positions differ, each where {how} differs from it as much"


def judge_doubts(
    status: int, results: list[OutputResult], verify: Callable[[], tuple[list[str], str]] | None,
    unstable: Callable[[list[OutputResult]], Probed],
) -> tuple[int, str, list[OutputResult], dict[str, str], str]:
    """The verdict of a check with outputs in doubt: its status, why (the
    device sub-models that differ), the results (an ill-conditioned output
    is no match), the ill-conditioned outputs with what showed each, and
    what was verified. `unstable` probes the results with the oracle's own
    variants (`unstable_outputs`); `verify`, where the check ran a split,
    gives the device sub-models that differ on their own inputs and a line
    saying what was verified."""
    probed = unstable(results)
    ill, results = dict(probed.ill), probed.results
    checked = None  # what verify found, asked once
    # a split whose device sub-models each match onnxruntime on their own inputs: an output still in doubt is
    # what the host's onnxruntime sub-models made of device values within the tolerance
    amplified = {r.name for r in results if r.name not in ill and in_doubt(r)}
    if amplified and verify is not None:
        checked = verify()
        if not checked[0]:
            ill.update(dict.fromkeys(amplified, AMPLIFIED))
        else:  # a device sub-model differs on its own inputs: a doubtful output is no match
            results = [replace(r, ok=False) if r.name in amplified else r for r in results]
    results = [replace(r, ok=False) if r.name in ill else r for r in results]
    failing = {r.name for r in results if not r.ok}
    if checked is not None and checked[0] and failing & amplified:
        return MISMATCH, "\n".join(checked[0]), results, ill, ""
    if failing and failing <= set(ill):
        unverified, verified = checked or (verify() if verify is not None else ([], ""))
        if unverified:
            return MISMATCH, "\n".join(unverified), results, ill, ""
        return ILL_CONDITIONED, "", results, ill, verified
    return (MISMATCH if failing else status), "", results, ill, ""


