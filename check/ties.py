"""The oracle with its near-ties decided otherwise: what a correct program
may also decide otherwise, and so must not be called wrong.

An ArgMax or a sorted TopK choosing between two scores onnxruntime ties to
within their rounding (`TiesFlipped`, and `near_tied_rows` for an ArgMax's
own output), and a rounding step whose input lies within rounding of the
boundary between its two results (`RoundingFlipped`: quantizers, Round,
Floor, Ceil). `conditioning.unstable_outputs` asks each as a variant of
the oracle.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, numpy_helper

from forge_opt import dtypes
from forge_opt.check.compare import BUDGET_FACTOR
from forge_opt.check.wide import wide_outputs
from forge_opt.execution.oracle import onnxruntime_outputs

#: units in the last place two values may differ by and count as tied (and the nudge of `conditioning.nudged`)
NUDGE_ULPS = 4
#: what the probes are called in the report
NEAR_TIE = "an ArgMax among values onnxruntime's own run ties to within their rounding"
TIES_FLIPPED = "onnxruntime with each ArgMax and TopK choosing the other of two values tied to within their rounding"
ROUNDING_FLIPPED = ("onnxruntime with each quantizer, Round, Floor and Ceil taking its other result where its input "
                    "is within rounding of the boundary")


class TiesFlipped:
    """The oracle for what depends on a near-tie (a Gather by an ArgMax or a
    TopK): the model run with each ArgMax (ArgMin) of its graph choosing, at
    each row whose best two scores onnxruntime ties to within NUDGE_ULPS
    units in the last place (or as close as the scores' own rounding puts
    them: BUDGET_FACTOR times onnxruntime's distance to the wide run there),
    the second, and each sorted TopK with such neighbours in its order (the
    k-th and the next among them) swapped in pairs, paired from the first or
    (`backwards`) from the last of a run of them. The scores are probed once
    for both."""

    def __init__(self, model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]):
        self.model, self.base, self.feeds = model, base, feeds
        self.nodes = [n for n in model.graph.node if (n.op_type in ("ArgMax", "ArgMin") and
                                                      _attrs(n).get("select_last_index", 0) == 0) or
                      (n.op_type == "TopK" and _attrs(n).get("sorted", 1) == 1)]
        self._probed: list | None = None

    def outputs(self, backwards: bool = False) -> list | None:
        """The model's outputs with its near-ties chosen otherwise; None where nothing is so tied."""
        if not self.nodes:
            return None
        given: dict[str, np.ndarray] = {}
        tied = False
        for node, (scores, k, exact) in zip(self.nodes, self._probe()):
            tied |= _flip(node, scores, k, exact, backwards, given)
        return _given(self.model, self.base, self.feeds, given) if tied else None

    def scores(self, node: NodeProto) -> tuple[np.ndarray, np.ndarray | None]:
        """`node`'s scores on onnxruntime and in the wide run."""
        scores, _, exact = self._probe()[self.nodes.index(node)]
        return scores, exact

    def _probe(self) -> list[tuple[np.ndarray, int, np.ndarray | None]]:
        """Each node's scores, its k (1 for an ArgMax) and the scores of the wide run."""
        if self._probed is None:
            values, exact = _probed(self.model, self.base, self.feeds, [x for n in self.nodes for x in n.input[:2]])
            self._probed = [(values[n.input[0]], int(np.asarray(values[n.input[1]]).reshape(-1)[0])
                             if n.op_type == "TopK" else 1, exact.get(n.input[0])) for n in self.nodes]
        return self._probed


def _given(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], given: dict[str, np.ndarray]
           ) -> list:
    """The model's outputs on onnxruntime with the nodes that make `given`
    left out and their values fed instead."""
    variant = ModelProto()
    variant.CopyFrom(model)
    kept = [n for n in variant.graph.node if not set(n.output) & given.keys()]
    del variant.graph.node[:]
    variant.graph.node.extend(kept)
    kept_info = [v for v in variant.graph.value_info if v.name not in given]
    del variant.graph.value_info[:]
    variant.graph.value_info.extend(kept_info)
    variant.graph.input.extend(
        onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
        for name, v in given.items())
    return onnxruntime_outputs(variant, base, {**feeds, **given})


class RoundingFlipped:
    """The oracle for what a rounding step decides: the model run with each
    QuantizeLinear and DynamicQuantizeLinear (to an integer type), Round,
    Floor and Ceil taking the other of its two results wherever its input
    lies within rounding of the boundary between them (`x / scale` within
    NUDGE_ULPS units in its last place of a half, or as close as the wide
    run puts it). A value a device computes one unit in the last place off
    becomes a whole quantization step there: a dynamically quantized CRNN's
    SiLU before its QuantizeLinear, a step apart from onnxruntime's at 7 of
    73,728 values, each at x / scale = 2.5 to within two units."""

    def __init__(self, model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray]):
        self.model, self.base, self.feeds = model, base, feeds
        self.nodes = [n for n in model.graph.node if n.op_type in _ROUNDING and _rounds_to_integers(n, model)]

    def outputs(self) -> list | None:
        """The model's outputs with its near-ties rounded otherwise; None where nothing is so tied."""
        if not self.nodes:
            return None
        names = [x for n in self.nodes for x in (*n.input, *n.output) if x]
        values, exact = _probed(self.model, self.base, self.feeds, names)
        given: dict[str, np.ndarray] = {}
        tied = False
        for node in self.nodes:
            tied |= _rounded_otherwise(node, values, exact, given)
        return _given(self.model, self.base, self.feeds, given) if tied else None


