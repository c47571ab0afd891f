"""numpy implementations of every `onnx` op: ONNX's own reference
implementation (`onnx.reference`), run one op at a time, except where that
implementation is wrong (`_OVERRIDES`).

The same functions fold constants in `onnx-to-tir`, so what the compiler
folds is what the ONNX reference computes.
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import numpy as np
import onnx
import onnx.defs
from onnx import helper, numpy_helper
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects.elements import attr_to_array
from forge_opt.dialects.onnx_base import OnnxOp
from forge_opt.dialects.onnx_ops import ONNX_OPS

#: the most elements a folded constant may have, for the importer's resolution and the fold pass alike:
#: folding must never turn a small graph into a large weight
FOLD_LIMIT = 1 << 16


def elements_to_array(attr) -> np.ndarray:
    """A read-only array of a constant's value (elements or weight attribute)."""
    return attr_to_array(attr)


def _attribute_value(kind: str, attr) -> Any:
    if kind == "int":
        return attr.value.data
    if kind == "float":
        return attr.value.data
    if kind == "string":
        return attr.data
    if kind in ("ints", "floats"):
        return list(attr.get_values())
    if kind == "strings":
        return [s.data for s in attr.data]
    if kind == "tensor":
        return numpy_helper.from_array(np.array(elements_to_array(attr)))
    raise ForgeOptError(f"attributes of kind {kind} cannot be evaluated")


def to_node_proto(op: OnnxOp) -> onnx.NodeProto:
    """The ONNX node an op stands for, with positional input names."""
    inputs = ["" if v is None else f"in{i}" for i, v in enumerate(op.onnx_operands())]
    outputs = ["" if v is None else f"out{i}" for i, v in enumerate(op.onnx_results())]
    node = helper.make_node(op.ONNX_OP_TYPE, inputs, outputs)
    defaults = op.get_irdl_definition().properties
    for name, kind in op.ONNX_ATTRIBUTES.items():
        attr = op.properties.get(name)
        if attr is not None and not (name in defaults and defaults[name].default_value == attr):
            node.attribute.append(helper.make_attribute(name, _attribute_value(kind, attr)))
    return node


@cache
def _evaluator_cls():
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator


def _gather_elements(node: onnx.NodeProto, data: np.ndarray, indices: np.ndarray) -> tuple:
    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
    if not -data.ndim <= axis < data.ndim:
        raise ValueError(f"axis {axis} is out of range for rank {data.ndim}")
    size = data.shape[axis]
    if indices.size and not (-size <= indices.min() and indices.max() < size):
        raise ValueError(f"an index is out of range for a dimension of size {size}")
    return (np.take_along_axis(data, np.where(indices < 0, indices + size, indices), axis=axis),)


# onnx.reference (1.23.2) gathers wrongly when data has more than 32 entries
# along `axis` (np.choose's limit, then a fallback that reads one element
# per row); BERT's position ids hit it.
_OVERRIDES = {"GatherElements": _gather_elements}


def evaluate_node(node: onnx.NodeProto, inputs: list[np.ndarray | None], opset: int | None = None) -> list:
    """Run one default-domain node on numpy arrays (None for an omitted
    input) through onnx.reference, at `opset` (default: the newest)."""
    from onnx.reference.ops import load_op

    override = _OVERRIDES.get(node.op_type)
    if override is not None:
        return list(override(node, *inputs))  # pyright: ignore[reportArgumentType]
    version = opset or onnx.defs.onnx_opset_version()
    cls = load_op("", node.op_type, version, node=node)
    run_params = {
        "opsets": {"": version},
        "new_ops": None,
        "log": lambda *a: None,
        "verbose": 0,
        "evaluator_cls": _evaluator_cls(),
    }
    inst = cls(node, run_params)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        outs = inst.run(*inputs)
    return [np.asarray(o) if not isinstance(o, list) else o for o in outs]


def one_hot_responses(node: onnx.NodeProto, probe_shape, rest: list, opset: int | None = None) -> list[np.ndarray]:
    """The node's first output for a float32 one-hot first input at each
    position of `probe_shape` in turn, `rest` its other inputs: the columns
    of the matrix of an op linear in its first input (Resize, DFT)."""
    responses = []
    for j in range(int(np.prod(probe_shape))):
        probe = np.zeros(probe_shape, np.float32)
        probe.reshape(-1)[j] = 1.0
        responses.append(np.asarray(evaluate_node(node, [probe, *rest], opset)[0]))
    return responses


def evaluate(op: OnnxOp, args: tuple) -> tuple:
    """Run one op on numpy arrays through onnx.reference."""
    if op.ONNX_GRAPHS:
        raise ForgeOptError(f"{describe(op)}: ops with graph attributes cannot be evaluated")
    node = to_node_proto(op)
    present = iter([a for a in args if a is not None])
    inputs = [None if v is None else next(present) for v in op.onnx_operands()]
    try:
        outs = evaluate_node(node, inputs)
    except Exception as e:
        raise ForgeOptError(f"{describe(op)}: cannot evaluate: {type(e).__name__}: {e}") from None
    results = [r for r in op.onnx_results()]
    return tuple(np.asarray(o) for o, r in zip(outs, results) if r is not None)


def _run(self, interp: Interpreter, op: OnnxOp, args: tuple) -> tuple:
    if op.ONNX_OP_TYPE == "Constant" and op.properties.get("value") is not None:
        return (elements_to_array(op.properties["value"]),)
    return evaluate(op, args)


OnnxFunctions = register_impls(
    type(
        "OnnxFunctions",
        (InterpreterFunctions,),
        {f"run_{cls.ONNX_OP_TYPE}": impl(cls)(_run) for cls in ONNX_OPS},
    )
)

__all__ = ["OnnxFunctions", "elements_to_array", "evaluate", "evaluate_node", "one_hot_responses", "to_node_proto"]
