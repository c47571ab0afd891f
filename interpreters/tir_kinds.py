"""What each kind of `tir`'s element-wise, reduction and pooling ops
computes in numpy: the interpreter's side of `dialects/tir_functions.py`
(whose tables say what the kinds mean and how Forge computes them). Where
Forge's golden differs from numpy's, the kernel is Forge's (its record's
golden, `dialects/forge_functions/`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from forge_opt.dialects.forge_functions import conv, eltwise
from forge_opt.dialects.tir_functions import BinaryFn, PoolKind, ReduceFn, UnaryFn

UNARY: dict[UnaryFn, Callable[..., Any]] = {
    UnaryFn.ABS: np.abs,
    UnaryFn.ATAN: np.arctan,
    UnaryFn.COS: np.cos,
    UnaryFn.ERF: eltwise.erf,
    UnaryFn.EXP: np.exp,
    UnaryFn.GELU: eltwise.gelu,
    UnaryFn.GELU_TANH: lambda x: eltwise.gelu(x, "tanh"),
    UnaryFn.LOG: np.log,
    UnaryFn.NEG: np.negative,
    UnaryFn.NOT: np.logical_not,
    UnaryFn.RECIPROCAL: np.reciprocal,
    UnaryFn.RELU: eltwise.relu,
    UnaryFn.SIGMOID: eltwise.sigmoid,
    UnaryFn.SIN: np.sin,
    UnaryFn.SQRT: np.sqrt,
    UnaryFn.TANH: np.tanh,
}

BINARY: dict[BinaryFn, Callable[..., Any]] = {
    BinaryFn.ADD: np.add,
    BinaryFn.SUB: np.subtract,
    BinaryFn.MUL: np.multiply,
    BinaryFn.DIV: eltwise.divide,
    BinaryFn.MAX: np.maximum,
    BinaryFn.MIN: np.minimum,
    BinaryFn.POW: np.power,
    BinaryFn.MOD: np.mod,
    BinaryFn.EQ: np.equal,
    BinaryFn.NE: np.not_equal,
    BinaryFn.GT: np.greater,
    BinaryFn.GE: np.greater_equal,
    BinaryFn.LT: np.less,
    BinaryFn.LE: np.less_equal,
    BinaryFn.AND: np.logical_and,
    BinaryFn.OR: np.logical_or,
}

REDUCE: dict[ReduceFn, Callable[..., Any]] = {
    ReduceFn.SUM: np.sum,
    ReduceFn.MEAN: np.mean,
    ReduceFn.MAX: np.max,
}

POOL: dict[PoolKind, Callable[..., Any]] = {
    PoolKind.MAX: conv.max_pool2d,
    PoolKind.AVG: conv.avg_pool2d,
}

NUMPY: dict[type, dict] = {UnaryFn: UNARY, BinaryFn: BINARY, ReduceFn: REDUCE, PoolKind: POOL}