#: the ops `RoundingFlipped` rounds otherwise
_ROUNDING = ("QuantizeLinear", "DynamicQuantizeLinear", "Round", "Floor", "Ceil")


def _rounds_to_integers(node: NodeProto, model: ModelProto) -> bool:
    """Whether `node` rounds to integers: a QuantizeLinear to a float8 type
    rounds to its grid, which is not one."""
    if node.op_type != "QuantizeLinear":
        return True
    output_dtype = _attrs(node).get("output_dtype", 0)
    point = next((t for t in model.graph.initializer if len(node.input) > 2 and t.name == node.input[2]), None)
    written = output_dtype or (point.data_type if point is not None else 0)
    # (an unknown zero point: the values say, `_rounded_otherwise`)
    return not written or not dtypes.is_float(onnx.helper.tensor_dtype_to_np_dtype(written))


def _rounded_otherwise(node: NodeProto, values: dict[str, np.ndarray], exact: dict[str, np.ndarray],
                       given: dict[str, np.ndarray]) -> bool:
    """Into `given`, `node`'s results with each value within rounding of a
    boundary taken to its other side (`RoundingFlipped`); whether it had any."""
    x = np.asarray(values[node.input[0]])
    if x.dtype.kind != "f" or x.size == 0:
        return False
    y = np.asarray(values[node.output[0]])
    wide = exact.get(node.input[0])
    band = _tie_band(x, wide)
    if node.op_type in ("QuantizeLinear", "DynamicQuantizeLinear"):
        if y.dtype.kind not in "iu":
            return False
        if node.op_type == "QuantizeLinear":
            scale = _per_axis(node, values[node.input[1]], x.shape)
            point = _per_axis(node, values[node.input[2]], x.shape) if len(node.input) > 2 and node.input[2] \
                else np.zeros((), y.dtype)
        else:
            scale, point = np.asarray(values[node.output[1]]), np.asarray(values[node.output[2]])
        with np.errstate(divide="ignore", invalid="ignore"):
            v = x.astype(np.float64) / np.abs(scale.astype(np.float64))
            band = band / np.abs(scale.astype(np.float64))
        # (the integer written, before the zero point and saturation: a saturated value rounds to the bound)
        rounded = y.astype(np.int64) - point.astype(np.int64)
        near = np.abs(v - np.floor(v) - 0.5) <= np.maximum(band, NUDGE_ULPS * np.spacing(np.abs(v)))
        other = np.where(v > rounded, rounded + 1, rounded - 1) + point.astype(np.int64)
        info = np.iinfo(y.dtype)
        flipped = np.where(near & np.isfinite(v), np.clip(other, info.min, info.max), y.astype(np.int64))
        given.update(zip(node.output, [flipped.astype(y.dtype), *(values[o] for o in node.output[1:])]))
        return bool((flipped != y).any())
    v = x.astype(np.float64)
    if node.op_type == "Round":
        near = np.abs(v - np.floor(v) - 0.5) <= band
        other = np.where(v > y, y + 1, y - 1)
    else:  # Floor and Ceil: at an integer n, n or its neighbour below (Floor), above (Ceil)
        n = np.round(v)
        near = np.abs(v - n) <= band
        step = -1 if node.op_type == "Floor" else 1
        other = np.where(y == n, n + step, n)
    flipped = np.where(near & np.isfinite(v), other, y).astype(y.dtype)
    given[node.output[0]] = flipped
    return bool((flipped != y).any())


def _per_axis(node: NodeProto, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A QuantizeLinear's scale or zero point broadcast to its input's
    `shape`: one value, one per index of `axis`, or one per block of
    `block_size` along it."""
    value = np.asarray(value)
    if value.ndim == 0 or value.size == 1:
        return value.reshape(())
    attrs = _attrs(node)
    axis = attrs.get("axis", 1) % len(shape)
    block = attrs.get("block_size", 0)
    if block:
        value = np.repeat(value, block, axis=axis)
        return np.take(value, np.arange(shape[axis]), axis=axis)
    return value.reshape([shape[axis] if i == axis else 1 for i in range(len(shape))])


def _probed(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], names: list[str]
            ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The values `names` take on onnxruntime, and in the wide run where it
    runs (a feed is its own)."""
    inner = [x for x in dict.fromkeys(names) if x not in feeds]
    fed = {x: feeds[x] for x in names if x in feeds}
    values, exact = dict(fed), dict(fed)
    if inner:
        probe = ModelProto()
        probe.CopyFrom(model)
        del probe.graph.output[:]
        probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(x) for x in inner)
        values.update(zip(inner, onnxruntime_outputs(probe, base, feeds)))
        wide = wide_outputs(probe, base, feeds)[0]
        exact.update(zip(inner, wide) if wide is not None else ())
    return values, exact


