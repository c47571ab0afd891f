"""Integer products as ONNX defines them, on any CPU.

onnxruntime's MatMulInteger and QLinearMatMul run MLAS's 8-bit GEMMs. On a
CPU with AVX2 but without VNNI, the uint8 x int8 kernel adds each pair of
products into a saturating int16 (vpmaddubsw), so a row of large activations
against large weights comes out clipped; on an AVX-512 VNNI machine the same
model gives ONNX's exact int32 sums. An oracle that differs by CPU makes a
verdict differ by CPU, so before onnxruntime runs a model the oracle writes
each of those nodes as the arithmetic ONNX specifies: the operands widened
to int32, their zero points subtracted, an int32 MatMul (exact and of one
result on every CPU), and for QLinearMatMul the float32 requantization of
ONNX's reference (scaled by a_scale * b_scale / y_scale, shifted by
y_zero_point, rounded half to even, saturated).
"""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

#: the ops whose onnxruntime kernels differ by CPU, and which inputs are (a, b, a_zero, b_zero)
_PRODUCTS = {"MatMulInteger": (0, 1, 2, 3), "QLinearMatMul": (0, 3, 2, 5)}


def with_exact_integer_products(model: ModelProto) -> ModelProto:
    """`model`, or a copy with each MatMulInteger and QLinearMatMul of its
    main graph written as ONNX's exact arithmetic (the module's doc)."""
    if not any(_is_product(n) for n in model.graph.node):
        return model
    sizes = _known_sizes(model)
    nodes: list[NodeProto] = []
    for index, node in enumerate(model.graph.node):
        nodes.extend(_Writer(f"exact_{index}_{node.name}", sizes).node(node) if _is_product(node) else [node])
    exact = ModelProto()
    exact.CopyFrom(model)
    del exact.graph.node[:]
    exact.graph.node.extend(nodes)
    return exact


def _is_product(node: NodeProto) -> bool:
    return node.op_type in _PRODUCTS and node.domain in ("", "ai.onnx")


def _known_sizes(model: ModelProto) -> dict[str, int]:
    """The element count of each initializer and Constant node's value:
    what tells a per-row zero point or scale from a per-tensor one."""
    sizes = {t.name: int(np.prod(t.dims)) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            sizes[node.output[0]] = int(np.prod(node.attribute[0].t.dims))
    return sizes


class _Writer:
    """The nodes replacing one integer product, their values named apart
    by `prefix`."""

    def __init__(self, prefix: str, sizes: dict[str, int]):
        self.prefix = prefix
        self.sizes = sizes
        self.nodes: list[NodeProto] = []

    def add(self, op: str, inputs: list[str], **attributes) -> str:
        out = f"{self.prefix}/{op}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attributes))
        return out

    def constant(self, value: np.ndarray) -> str:
        out = f"{self.prefix}/Constant_{len(self.nodes)}"
        self.nodes.append(helper.make_node("Constant", [], [out], name=out, value=numpy_helper.from_array(value)))
        return out

    def per_row(self, value: str) -> bool:
        """Whether a parameter of a's rows is one per row ([M], M > 1),
        not one for the tensor."""
        return self.sizes.get(value, 1) > 1

    def rows(self, value: str, to: int) -> str:
        """A parameter of a's rows cast `to`, as [M, 1] where it is one per
        row, to broadcast along them."""
        cast = self.add("Cast", [value], to=to)
        if self.per_row(value):
            return self.add("Reshape", [cast, self.constant(np.array([-1, 1], np.int64))])
        return cast

    def node(self, node: NodeProto) -> list[NodeProto]:
        given = list(node.input) + [""] * (8 - len(node.input))
        a, b, a_zero, b_zero = (given[i] for i in _PRODUCTS[node.op_type])
        wide_a = self.add("Cast", [a], to=TensorProto.INT32)
        wide_b = self.add("Cast", [b], to=TensorProto.INT32)
        if a_zero:
            wide_a = self.add("Sub", [wide_a, self.rows(a_zero, TensorProto.INT32)])
        if b_zero:
            wide_b = self.add("Sub", [wide_b, self.add("Cast", [b_zero], to=TensorProto.INT32)])
        if node.op_type == "MatMulInteger":
            self.nodes.append(helper.make_node("MatMul", [wide_a, wide_b], [node.output[0]], name=node.name))
        else:
            self._requantize(node, self.add("MatMul", [wide_a, wide_b]), given)
        return self.nodes

    def _requantize(self, node: NodeProto, product: str, given: list[str]) -> None:
        """y = saturate(round(product * (a_scale * b_scale / y_scale)) +
        y_zero_point), as QuantizeLinear by 1 computes it from the scaled
        product: rounded half to even and saturated to y_zero_point's type."""
        a_scale, b_scale, y_scale, y_zero = given[1], given[4], given[6], given[7]
        fp32 = TensorProto.FLOAT
        scale = self.add("Div", [self.add("Mul", [self.rows(a_scale, fp32), self.add("Cast", [b_scale], to=fp32)]),
                                 self.rows(y_scale, fp32)])
        scaled = self.add("Mul", [self.add("Cast", [product], to=fp32), scale])
        per_row = self.per_row(y_scale)
        if per_row:  # a one per row, of y_scale's shape, on the rows axis
            y_wide = self.add("Cast", [y_scale], to=fp32)
            one = self.add("Div", [y_wide, y_wide])
        else:  # per tensor: a scalar scale and zero point ([1] is allowed in QLinearMatMul)
            one = self.constant(np.array(1.0, np.float32))
            y_zero = self.add("Reshape", [y_zero, self.constant(np.zeros(0, np.int64))])
        quantize = helper.make_node("QuantizeLinear", [scaled, one, y_zero], [node.output[0]], name=node.name)
        if per_row:
            quantize.attribute.append(helper.make_attribute("axis", -2))
        self.nodes.append(quantize)
