"""Outputs the oracle cannot reproduce itself: ill-conditioned at the inputs.

With random weights a detector scores hundreds of candidates alike, and
TopK, ArgMax or NonMaxSuppression choose among ties that the last rounding
bit decides: onnxruntime with its graph optimizations on can differ from
itself with them off as much as a correct program does. Such an output is
neither a match nor a mismatch. An output in doubt (`in_doubt`) is called
ill-conditioned when one of the oracle's own runs under a rounding-level
change fails the same comparison against the oracle, by at least a tenth of
the program's own error (`unstable_outputs`): onnxruntime with its graph
optimizations on, and onnxruntime on the float inputs nudged by
`NUDGE_ULPS` units in the last place (seeded random signs). A device
sub-model's ArgMax that chose a value the oracle ties with the largest is
so too (`near_tied_argmax`). For a split, an output is also ill-conditioned
when each device sub-model matches onnxruntime on the inputs the run gave
it and the split on onnxruntime alone matches the model (`AMPLIFIED`): the
rest is onnxruntime itself, amplifying rounding. `judge_doubts` gives the
verdict: `ILL_CONDITIONED` when every output in doubt is so, never 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, numpy_helper

from forge_opt.check.compare import REDUCED_PCC, OutputResult
from forge_opt.check.report import ILL_CONDITIONED, MISMATCH
from forge_opt.execution.oracle import onnxruntime_outputs
from forge_opt.frontends.onnx.values import with_external_data

#: units in the last place each float input is moved by (up or down, at random)
NUDGE_ULPS = 4
#: the smallest fraction of the program's error the oracle's own must reach
SAME_ORDER = 0.1
#: why an output of a split is ill-conditioned when its device sub-models each match onnxruntime
AMPLIFIED = ("onnxruntime's own sub-models on the host turn the device sub-models' values, each within the "
             "tolerance of onnxruntime's on the same inputs, into it")


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


def in_doubt(r: OutputResult) -> bool:
    """An output whose verdict a tie may have decided: one that failed on its
    values or on a run-time size (how many boxes survive NMS), or one that
    passed only by the float64 budget at a PCC Forge's own rule would fail
    (float32 onnxruntime far from float64 is what a tie makes too; a
    near-constant map's rounding keeps a PCC near 1)."""
    return (not r.ok and (not r.reason or r.reason.startswith("shape"))) or \
        (r.ok and r.budget == "float64" and r.pcc < REDUCED_PCC)


def unstable_outputs(
    model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], oracle: Sequence[np.ndarray],
    results: list[OutputResult], compare: Callable[[str, np.ndarray, np.ndarray], OutputResult],
) -> dict[str, str]:
    """Of `results`' outputs in doubt (`in_doubt`), those one of the
    oracle's own variant runs does not reproduce either: each with what
    showed it. `compare(name, want, got)` is the check's own rule."""
    failing = [r for r in results if in_doubt(r)]
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


def judge_doubts(
    status: int, results: list[OutputResult], verify: Callable[[], tuple[list[str], str]] | None,
    unstable: Callable[[], dict[str, str]],
) -> tuple[int, str, list[OutputResult], dict[str, str], str]:
    """The verdict of a check with outputs in doubt: its status, why (the
    device sub-models that differ), the results (an ill-conditioned output
    is no match), the ill-conditioned outputs with what showed each, and
    what was verified. `unstable` asks the oracle's probes
    (`unstable_outputs`); `verify`, where the check ran a split, gives the
    device sub-models that differ on their own inputs and a line saying what
    was verified."""
    ill = unstable()
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


#: ops that move an ArgMax's indices without reordering them (flattened), as exporters follow it
_KEEPS_ORDER = {"Reshape", "Squeeze", "Unsqueeze", "Cast", "Identity", "Flatten"}


def _argmax_behind(model: ModelProto, name: str) -> NodeProto | None:
    """The ArgMax (over the last axis) whose indices `name` is, flattened in
    the same order: through reshapes and casts, and a Gather of index 0 on an
    axis of size 1 (a batch of one)."""
    producer = {o: n for n in model.graph.node for o in n.output}
    # (small ones only: an index; a weight may live in a file)
    constants = {t.name: t for t in model.graph.initializer if t.data_location != onnx.TensorProto.EXTERNAL}
    constants.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                      for a in n.attribute if a.name == "value"})
    node = producer.get(name)
    while node is not None and node.op_type != "ArgMax":
        index = constants.get(node.input[1]) if node.op_type == "Gather" else None
        if index is not None and numpy_helper.to_array(index).reshape(-1).tolist() == [0]:
            node = producer.get(node.input[0])  # (that the axis has size 1 is checked on the values)
        elif node.op_type in _KEEPS_ORDER:
            node = producer.get(node.input[0])
        else:
            return None
    if node is None:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return node if attrs.get("select_last_index", 0) == 0 else None


def near_tied_argmax(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], name: str,
                     want: np.ndarray, got: np.ndarray) -> str | None:
    """Why output `name`, an ArgMax's indices, differs only by choosing among
    values onnxruntime's own run ties to within NUDGE_ULPS units in the last
    place (YOLO's class scores, alike with random weights): each index the
    program chose where it differs is such a near-maximum. None otherwise."""
    node = _argmax_behind(model, name)
    want, got = np.asarray(want).reshape(-1), np.asarray(got).reshape(-1)
    if node is None or want.shape != got.shape:
        return None
    from forge_opt.check.bisect import onnxruntime_all_values

    scores = feeds.get(node.input[0])
    if scores is None:
        scores = onnxruntime_all_values(with_external_data(model, base), feeds).get(node.input[0])
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if scores is None or scores.dtype.kind != "f" or attrs.get("axis", 0) not in (-1, scores.ndim - 1):
        return None
    rows = scores.reshape(-1, scores.shape[-1])
    if rows.shape[0] != want.size:
        return None
    differ = np.nonzero(want != got)[0]
    if not differ.size or got[differ].min() < 0 or got[differ].max() >= rows.shape[1]:
        return None
    best = rows[differ].max(axis=1)
    chosen = rows[differ, got[differ]]
    if not np.all(chosen >= best - NUDGE_ULPS * np.spacing(best)):
        return None
    return (f"at each of its {differ.size} differing positions this program's {node.op_type} chose a value "
            f"onnxruntime's own run ties with the largest to within {NUDGE_ULPS} units in the last place")
