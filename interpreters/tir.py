"""numpy implementations of the `tir` ops."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions, impl, register_impls

from forge_opt import dtypes
from forge_opt.dialects import tir
from forge_opt.dialects.elements import attr_to_array, fill_value
from forge_opt.dialects.forge_functions import conv, eltwise, nn
from forge_opt.interpreters.tir_kinds import BINARY, POOL, REDUCE, UNARY


def _dtype(value) -> np.dtype:
    return dtypes.numpy_dtype(value.type.element_type)


def _ints(attr) -> list[int]:
    return list(attr.get_values())


@register_impls
class TirFunctions(InterpreterFunctions):
    @impl(tir.SplitOp)
    def run_split(self, interp: Interpreter, op: tir.SplitOp, args: tuple):
        bounds = np.cumsum(op.sections.get_values())[:-1]
        return tuple(np.split(args[0], bounds, axis=op.axis.value.data))

    @impl(tir.StridedSliceOp)
    def run_strided_slice(self, interp: Interpreter, op: tir.StridedSliceOp, args: tuple):
        x = args[0]
        index = [slice(None)] * x.ndim
        for axis, begin, end, stride in op.slices():
            index[axis] = slice(begin, end, stride)
        return (x[tuple(index)],)

    @impl(tir.ConstantOp)
    def run_constant(self, interp: Interpreter, op: tir.ConstantOp, args: tuple):
        return (attr_to_array(op.value),)

    @impl(tir.FullOp)
    def run_full(self, interp: Interpreter, op: tir.FullOp, args: tuple):
        return (np.full(dtypes.tensor(op.output.type).get_shape(), fill_value(op.fill), _dtype(op.output)),)

    @impl(tir.UnaryOp)
    def run_unary(self, interp: Interpreter, op: tir.UnaryOp, args: tuple):
        return (np.asarray(UNARY[op.fn.data](args[0])).astype(_dtype(op.output)),)

    @impl(tir.BinaryOp)
    def run_binary(self, interp: Interpreter, op: tir.BinaryOp, args: tuple):
        return (np.asarray(BINARY[op.fn.data](*args)).astype(_dtype(op.output)),)

    @impl(tir.WhereOp)
    def run_where(self, interp: Interpreter, op: tir.WhereOp, args: tuple):
        return (eltwise.where(*args),)

    @impl(tir.CastOp)
    def run_cast(self, interp: Interpreter, op: tir.CastOp, args: tuple):
        return (args[0].astype(_dtype(op.output)),)

    @impl(tir.ClipOp)
    def run_clip(self, interp: Interpreter, op: tir.ClipOp, args: tuple):
        return (eltwise.clip(args[0], op.min.value.data, op.max.value.data),)

    @impl(tir.MatmulOp)
    def run_matmul(self, interp: Interpreter, op: tir.MatmulOp, args: tuple):
        return (nn.matmul(*args),)

    @impl(tir.Conv2dOp)
    def run_conv2d(self, interp: Interpreter, op: tir.Conv2dOp, args: tuple):
        return (
            conv.conv2d(
                args[0], args[1], args[2] if len(args) > 2 else None,
                stride=_ints(op.strides), padding=_ints(op.pads),
                dilation=_ints(op.dilations), groups=op.groups.value.data,
            ),
        )

    @impl(tir.ConvTranspose2dOp)
    def run_conv_transpose2d(self, interp: Interpreter, op: tir.ConvTranspose2dOp, args: tuple):
        return (
            conv.conv2d_transpose(
                args[0], args[1], args[2] if len(args) > 2 else None,
                stride=_ints(op.strides), padding=_ints(op.pads), dilation=_ints(op.dilations),
                groups=op.groups.value.data, output_padding=_ints(op.output_padding),
            ),
        )

    @impl(tir.Pool2dOp)
    def run_pool2d(self, interp: Interpreter, op: tir.Pool2dOp, args: tuple):
        top, left, bottom, right = _ints(op.pads)
        common = dict(
            kernel_size=_ints(op.kernel), stride=_ints(op.strides),
            padding=[left, right, top, bottom], ceil_mode=bool(op.ceil_mode.value.data),
        )
        if op.kind.data == "max":
            common["dilation"] = _ints(op.dilations)
        else:
            common["count_include_pad"] = bool(op.count_include_pad.value.data)
        return (POOL[op.kind.data](args[0], **common),)

    @impl(tir.BatchnormOp)
    def run_batchnorm(self, interp: Interpreter, op: tir.BatchnormOp, args: tuple):
        return (nn.batchnorm(*args, epsilon=op.epsilon.value.data),)

    @impl(tir.SoftmaxOp)
    def run_softmax(self, interp: Interpreter, op: tir.SoftmaxOp, args: tuple):
        fn = nn.log_softmax if op.log.value.data else nn.softmax
        return (fn(args[0], dim=op.axis.value.data),)

    @impl(tir.LayernormOp)
    def run_layernorm(self, interp: Interpreter, op: tir.LayernormOp, args: tuple):
        return (nn.layernorm(*args, epsilon=op.epsilon.value.data),)

    @impl(tir.ReshapeOp)
    def run_reshape(self, interp: Interpreter, op: tir.ReshapeOp, args: tuple):
        return (args[0].reshape(op.output.type.get_shape()),)

    @impl(tir.TransposeOp)
    def run_transpose(self, interp: Interpreter, op: tir.TransposeOp, args: tuple):
        return (np.transpose(args[0], _ints(op.perm)),)

    @impl(tir.ConcatOp)
    def run_concat(self, interp: Interpreter, op: tir.ConcatOp, args: tuple):
        return (np.concatenate(args, axis=op.axis.value.data),)

    @impl(tir.ReduceOp)
    def run_reduce(self, interp: Interpreter, op: tir.ReduceOp, args: tuple):
        out = REDUCE[op.fn.data](args[0], axis=tuple(_ints(op.axes)), keepdims=bool(op.keepdims.value.data))
        return (np.asarray(out).astype(_dtype(op.output)),)

    @impl(tir.ArgmaxOp)
    def run_argmax(self, interp: Interpreter, op: tir.ArgmaxOp, args: tuple):
        out = np.argmax(args[0], axis=op.axis.value.data, keepdims=bool(op.keepdims.value.data))
        return (out.astype(np.int64),)

    @impl(tir.TileOp)
    def run_tile(self, interp: Interpreter, op: tir.TileOp, args: tuple):
        return (np.tile(args[0], _ints(op.repeats)),)

    @impl(tir.CumsumOp)
    def run_cumsum(self, interp: Interpreter, op: tir.CumsumOp, args: tuple):
        return (np.cumsum(args[0], axis=op.axis.value.data).astype(args[0].dtype),)

    @impl(tir.PadOp)
    def run_pad(self, interp: Interpreter, op: tir.PadOp, args: tuple):
        pads = _ints(op.pads)
        pairs = [(pads[2 * i], pads[2 * i + 1]) for i in range(args[0].ndim)]
        return (np.pad(args[0], pairs, constant_values=op.value.value.data),)

    @impl(tir.GatherOp)
    def run_gather(self, interp: Interpreter, op: tir.GatherOp, args: tuple):
        x, indices = args
        axis = op.axis.value.data
        indices = np.where(indices < 0, indices + x.shape[axis], indices)
        return (np.take(x, indices.astype(np.int64), axis=axis),)

    @impl(tir.BroadcastOp)
    def run_broadcast(self, interp: Interpreter, op: tir.BroadcastOp, args: tuple):
        return (np.broadcast_to(args[0], op.output.type.get_shape()).copy(),)
