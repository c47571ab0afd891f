"""`tir` ops that move data: reshape, broadcast, transpose, concat,
reductions, argmax, tile, cumsum, pad, gather, split, strided slices."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    I64,
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    TensorType,
    f32,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    ParsePropInAttrDict,
    operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import Pure

from forge_opt.dialects import tir_shapes as shapes
from forge_opt.dialects.irdl_fast import op_definition
from forge_opt.dialects.tir_base import OneInputOp, TirOp, int_attr, ints_attr, like, like_elem, shape_of, tied
from forge_opt.dialects.tir_functions import (
    ReduceFn,
    ReduceFnAttr,
)
from forge_opt.dialects.tir_nn import SoftmaxOp
from forge_opt.dialects.tir_shapes import ShapeError
from forge_opt.dtypes import tensor_type

# -- data movement ------------------------------------------------------------------


@op_definition
class ReshapeOp(OneInputOp):
    """Same elements, the result type's shape."""

    name = "tir.reshape"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[self.infer(input.type, shape)])

    @staticmethod
    def infer(input: Attribute, shape: Sequence[int]) -> TensorType:
        return like(input, shapes.reshape(shape_of(input), shape))

    def inferred(self):
        return [self.infer(self.input.type, shape_of(self.output.type))]


@op_definition
class BroadcastOp(OneInputOp):
    """Expand size-1 (or missing leading) dimensions to the result shape."""

    name = "tir.broadcast"

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        super().__init__(operands=[input], result_types=[self.infer(input.type, shape)])

    @staticmethod
    def infer(input: Attribute, shape: Sequence[int]) -> TensorType:
        return like(input, shapes.broadcast_to(shape_of(input), shape))

    def inferred(self):
        return [self.infer(self.input.type, shape_of(self.output.type))]


@op_definition
class TransposeOp(OneInputOp):
    """Permute dimensions: result dim i is input dim perm[i]."""

    name = "tir.transpose"
    perm = prop_def(DenseArrayBase.constr(i64))
    assembly_format = "$input `perm` $perm attr-dict `:` type($input) `->` type($output)"

    def __init__(self, input: SSAValue, perm: Sequence[int]):
        self.init_inferred({"input": input}, perm=ints_attr(perm))

    @staticmethod
    def infer(input: Attribute, perm: Sequence[int]) -> TensorType:
        return like(input, shapes.transpose(shape_of(input), perm))



@op_definition
class ConcatOp(TirOp):
    """Join tensors along one axis."""

    name = "tir.concat"
    inputs = var_operand_def(tied())
    output = result_def(tied())
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    assembly_format = "$inputs `axis` $axis attr-dict `:` type($inputs) `->` type($output)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int):
        self.init_inferred({"inputs": list(inputs)}, axis=int_attr(axis))

    @staticmethod
    def infer(inputs: Sequence[Attribute], axis: int) -> TensorType:
        return like(inputs[0], shapes.concat([shape_of(t) for t in inputs], axis))


@op_definition
class ReduceOp(OneInputOp):
    """Reduce (`fn`: sum, mean, max) over `axes`, keeping them as size 1 or not."""

    name = "tir.reduce"
    fn = prop_def(ReduceFnAttr)
    axes = prop_def(DenseArrayBase.constr(i64))
    keepdims = prop_def(IntegerAttr[I64])
    assembly_format = "$fn $input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, fn: ReduceFn, input: SSAValue, axes: Sequence[int], keepdims: bool):
        if not isinstance(fn, ReduceFn):  # a string would build an attribute that prints and compares wrongly
            raise TypeError(f"tir.reduce takes a ReduceFn, not {fn!r}")
        self.init_inferred({"input": input}, fn=ReduceFnAttr(fn), axes=ints_attr(axes), keepdims=int_attr(keepdims))

    @staticmethod
    def infer(input: Attribute, axes: Sequence[int], keepdims: bool) -> TensorType:
        return like(input, shapes.reduce(shape_of(input), list(axes), bool(keepdims)))



@op_definition
class ArgmaxOp(OneInputOp):
    """Index of the first maximum along `axis`, as i64."""

    name = "tir.argmax"
    axis = prop_def(IntegerAttr[I64])
    keepdims = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, axis: int, keepdims: bool):
        self.init_inferred({"input": input}, axis=int_attr(axis), keepdims=int_attr(keepdims))

    @staticmethod
    def infer(input: Attribute, axis: int, keepdims: bool) -> TensorType:
        return tensor_type(i64, shapes.reduce(shape_of(input), [axis], bool(keepdims)))



