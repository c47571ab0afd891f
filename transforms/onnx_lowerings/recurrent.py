"""LSTM, GRU and RNN with a static sequence length, unrolled into Matmul,
Sigmoid, Tanh and element-wise ops per step (Forge has no recurrent op;
its TVM path unrolls too). The input projection of every step is one Matmul
up front; each step adds the recurrent projection and applies the cell.
Gate orders and formulas are ONNX's (LSTM `iofc`, GRU `zrh`).

Each projection's bias is added to the whole projection and its gates are
then sliced from the sum, so a projection is a Linear whose output is taken
apart by columns (`tp/fused_parts`): across devices each gate is split by
hidden units, the cell runs on each device's units, and only the hidden
state is gathered once a step."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.ir import SSAValue

from forge_opt.dialects import onnx_ops as onnx
from forge_opt.dialects import tir
from forge_opt.dialects.tir_functions import BinaryFn, UnaryFn
from forge_opt.transforms.fold_constants import constant_array
from forge_opt.transforms.lowering import LoweringTable, static_shape
from forge_opt.transforms.tir_builder import TirEmitter

LOWERINGS = LoweringTable()
lowers = LOWERINGS.lowers

_ACTIVATIONS = {"Sigmoid": UnaryFn.SIGMOID, "Tanh": UnaryFn.TANH, "Relu": UnaryFn.RELU}

#: one step: the direction, its input's projection by gates, h and c in; h and c out
Cell = Callable[[TirEmitter, "_Direction", list[SSAValue], SSAValue, SSAValue | None],
                tuple[SSAValue, SSAValue | None]]


def _take(e: TirEmitter, x: SSAValue, index: int, axis: int) -> SSAValue:
    """x[index] along `axis`, the axis removed."""
    return e.gather(x, e.constant(np.array(index, np.int64)), axis)


def _cols(e: TirEmitter, x: SSAValue, start: int, size: int) -> SSAValue:
    last = len(static_shape(x, e)) - 1
    return e.slice(x, [last], [start], [start + size], [1])


def _add(e: TirEmitter, *values: SSAValue | None) -> SSAValue:
    present = [v for v in values if v is not None]
    total = present[0]
    for v in present[1:]:
        total = e.binary(BinaryFn.ADD, total, v)
    return total


def _mul(e: TirEmitter, a: SSAValue, b: SSAValue) -> SSAValue:
    return e.binary(BinaryFn.MUL, a, b)


class _Direction:
    """One direction's weights and activations."""

    def __init__(self, op, e: TirEmitter, d: int, gates: int, hidden: int, activations: list[str]):
        self.hidden = hidden
        self.gates = gates
        self.activations = activations
        self.clip = op.clip.value.data if op.clip is not None else None
        self.recurrent_t = e.transpose(_take(e, op.R, d, 0), [1, 0])  # (H, G*H)
        self.input_t = e.transpose(_take(e, op.W, d, 0), [1, 0])  # (I, G*H)
        self.input_bias = self.recurrent_bias = None
        if op.B is not None:
            b = _take(e, op.B, d, 0)
            self.input_bias = _cols(e, b, 0, gates * hidden)
            self.recurrent_bias = _cols(e, b, gates * hidden, gates * hidden)
        self.peepholes = _take(e, op.P, d, 0) if isinstance(op, onnx.LSTMOp) and op.P is not None else None

    def gates_of(self, e: TirEmitter, values: SSAValue, count: int | None = None) -> list[SSAValue]:
        """The first `count` gates' columns of `values` (all of them by default)."""
        count = self.gates if count is None else count
        return [_cols(e, values, k * self.hidden, self.hidden) for k in range(count)] if count > 1 else [values]

    def recurrence(self, e: TirEmitter, h: SSAValue, first: int = 0, count: int | None = None) -> list[SSAValue]:
        """h's projection onto gates first..first+count, its bias added, taken apart by gates."""
        count = self.gates - first if count is None else count
        whole = first == 0 and count == self.gates
        weight = self.recurrent_t if whole else _cols(e, self.recurrent_t, first * self.hidden, count * self.hidden)
        bias = self.recurrent_bias
        if bias is not None and not whole:
            bias = _cols(e, bias, first * self.hidden, count * self.hidden)
        return self.gates_of(e, _add(e, e.matmul(h, weight), bias), count)

    def act(self, e: TirEmitter, k: int, x: SSAValue) -> SSAValue:
        if self.clip is not None:
            x = e.value(tir.ClipOp(x, -self.clip, self.clip))
        return e.unary(_ACTIVATIONS[self.activations[k]], x)


def _initial(e: TirEmitter, given: SSAValue | None, d: int, batch: int, hidden: int) -> SSAValue:
    """Direction d's initial state, zeros when the node gives none."""
    return _take(e, given, d, 0) if given is not None else e.constant(np.zeros((batch, hidden), np.float32))