def _tie_band(scores: np.ndarray, exact: np.ndarray | None) -> np.ndarray:
    """How far below each score another counts as tied with it: NUDGE_ULPS
    units in its last place, or as close as the scores' own rounding puts
    them (BUDGET_FACTOR times onnxruntime's distance to the wide run)."""
    band = NUDGE_ULPS * np.spacing(np.abs(scores)).astype(np.float64)
    if exact is not None and np.shape(exact) == scores.shape:
        with np.errstate(invalid="ignore", over="ignore"):  # each score's own: a floor would tie them all
            own = np.abs(scores.astype(np.float64) - np.asarray(exact, np.float64))
        band = np.maximum(band, BUDGET_FACTOR * np.nan_to_num(own, nan=0.0, posinf=0.0))
    return band


def _flip(node: NodeProto, s: np.ndarray, k: int, exact: np.ndarray | None, backwards: bool,
          given: dict[str, np.ndarray]) -> bool:
    """Into `given`, `node`'s results with its near-ties chosen otherwise
    (`TiesFlipped`); whether it had any."""
    attrs = _attrs(node)
    axis = attrs.get("axis", -1 if node.op_type == "TopK" else 0)
    if s.dtype.kind != "f" or s.ndim == 0 or s.shape[axis] < 2:
        return False
    axis %= s.ndim
    largest = node.op_type == "ArgMax" or (node.op_type == "TopK" and attrs.get("largest", 1))
    rows = np.moveaxis(s if largest else -s, axis, -1).astype(np.float64)
    order = np.argsort(-rows, axis=-1, kind="stable")[..., :k + 1]  # the first of equal values first
    values = np.take_along_axis(rows, order, -1)
    band = np.take_along_axis(np.moveaxis(_tie_band(s, exact), axis, -1), order[..., :-1], -1)
    near = values[..., :-1] - values[..., 1:] <= band
    swapped = np.zeros(near.shape, bool)
    steps = range(near.shape[-1] - 1, -1, -1) if backwards else range(near.shape[-1])
    for j in steps:  # neighbours swapped in pairs, each value in one pair at most
        before = j + 1 if backwards else j - 1
        swapped[..., j] = near[..., j] & ~(swapped[..., before] if 0 <= before < near.shape[-1] else False)
    flipped = order.copy()
    flipped[..., :-1][swapped], flipped[..., 1:][swapped] = order[..., 1:][swapped], order[..., :-1][swapped]
    index = flipped[..., :k]
    if node.op_type == "TopK":
        given[node.output[0]] = np.moveaxis(np.take_along_axis(np.moveaxis(s, axis, -1), index, -1), -1, axis)
        given[node.output[1]] = np.moveaxis(index, -1, axis).astype(np.int64)
    else:
        index = index[..., 0].astype(np.int64)
        given[node.output[0]] = np.expand_dims(index, axis) if attrs.get("keepdims", 1) else index
    return bool(swapped.any())


def _attrs(node: NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


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
    return node if _attrs(node).get("select_last_index", 0) == 0 else None


def near_tied_rows(model: ModelProto, base: Path | None, feeds: dict[str, np.ndarray], name: str,
                   want: np.ndarray, got: np.ndarray, ties: TiesFlipped | None = None) -> np.ndarray | None:
    """Where output `name`, an ArgMax's indices, chose a value onnxruntime's
    own run ties with the largest (`_tie_band`: YOLO's class scores, alike
    with random weights): a mask of its positions; None where the output is
    not such an ArgMax's. `ties` probed the model's scores already."""
    node = _argmax_behind(model, name)
    if node is None or want.shape != got.shape:
        return None
    ties = ties if ties is not None else TiesFlipped(model, base, feeds)
    scores, exact = ties.scores(node)
    if scores.dtype.kind != "f" or _attrs(node).get("axis", 0) not in (-1, scores.ndim - 1):
        return None
    rows = scores.reshape(-1, scores.shape[-1]).astype(np.float64)
    band = _tie_band(scores, exact).reshape(rows.shape)
    chosen = got.reshape(-1)
    if rows.shape[0] != chosen.size:
        return None
    inside = (chosen >= 0) & (chosen < rows.shape[1])
    every = np.arange(chosen.size)
    best = rows.argmax(axis=1)
    value = rows[every, np.where(inside, chosen, 0)]
    return (inside & (value >= rows[every, best] - band[every, best])).reshape(got.shape)