@op_definition
class TileOp(OneInputOp):
    """Repeat the whole tensor `repeats[i]` times along each dimension."""

    name = "tir.tile"
    repeats = prop_def(DenseArrayBase.constr(i64))

    def __init__(self, input: SSAValue, repeats: Sequence[int]):
        self.init_inferred({"input": input}, repeats=ints_attr(repeats))

    @staticmethod
    def infer(input: Attribute, repeats: Sequence[int]) -> TensorType:
        return like(input, shapes.tile(shape_of(input), repeats))



@op_definition
class CumsumOp(OneInputOp):
    """Inclusive running sum along `axis`."""

    name = "tir.cumsum"
    axis = prop_def(IntegerAttr[I64])

    def __init__(self, input: SSAValue, axis: int):
        self.init_inferred({"input": input}, axis=int_attr(axis))

    @staticmethod
    def infer(input: Attribute, axis: int) -> TensorType:
        return SoftmaxOp.infer(input, axis)



@op_definition
class PadOp(OneInputOp):
    """Pad with a constant; `pads` is [d0_lo, d0_hi, d1_lo, d1_hi, ...]."""

    name = "tir.pad"
    pads = prop_def(DenseArrayBase.constr(i64))
    value = prop_def(FloatAttr)

    def __init__(self, input: SSAValue, pads: Sequence[int], value: float):
        self.init_inferred({"input": input}, pads=ints_attr(pads), value=FloatAttr(value, f32))

    @staticmethod
    def infer(input: Attribute, pads: Sequence[int]) -> TensorType:
        return like(input, shapes.pad(shape_of(input), pads))



@op_definition
class GatherOp(TirOp):
    """numpy `take(input, indices, axis)`; negative indices count from the end."""

    name = "tir.gather"
    input = operand_def(TensorType)
    indices = operand_def(TensorType)
    output = result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    traits = traits_def(Pure())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input `,` $indices attr-dict `:` type($input) `,` type($indices) `->` type($output)"

    def __init__(self, input: SSAValue, indices: SSAValue, axis: int):
        self.init_inferred({"input": input, "indices": indices}, axis=int_attr(axis))

    @staticmethod
    def infer(input: Attribute, indices: Attribute, axis: int) -> TensorType:
        if not isinstance(like_elem(indices), IntegerType):
            raise ShapeError(f"indices must be integers, not {indices}")
        return like(input, shapes.gather(shape_of(input), shape_of(indices), axis))



@op_definition
class SplitOp(TirOp):
    """Split a tensor along one axis into consecutive pieces, one per result.

    `sections` lists the size of each piece; they sum to the axis' size and
    may be zero. `split_sections` turns the other rules frameworks use
    (equal parts, size per part) into sections.
    """

    name = "tir.split"
    input = operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = prop_def(IntegerAttr[I64])
    sections = prop_def(DenseArrayBase.constr(i64))
    traits = traits_def(Pure())
    assembly_format = "$input `axis` $axis `sections` $sections attr-dict `:` type($input) `->` type($outputs)"

    def __init__(self, input: SSAValue, axis: int, sections: Sequence[int]):
        rank = len(shape_of(input.type))
        if not -rank <= axis < rank:
            raise ShapeError(f"axis {axis} is out of range for rank {rank}")
        axis %= rank
        self.init_inferred({"input": input}, axis=int_attr(axis), sections=ints_attr(sections))

    @staticmethod
    def infer(input: Attribute, axis: int, sections: Sequence[int]) -> list[TensorType]:
        return [like(input, s) for s in shapes.split(shape_of(input), axis, list(sections))]



@op_definition
class StridedSliceOp(OneInputOp):
    """Take `begin:end:stride` along each listed axis; other axes are kept."""

    name = "tir.strided_slice"
    axes = prop_def(DenseArrayBase.constr(i64))
    begin = prop_def(DenseArrayBase.constr(i64))
    end = prop_def(DenseArrayBase.constr(i64))
    strides = prop_def(DenseArrayBase.constr(i64))
    assembly_format = (
        "$input `axes` $axes `begin` $begin `end` $end `strides` $strides attr-dict `:` type($input) `->` type($output)"
    )

    def __init__(
        self, input: SSAValue, axes: Sequence[int], begin: Sequence[int], end: Sequence[int], strides: Sequence[int]
    ):
        properties = {"axes": axes, "begin": begin, "end": end, "strides": strides}
        self.init_inferred({"input": input}, **{k: ints_attr(v) for k, v in properties.items()})

    @staticmethod
    def infer(input: Attribute, axes, begin, end, strides) -> TensorType:
        return like(input, shapes.strided_slice(shape_of(input), axes, begin, end, strides))

    def slices(self) -> list[tuple[int, int, int, int]]:
        """(axis, begin, end, stride) per sliced axis."""
        return list(
            zip(self.axes.get_values(), self.begin.get_values(), self.end.get_values(), self.strides.get_values())
        )