def _recurrent(op, e: TirEmitter, gates: int, defaults: list[str], cell: Cell, with_cell_state: bool):
    x = op.X
    shape = static_shape(x, e)
    if op.layout.value.data:
        x = e.transpose(x, [1, 0, 2])
        shape = [shape[1], shape[0], shape[2]]
    steps, batch, _ = shape
    hidden = static_shape(op.R, e, "recurrence weight")[-1]
    direction = op.direction.data
    dirs = 2 if direction == "bidirectional" else 1
    if op.sequence_lens is not None:
        lens = constant_array(op.sequence_lens)
        if lens is None:
            raise e.error("the 'sequence_lens' input must be a compile-time constant")
        if np.any(lens != steps):
            shorter = sorted(set(lens.tolist()))
            raise e.error(f"sequences shorter than the input ({shorter} of {steps} steps) are not supported")
    names = [a.data for a in op.activations.data] if op.activations is not None else defaults * dirs
    for name in names:
        if name not in _ACTIVATIONS:
            raise e.error(f"the activation '{name}' is not supported (only {', '.join(_ACTIVATIONS)})")
    if isinstance(op, onnx.LSTMOp) and op.input_forget is not None and op.input_forget.value.data:
        raise e.error("input_forget=1 is not supported")
    per = len(defaults)
    outputs, last_h, last_c = [], [], []
    for d in range(dirs):
        w = _Direction(op, e, d, gates, hidden, names[d * per : (d + 1) * per])
        # (steps, batch, H) a gate: every step's input projection
        projected = w.gates_of(e, _add(e, e.matmul(x, w.input_t), w.input_bias))
        h = _initial(e, op.initial_h, d, batch, hidden)
        c = _initial(e, op.initial_c, d, batch, hidden) if with_cell_state else None
        ys: list[SSAValue | None] = [None] * steps
        reverse = direction == "reverse" or d == 1
        for t in reversed(range(steps)) if reverse else range(steps):
            h, c = cell(e, w, [_take(e, gate, t, 0) for gate in projected], h, c)
            ys[t] = h
        outputs.append(e.concat([e.reshape(y, [1, 1, batch, hidden]) for y in ys if y], 0))
        last_h.append(e.reshape(h, [1, batch, hidden]))
        if c is not None:
            last_c.append(e.reshape(c, [1, batch, hidden]))
    y = outputs[0] if dirs == 1 else e.concat(outputs, 1)  # (steps, dirs, batch, H)
    y_h = last_h[0] if dirs == 1 else e.concat(last_h, 0)  # (dirs, batch, H)
    y_c = (last_c[0] if dirs == 1 else e.concat(last_c, 0)) if last_c else None
    if op.layout.value.data:
        y = e.transpose(y, [2, 0, 1, 3])
        y_h = e.transpose(y_h, [1, 0, 2])
        y_c = e.transpose(y_c, [1, 0, 2]) if y_c is not None else None
    values = [y, y_h, y_c] if with_cell_state else [y, y_h]
    return [v for v, r in zip(values, op.onnx_results()) if r is not None]


def _lstm_cell(e: TirEmitter, w: _Direction, xw: list[SSAValue], h: SSAValue, c: SSAValue | None):
    assert c is not None
    i_, o_, f_, g_ = (_add(e, x, r) for x, r in zip(xw, w.recurrence(e, h)))
    peep = None
    if w.peepholes is not None:  # P is [p_i, p_o, p_f]: input and forget gates see C(t-1), output C(t)
        peep = [_cols(e, w.peepholes, k * w.hidden, w.hidden) for k in range(3)]
        i_ = _add(e, i_, _mul(e, peep[0], c))
        f_ = _add(e, f_, _mul(e, peep[2], c))
    i, f, g = w.act(e, 0, i_), w.act(e, 0, f_), w.act(e, 1, g_)
    c = _add(e, _mul(e, f, c), _mul(e, i, g))
    if peep is not None:
        o_ = _add(e, o_, _mul(e, peep[1], c))
    o = w.act(e, 0, o_)
    return _mul(e, o, w.act(e, 2, c)), c


def _gru_cell(linear_before_reset: bool):
    def cell(e: TirEmitter, w: _Direction, xw: list[SSAValue], h: SSAValue, _c: SSAValue | None):
        # linear_before_reset: one projection of h for all three gates; else the candidate's is of r * h
        hz, hr, *hh = w.recurrence(e, h, 0, 3 if linear_before_reset else 2)
        z = w.act(e, 0, _add(e, xw[0], hz))
        r = w.act(e, 0, _add(e, xw[1], hr))
        candidate = _mul(e, r, hh[0]) if linear_before_reset else w.recurrence(e, _mul(e, r, h), 2)[0]
        h_new = w.act(e, 1, _add(e, xw[2], candidate))
        one_minus_z = e.binary(BinaryFn.SUB, e.scalar(1.0, z), z)
        return _add(e, _mul(e, one_minus_z, h_new), _mul(e, z, h)), None

    return cell


def _rnn_cell(e: TirEmitter, w: _Direction, xw: list[SSAValue], h: SSAValue, _c: SSAValue | None):
    return w.act(e, 0, _add(e, xw[0], *w.recurrence(e, h))), None


@lowers(onnx.LSTMOp)
def _lstm(op: onnx.LSTMOp, e: TirEmitter):
    return _recurrent(op, e, 4, ["Sigmoid", "Tanh", "Tanh"], _lstm_cell, with_cell_state=True)


@lowers(onnx.GRUOp)
def _gru(op: onnx.GRUOp, e: TirEmitter):
    cell = _gru_cell(bool(op.linear_before_reset.value.data))
    return _recurrent(op, e, 3, ["Sigmoid", "Tanh"], cell, with_cell_state=False)


@lowers(onnx.RNNOp)
def _rnn(op: onnx.RNNOp, e: TirEmitter):
    return _recurrent(op, e, 1, ["Tanh"], _rnn_cell, with_cell_state=False)
