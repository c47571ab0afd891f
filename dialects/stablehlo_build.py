"""`Hlo`: typed builders of `stablehlo` ops at the end of a block, with the
result type each op's rule gives, so a Forge function's StableHLO form
(`forge_functions/stablehlo_*.py`) reads as the computation it is."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntAttr, IntegerAttr, TensorType, i1, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from forge_opt import dtypes
from forge_opt.dialects import stablehlo as hlo
from forge_opt.dialects.elements import array_to_attr


def shape(v: SSAValue) -> tuple[int, ...]:
    return tuple(TensorType.get_shape(v.type))  # type: ignore[arg-type]


def element(v: SSAValue) -> Attribute:
    return v.type.element_type  # type: ignore[attr-defined]


def tensor(element_type: Attribute, dims: Sequence[int]) -> TensorType:
    return TensorType(element_type, list(dims))


def _pairs(pads: Sequence[tuple[int, int]]) -> DenseIntOrFPElementsAttr:
    return array_to_attr(np.array(pads, np.int64).reshape(len(pads), 2))


class Hlo:
    """Appends ops to `block`; each method returns the new op's result."""

    def __init__(self, block: Block):
        self.block = block

    def add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    # -- values -----------------------------------------------------------------

    def const(self, array: np.ndarray) -> SSAValue:
        attr = array_to_attr(np.asarray(array))
        return self.add(hlo.ConstantOp([], attr.type, {"value": attr}))

    def full(self, value: float | int | bool, element_type: Attribute, dims: Sequence[int] = ()) -> SSAValue:
        """A splat of `value` in `element_type` (the bits numpy's cast gives)."""
        return self.const(np.full(tuple(dims), value, dtypes.numpy_dtype(element_type)))

    def like(self, value: float | int, x: SSAValue) -> SSAValue:
        """`value` in x's element type and shape."""
        return self.full(value, element(x), shape(x))

    def iota(self, element_type: Attribute, dims: Sequence[int], axis: int) -> SSAValue:
        return self.add(hlo.IotaOp([], tensor(element_type, dims), {"iota_dimension": IntegerAttr(axis, i64)}))

    # -- element by element -------------------------------------------------------

    def unary(self, name: str, x: SSAValue, element_type: Attribute | None = None) -> SSAValue:
        cls = hlo.ELEMENTWISE[name if "." in name else f"stablehlo.{name}"]
        return self.add(cls([x], tensor(element_type or element(x), shape(x))))

    def convert(self, x: SSAValue, element_type: Attribute) -> SSAValue:
        return x if element(x) == element_type else self.unary("convert", x, element_type)

    def broadcast_to(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        """numpy's broadcast of x to `dims` (aligned from the right)."""
        if shape(x) == tuple(dims):
            return x
        offset = len(dims) - len(shape(x))
        return self.add(hlo.BroadcastInDimOp([x], tensor(element(x), dims), {
            "broadcast_dimensions": hlo.i64_array(range(offset, len(dims)))}))

    def binary(self, name: str, a: SSAValue, b: SSAValue, element_type: Attribute | None = None) -> SSAValue:
        """`name` of a and b broadcast numpy-style, both in the first's element type."""
        dims = np.broadcast_shapes(shape(a), shape(b))
        a, b = self.broadcast_to(a, dims), self.broadcast_to(self.convert(b, element(a)), dims)
        cls = hlo.ELEMENTWISE[f"stablehlo.{name}"]
        return self.add(cls([a, b], tensor(element_type or element(a), dims)))

    def compare(self, direction: str, a: SSAValue, b: SSAValue) -> SSAValue:
        dims = np.broadcast_shapes(shape(a), shape(b))
        a, b = self.broadcast_to(a, dims), self.broadcast_to(self.convert(b, element(a)), dims)
        return self.add(hlo.CompareOp([a, b], tensor(i1, dims), {
            "comparison_direction": hlo.ComparisonDirectionAttr(hlo.ComparisonDirection(direction))}))

    def select(self, condition: SSAValue, x: SSAValue, y: SSAValue) -> SSAValue:
        dims = np.broadcast_shapes(shape(condition), shape(x), shape(y))
        c, x, y = (self.broadcast_to(v, dims) for v in (condition, x, self.convert(y, element(x))))
        return self.add(hlo.ELEMENTWISE["stablehlo.select"]([c, x, y], tensor(element(x), dims)))

    # -- shapes ---------------------------------------------------------------------

    def reshape(self, x: SSAValue, dims: Sequence[int]) -> SSAValue:
        return x if shape(x) == tuple(dims) else self.add(hlo.ReshapeOp([x], tensor(element(x), dims)))

    def transpose(self, x: SSAValue, permutation: Sequence[int]) -> SSAValue:
        if list(permutation) == list(range(len(permutation))):
            return x
        dims = [shape(x)[p] for p in permutation]
        return self.add(hlo.TransposeOp([x], tensor(element(x), dims), {"permutation": hlo.i64_array(permutation)}))

    def slice(self, x: SSAValue, starts: Sequence[int], limits: Sequence[int], strides: Sequence[int]) -> SSAValue:
        dims = [len(range(s, e, k)) for s, e, k in zip(starts, limits, strides)]
        return self.add(hlo.SliceOp([x], tensor(element(x), dims), {
            "start_indices": hlo.i64_array(starts), "limit_indices": hlo.i64_array(limits),
            "strides": hlo.i64_array(strides)}))

    def slice_axis(self, x: SSAValue, axis: int, start: int, stop: int, stride: int = 1) -> SSAValue:
        starts, limits, strides = [0] * len(shape(x)), list(shape(x)), [1] * len(shape(x))
        starts[axis], limits[axis], strides[axis] = start, stop, stride
        return self.slice(x, starts, limits, strides)

    def concat(self, xs: Sequence[SSAValue], axis: int) -> SSAValue:
        if len(xs) == 1:
            return xs[0]
        dims = list(shape(xs[0]))
        dims[axis] = sum(shape(x)[axis] for x in xs)
        return self.add(hlo.ConcatenateOp(xs, tensor(element(xs[0]), dims), {"dimension": IntegerAttr(axis, i64)}))

    def pad(self, x: SSAValue, value: SSAValue, low: Sequence[int], high: Sequence[int]) -> SSAValue:
        dims = [d + lo + hi for d, lo, hi in zip(shape(x), low, high)]
        return self.add(hlo.PadOp([x, value], tensor(element(x), dims), {
            "edge_padding_low": hlo.i64_array(low), "edge_padding_high": hlo.i64_array(high),
            "interior_padding": hlo.i64_array([0] * len(dims))}))

    def reverse(self, x: SSAValue, axes: Sequence[int]) -> SSAValue:
        return self.add(hlo.ReverseOp([x], x.type, {"dimensions": hlo.i64_array(axes)}))

    # -- contractions, reductions, windows --------------------------------------------------

    def dot(self, a: SSAValue, b: SSAValue, batch: tuple[Sequence[int], Sequence[int]],
            contract: tuple[Sequence[int], Sequence[int]], element_type: Attribute | None = None) -> SSAValue:
        """dot_general: batch dims first, then a's free dims, then b's."""
        free_a = [d for i, d in enumerate(shape(a)) if i not in (*batch[0], *contract[0])]
        free_b = [d for i, d in enumerate(shape(b)) if i not in (*batch[1], *contract[1])]
        dims = [shape(a)[i] for i in batch[0]] + free_a + free_b
        numbers = hlo.DotAttr(hlo.ints(batch[0]), hlo.ints(batch[1]), hlo.ints(contract[0]), hlo.ints(contract[1]))
        return self.add(hlo.DotGeneralOp([a, b], tensor(element_type or element(a), dims),
                                         {"dot_dimension_numbers": numbers}))

    def combiner(self, name: str, element_types: Sequence[Attribute]) -> Region:
        """A region combining two scalars of each type by `name` (`add`, `maximum`)."""
        scalars = [tensor(t, []) for t in element_types]
        block = Block(arg_types=[*scalars, *scalars])
        inner = Hlo(block)
        a, b = block.args
        block.add_op(hlo.ReturnOp(operands=[[inner.binary(name, a, b)]]))
        return Region(block)

    def reduce(self, x: SSAValue, axes: Sequence[int], kind: str, init: float) -> SSAValue:
        """x reduced over `axes` by `kind` (`add`, `maximum`), from `init`; the axes dropped."""
        dims = [d for i, d in enumerate(shape(x)) if i not in axes]
        start = self.full(init, element(x))
        op = hlo.ReduceOp(operands=[[x, start]], result_types=[[tensor(element(x), dims)]],
                          properties={"dimensions": hlo.i64_array(sorted(axes))},
                          regions=[self.combiner(kind, [element(x)])])
        return self.add(op)

    def reduce_window(self, x: SSAValue, kind: str, init: float, window: Sequence[int], strides: Sequence[int],
                      padding: Sequence[tuple[int, int]], dilations: Sequence[int] | None = None) -> SSAValue:
        def out(size, k, s, lo, hi, d):
            return (size + lo + hi - ((k - 1) * d + 1)) // s + 1
        dil = list(dilations or [1] * len(window))
        dims = [out(*args) for args in zip(shape(x), window, strides, *zip(*padding), dil)]
        props = {"window_dimensions": hlo.i64_array(window), "window_strides": hlo.i64_array(strides),
                 "padding": _pairs(padding)}
        if dilations:
            props["window_dilations"] = hlo.i64_array(dil)
        start = self.full(init, element(x))
        return self.add(hlo.ReduceWindowOp(operands=[[x, start]], result_types=[[tensor(element(x), dims)]],
                                           properties=props, regions=[self.combiner(kind, [element(x)])]))

    def convolution(self, x: SSAValue, w: SSAValue, out_dims: Sequence[int], strides: Sequence[int],
                    padding: Sequence[tuple[int, int]], lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
                    groups: int) -> SSAValue:
        """A 2-D convolution of NCHW activations by OIHW weights."""
        layout = hlo.ConvAttr(hlo.ints([-1, -2, 0, 1]), hlo.ints([-1, -2, 0, 1]), hlo.ints([-1, -2, 0, 1]))
        return self.add(hlo.ConvolutionOp([x, w], tensor(element(x), out_dims), {
            "dimension_numbers": layout, "window_strides": hlo.i64_array(strides), "padding": _pairs(padding),
            "lhs_dilation": hlo.i64_array(lhs_dilation), "rhs_dilation": hlo.i64_array(rhs_dilation),
            "feature_group_count": IntegerAttr(groups, i64), "batch_group_count": IntegerAttr(1, i64)}))

    def take(self, table: SSAValue, indices: SSAValue, axis: int) -> SSAValue:
        """numpy's take: table's slices along `axis` at each index (an index's dims replace the axis), a
        negative index counted from the end (a gather clamps it)."""
        t, idx = shape(table), shape(indices)
        size = self.full(t[axis], element(indices))
        negative = self.compare("LT", indices, self.full(0, element(indices)))
        indices = self.select(negative, self.binary("add", indices, size), indices)
        offset = [i for i in range(len(t)) if i != axis]
        out = list(t[:axis]) + list(idx) + list(t[axis + 1:])
        numbers = hlo.GatherAttr(hlo.ints([i if i < axis else i + len(idx) - 1 for i in offset]), hlo.ints([axis]),
                                 hlo.ints([axis]), IntAttr(len(idx)))
        sizes = [1 if i == axis else d for i, d in enumerate(t)]
        return self.add(hlo.GatherOp([table, indices], tensor(element(table), out), {
            "dimension_numbers": numbers, "slice_sizes": hlo.i64_array(sizes)}))
