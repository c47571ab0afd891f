"""Opset adapters: rewrite a node written against an older version of its
operator into the newest form, so the dialect models one form per op.

Each adapter takes a copy of the node and the schema version in effect for
it, and returns the nodes that replace it (new `Constant` nodes carry what
used to be attributes and are now inputs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import numpy as np
import onnx.defs
from onnx import NodeProto, TensorProto, TypeProto, helper, numpy_helper

from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.shapes import tensor_shape

Adapter = Callable[[NodeProto, int, Mapping[str, TypeProto], str], list[NodeProto]]

_ADAPTERS: dict[str, list[tuple[int, Adapter]]] = {}


def _adapter(*op_types: str, before: int):
    """Register for nodes whose schema version is older than `before`."""

    def register(fn: Adapter) -> Adapter:
        for op_type in op_types:
            _ADAPTERS.setdefault(op_type, []).append((before, fn))
        return fn

    return register


@cache
def schema_version(op_type: str, opset: int | None = None) -> int | None:
    """The version of the default-domain schema of `op_type` in effect at
    `opset` (the newest when None), or None when there is none."""
    try:
        if opset is None:
            return onnx.defs.get_schema(op_type).since_version
        return onnx.defs.get_schema(op_type, opset, "").since_version
    except onnx.defs.SchemaError:
        return None


def adapt_node(node: NodeProto, since: int, types: Mapping[str, TypeProto], what: str) -> list[NodeProto]:
    newest = schema_version(node.op_type)
    if newest is None or since >= newest:
        return [node]
    adapted = NodeProto()
    adapted.CopyFrom(node)
    _drop_attrs(adapted, "consumed_inputs")
    nodes = [adapted]
    for before, fn in _ADAPTERS.get(node.op_type, []):
        if since < before:
            nodes = nodes[:-1] + fn(nodes[-1], since, types, what)
    return nodes


# -- helpers --------------------------------------------------------------------


def _pop_attr(node: NodeProto, name: str):
    for i, a in enumerate(node.attribute):
        if a.name == name:
            value = helper.get_attribute_value(a)
            del node.attribute[i]
            return value
    return None


def _drop_attrs(node: NodeProto, *names: str) -> None:
    keep = [a for a in node.attribute if a.name not in names]
    del node.attribute[:]
    node.attribute.extend(keep)


def _base(node: NodeProto) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _constant(node: NodeProto, label: str, array: np.ndarray) -> tuple[NodeProto, str]:
    """A Constant node holding `array`, named after the node it serves."""
    out = f"{_base(node)}/{label}"
    const = helper.make_node(
        "Constant", [], [out], name=out, value=numpy_helper.from_array(array, out)
    )
    return const, out


def _set_input(node: NodeProto, index: int, name: str) -> None:
    while len(node.input) <= index:
        node.input.append("")
    node.input[index] = name


def _elem_dtype(types: Mapping[str, TypeProto], name: str) -> np.dtype:
    tp = types.get(name)
    if tp is not None and tp.HasField("tensor_type") and tp.tensor_type.elem_type:
        return helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type)
    return np.dtype(np.float32)


def _attr_to_input(
    node: NodeProto, attr: str, index: int, convert: Callable[[Any], np.ndarray]
) -> list[NodeProto]:
    value = _pop_attr(node, attr)
    if value is None:
        return [node]
    const, name = _constant(node, attr, convert(value))
    _set_input(node, index, name)
    return [const, node]


def _ints(value) -> np.ndarray:
    return np.asarray(list(value), dtype=np.int64)


# -- adapters -------------------------------------------------------------------


@_adapter("Split", before=13)
def _split_attr(node, since, types, what):
    return _attr_to_input(node, "split", 1, _ints)


@_adapter("Slice", before=10)
def _slice_attrs(node, since, types, what):
    nodes: list[NodeProto] = []
    for index, attr in ((1, "starts"), (2, "ends"), (3, "axes")):
        made = _attr_to_input(node, attr, index, _ints)
        nodes.extend(made[:-1])
    return [*nodes, node]


@_adapter("Squeeze", "Unsqueeze", before=13)
def _axes_attr(node, since, types, what):
    return _attr_to_input(node, "axes", 1, _ints)


@_adapter(
    "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", before=18,
)
@_adapter("ReduceSum", before=13)
def _reduce_axes_attr(node, since, types, what):
    return _attr_to_input(node, "axes", 1, _ints)


@_adapter("Pad", before=11)
def _pad_attrs(node, since, types, what):
    pads = _pop_attr(node, "pads")
    if pads is None:
        pads = _pop_attr(node, "paddings")
    if pads is None:
        raise ForgeOptError(f"{what}: Pad-{since} needs the attribute 'pads'")
    dtype = _elem_dtype(types, node.input[0])
    value = _pop_attr(node, "value")
    c_pads, pads_name = _constant(node, "pads", _ints(pads))
    nodes = [c_pads]
    _set_input(node, 1, pads_name)
    if value is not None:
        c_value, value_name = _constant(node, "value", np.asarray(value, dtype=dtype))
        nodes.append(c_value)
        _set_input(node, 2, value_name)
    return [*nodes, node]


@_adapter("Clip", before=11)
def _clip_attrs(node, since, types, what):
    dtype = _elem_dtype(types, node.input[0])
    nodes: list[NodeProto] = []
    for index, attr in ((1, "min"), (2, "max")):
        made = _attr_to_input(node, attr, index, lambda v: np.asarray(v, dtype=dtype))
        nodes.extend(made[:-1])
    return [*nodes, node]


@_adapter("TopK", before=10)
def _topk_attr(node, since, types, what):
    return _attr_to_input(node, "k", 1, lambda v: np.asarray([v], dtype=np.int64))


@_adapter("Reshape", before=5)
def _reshape_attr(node, since, types, what):
    return _attr_to_input(node, "shape", 1, _ints)


@_adapter("Dropout", before=12)
def _dropout_attrs(node, since, types, what):
    _drop_attrs(node, "is_test")
    return _attr_to_input(node, "ratio", 1, lambda v: np.asarray(v, dtype=np.float32))


@_adapter("BatchNormalization", before=9)
def _batchnorm_attrs(node, since, types, what):
    spatial = _pop_attr(node, "spatial")
    if spatial is not None and spatial != 1:
        raise ForgeOptError(f"{what}: BatchNormalization with spatial=0 is not supported")
    _drop_attrs(node, "is_test")
    return [node]


@_adapter(
    "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less",
    "Gemm", before=7,
)
def _legacy_broadcast(node, since, types, what):
    _pop_attr(node, "broadcast")
    if _pop_attr(node, "axis") is not None:
        raise ForgeOptError(
            f"{what}: {node.op_type}-{since} broadcasting along 'axis' is not supported; "
            "convert the model to opset 7 or newer"
        )
    return [node]


@_adapter("Cast", before=6)
def _cast_to_string(node, since, types, what):
    for a in node.attribute:
        if a.name == "to" and a.type == onnx.AttributeProto.STRING:
            to = TensorProto.DataType.Value(a.s.decode().upper())
            a.Clear()
            a.name, a.type, a.i = "to", onnx.AttributeProto.INT, to
    return [node]


@_adapter("Concat", before=4)
def _concat_axis(node, since, types, what):
    if not any(a.name == "axis" for a in node.attribute):
        node.attribute.append(helper.make_attribute("axis", 1))
    return [node]


@_adapter("Softmax", "LogSoftmax", "Hardmax", before=13)
def _coerced_2d(node, since, types, what):
    """Before opset 13 these flattened the input to 2-D at `axis` (default 1)
    and normalised over the whole second half; the same as the newest form
    along the one dimension from `axis` on that is not 1 (the last, or a
    classifier's [N, 1000, 1, 1]), otherwise Flatten, op, Reshape."""
    axis = _pop_attr(node, "axis")
    axis = 1 if axis is None else int(axis)
    shape = tensor_shape(types, node.input[0])
    if shape is None:
        raise ForgeOptError(f"{what}: {node.op_type}-{since} needs an input of known rank")
    rank = len(shape)
    axis = axis + rank if axis < 0 else axis
    wide = [d for d in range(axis, rank) if shape[d] != 1]
    if axis == rank - 1 or (len(wide) <= 1 and all(d > 0 for d in shape[axis:])):
        node.attribute.append(helper.make_attribute("axis", wide[0] if wide else axis))
        return [node]
    base = _base(node)
    flat, normed, target = f"{base}/flat", f"{base}/normalized", f"{base}/shape"
    elem = types[node.input[0]].tensor_type.elem_type
    if all(d > 0 for d in shape):
        rows, cols = int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))
        for name in (flat, normed):
            types[name] = helper.make_tensor_type_proto(elem, [rows, cols])
    flatten = helper.make_node("Flatten", [node.input[0]], [flat], name=flat, axis=axis)
    op = helper.make_node(node.op_type, [flat], [normed], name=node.name or normed, axis=-1)
    shape_node = helper.make_node("Shape", [node.input[0]], [target], name=target)
    types[target] = helper.make_tensor_type_proto(TensorProto.INT64, [rank])
    reshape = helper.make_node("Reshape", [normed, target], [node.output[0]], name=f"{base}/reshape")
    return [flatten, op, shape_node, reshape]


@_adapter("Upsample", before=9)
def _upsample_scales(node, since, types, what):
    return _attr_to_input(node, "scales", 1, lambda v: np.asarray(list(v), dtype=np.float32))


@_adapter("Resize", before=11)
def _resize_roi(node, since, types, what):
    """Resize-10 took (X, scales) and sampled with asymmetric coordinates."""
    scales = node.input[1]
    del node.input[1:]
    node.input.extend(["", scales])
    node.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
    return [node]


@_adapter("DFT", before=20)
def _dft_axis(node, since, types, what):
    """DFT-17 had `axis` as an attribute defaulting to 1; DFT-20 takes it as
    an input defaulting to -2, so the old default is made explicit."""
    if not any(a.name == "axis" for a in node.attribute):
        node.attribute.append(helper.make_attribute("axis", 1))
    return _attr_to_input(node, "axis", 2, lambda v: np.asarray(v, dtype=np.int64))
