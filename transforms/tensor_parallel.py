"""`tensor-parallel`: choose how P devices (`devices=P`) share each large
layer, with `paddle.distributed.split`'s three cases, and write the choice
into the IR as `shard` annotations (the global program stays exact:
`shard.shard` is the identity on values). Layers of fewer than `min-size`
weight elements stay replicated.

- A *Linear* is `tir.matmul(x, W)` with W a 2-d constant (ONNX MatMul and
  Gemm, `Transpose(W)` and `Identity` aliases already folded). With x
  replicated it is column-parallel (W split by columns: `split_axes =
  [[], [0]]`); with x split along its last dim, as the output of a column
  layer is after element-wise ops and head reshapes, it is row-parallel
  (W split by rows) and its sum is all-reduced where first needed, before
  the bias: Megatron's pairing, one all-reduce per MLP and per attention.
- A column layer whose output is `Split` into k equal parts (GPT-2's fused
  QKV) is packed: W's columns are permuted so device d holds part j's
  d-th block for every j, and the split reads the parts per device.
- An *Embedding* is `tir.gather(T, idx)` on axis 0 of a 2-d constant: its
  rows are split (vocab-parallel). A vocabulary P does not divide is padded
  with zero rows to a multiple of P, which no index reaches.

`plan=FILE.json` pins layers by ONNX node name, in Paddle's terms:
`{"layers": {"NODE": {"axis": 0 | 1 | null, "gather_out": true}}}` (axis 1:
column, 0: row for a Linear and vocab for an Embedding, null: replicated;
`gather_out` all-gathers a column layer's output at once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError, describe, node_name
from forge_opt.dialects import shard, tir
from forge_opt.transforms.tp_rules import (
    REPLICATED,
    Sharding,
    TPError,
    nonnegative_indices,
    rule,
    shape,
    split,
)

GRID = "tp"

COLUMN, ROW, VOCAB, REPLICATE = "column", "row", "vocab", "replicated"


@dataclass
class Layer:
    op: Operation
    kind: str  # "linear" or "embedding"
    case: str = REPLICATE
    gather_out: bool = False
    packed: int = 0  # parts of a packed column layer
    padded_rows: int = 0

    @property
    def name(self) -> str:
        return node_name(self.op) or self.op.name

    @property
    def weight(self) -> SSAValue:
        return self.op.operands[1] if self.kind == "linear" else self.op.operands[0]


@dataclass
class Pin:
    axis: int | None
    gather_out: bool = False


def read_plan(path: str) -> dict[str, Pin]:
    """The layers a plan file pins, by node name."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ForgeOptError(f"{path}: no such plan file") from None
    except json.JSONDecodeError as e:
        raise ForgeOptError(f"{path}: not valid JSON: {e}") from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, dict):
        raise ForgeOptError(f'{path}: a plan is {{"layers": {{"NODE": {{"axis": 0 | 1 | null}}}}}}')
    pins = {}
    for name, entry in layers.items():
        if not isinstance(entry, dict) or entry.get("axis", "missing") not in (0, 1, None):
            raise ForgeOptError(f"{path}: layer '{name}': 'axis' must be 0, 1 or null")
        pins[name] = Pin(entry["axis"], bool(entry.get("gather_out", False)))
    return pins


def _constant_2d(v: SSAValue) -> bool:
    return isinstance(v.owner, tir.ConstantOp) and len(shape(v)) == 2


def find_layer(op: Operation) -> Layer | None:
    if isinstance(op, tir.MatmulOp) and _constant_2d(op.rhs):
        return Layer(op, "linear")
    if isinstance(op, tir.GatherOp) and op.axis.value.data == 0 and _constant_2d(op.input):
        return Layer(op, "embedding")
    return None


def _packed_split(layer: Layer) -> tuple[list[tir.BinaryOp], tir.SplitOp] | None:
    """The bias adds and the `Split` into equal parts along the columns that
    follow a Linear through single uses, if they do."""
    v = layer.op.results[0]
    width = shape(v)[-1]
    biases = []
    while len(uses := list(v.uses)) == 1:
        user = uses[0].operation
        if isinstance(user, tir.SplitOp):
            sections = list(user.sections.get_values())
            last = len(shape(user.input)) - 1
            if user.axis.value.data == last and len(sections) > 1 and len(set(sections)) == 1:
                return biases, user
            return None
        if isinstance(user, tir.ReshapeOp) and shape(user.output)[-1] == width:
            v = user.output
        elif isinstance(user, tir.BinaryOp) and user.fn.data.value == "add":
            other = user.rhs if user.lhs is v else user.lhs
            if not (isinstance(other.owner, tir.ConstantOp) and shape(other) == [width]):
                return None
            biases.append(user)
            v = user.output
        else:
            return None
    return None


@dataclass
class _Annotator:
    func: FuncOp
    devices: int
    min_size: int
    pins: dict[str, Pin]
    layers: list[Layer] = field(default_factory=list)
    sharding: dict[SSAValue, Sharding] = field(default_factory=dict)

    def of(self, v: SSAValue) -> Sharding:
        return self.sharding.get(v, REPLICATED)

    def run(self) -> list[Layer]:
        seen: set[str] = set()
        op = self.func.body.block.first_op
        while op is not None:
            nxt = op.next_op
            layer = find_layer(op)
            if layer is not None:
                seen.add(layer.name)
                self.decide(layer)
                self.layers.append(layer)
            given = [self.of(v) for v in op.operands]
            r = rule(op, given, self.devices)
            for res, s in zip(op.results, r.results):
                self.sharding[res] = s
            if layer is not None and layer.gather_out:
                self.annotate_output(layer)
            op = nxt
        missing = [name for name in self.pins if name not in seen]
        if missing:
            raise ForgeOptError(self._not_a_layer(missing[0]))
        return self.layers

    def _not_a_layer(self, name: str) -> str:
        for op in self.func.body.walk():
            if node_name(op) == name:
                return (
                    f"the plan names {describe(op)}, which is neither a Linear (MatMul or Gemm with a constant "
                    "2-d weight) nor an Embedding (Gather on a constant 2-d table)"
                )
        return f"the plan names the node '{name}', which the model does not have"

    def decide(self, layer: Layer) -> None:
        pin = self.pins.get(layer.name)
        w = shape(layer.weight)
        small = w[0] * w[1] < self.min_size
        if layer.kind == "embedding":
            if pin is not None and pin.axis == 1:
                raise TPError(
                    f"the plan asks for axis 1 on the Embedding {describe(layer.op)}: an embedding is split "
                    "by rows (axis 0, vocab-parallel) or replicated (null)"
                )
            if pin is not None:
                vocab = pin.axis == 0
            else:  # with indices already split, the lookup stays local to them
                vocab = not small and self.of(layer.op.operands[1]) == REPLICATED
            if vocab:
                self.vocab(layer)
            return
        x = self.of(layer.op.operands[0])
        last = len(shape(layer.op.operands[0])) - 1
        if pin is not None:
            wanted = {1: COLUMN, 0: ROW, None: REPLICATE}[pin.axis]
            layer.gather_out = pin.gather_out and wanted == COLUMN
        elif small:
            wanted = REPLICATE
        elif x == split(last):
            wanted = ROW
        elif x == REPLICATED:
            wanted = COLUMN
        else:
            wanted = REPLICATE
        dim = {COLUMN: 1, ROW: 0}.get(wanted)
        if dim is None:
            return
        if w[dim] % self.devices:
            what = "output columns" if dim else "input rows"
            raise TPError(
                f"{describe(layer.op)}: a {wanted}-parallel Linear needs its {what} ({w[dim]}) to divide by the "
                f"{self.devices} devices"
            )
        layer.case = wanted
        if wanted == COLUMN and not layer.gather_out:
            self.pack(layer)
        self.annotate_weight(layer, [[], [0]] if dim else [[0], []])

    def _insert(self, op: Operation, before: Operation) -> SSAValue:
        op.location = before.location
        assert before.parent is not None
        before.parent.insert_op_before(op, before)
        return op.results[0]

    def annotate_weight(self, layer: Layer, per_dim: list[list[int]]) -> None:
        s = self._insert(shard.sharding(GRID, per_dim), layer.op)
        annotated = self._insert(shard.ShardOp(layer.weight, s, None), layer.op)
        index = 1 if layer.kind == "linear" else 0
        layer.op.operands[index] = annotated
        axes = [i for i, a in enumerate(per_dim) if a]
        self.sharding[annotated] = split(axes[0])

    def annotate_output(self, layer: Layer) -> None:
        """`gather_out`: the column layer's output replicated at once."""
        y = layer.op.results[0]
        after = layer.op.next_op
        assert after is not None
        s = self._insert(shard.sharding(GRID, [[]] * len(shape(y))), after)
        gathered = self._insert(shard.ShardOp(y, s, None), after)
        y.replace_uses_with_if(gathered, lambda use: use.operation is not gathered.owner)
        self.sharding[gathered] = REPLICATED

    def pack(self, layer: Layer) -> None:
        found = _packed_split(layer)
        if found is None:
            return
        biases, split_op = found
        k = len(split_op.results)
        width = shape(layer.weight)[1]
        part = width // k
        if part % self.devices:
            raise TPError(
                f"{describe(split_op)}: splits the fused projection of {describe(layer.op)} into {k} parts of "
                f"{part}, which the {self.devices} devices do not divide"
            )
        n, p = part // self.devices, self.devices
        layer.packed = k

        def permuted(v: SSAValue, before: Operation, rows: list[int]) -> SSAValue:
            """Columns reordered from (part, device, i) to (device, part, i)."""
            blocks = self._insert(tir.ReshapeOp(v, [*rows, k, p, n]), before)
            r = len(rows)
            perm = [*range(r), r + 1, r, r + 2]
            swapped = self._insert(tir.TransposeOp(blocks, perm), before)
            return self._insert(tir.ReshapeOp(swapped, [*rows, width]), before)

        layer.op.operands[1] = permuted(layer.weight, layer.op, [shape(layer.weight)[0]])
        for add in biases:
            index = 0 if add.lhs.owner is not None and isinstance(add.lhs.owner, tir.ConstantOp) else 1
            add.operands[index] = permuted(add.operands[index], add, [])
        # the split takes part j of every device's block
        z = split_op.input
        outer = shape(z)[:-1]
        blocks = self._insert(tir.ReshapeOp(z, [*outer, p, k, n]), split_op)
        pieces = tir.SplitOp(blocks, len(outer) + 1, [1] * k)
        self._insert(pieces, split_op)
        for old, piece in zip(split_op.results, pieces.results):
            joined = self._insert(tir.ReshapeOp(piece, [*outer, part]), split_op)
            old.replace_all_uses_with(joined)
        split_op.detach()
        split_op.erase()

    def vocab(self, layer: Layer) -> None:
        op = layer.op
        assert isinstance(op, tir.GatherOp)
        rows, _ = shape(op.input)
        extra = -rows % self.devices
        layer.case = VOCAB
        if extra:
            # Megatron's padding: zero rows no index reaches (negative
            # indices, which count from the end, made positive first)
            layer.padded_rows = extra
            op.operands[1] = nonnegative_indices(lambda new: self._insert(new, op), op.indices, rows)
            op.operands[0] = self._insert(tir.PadOp(op.input, [0, extra, 0, 0], 0.0), op)
        self.annotate_weight(layer, [[0], []])


def annotate(module: ModuleOp, devices: int, min_size: int = 0, plan: str = "") -> list[Layer]:
    """Annotate `module` for `devices` devices; the layers, each with its case."""
    if devices < 2:
        return []
    pins = read_plan(plan) if plan else {}
    funcs = [f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks]
    layers: list[Layer] = []
    for func in funcs:
        layers += _Annotator(func, devices, min_size, pins).run()
    block = module.body.block
    if block.first_op is None:
        block.add_op(shard.grid(GRID, [devices]))
    else:
        block.insert_op_before(shard.grid(GRID, [devices]), block.first_op)
    return layers


@dataclass(frozen=True)
class TensorParallelPass(ModulePass):
    """Choose column/row/vocab-parallel per layer and annotate with `shard`."""

    name = "tensor-parallel"

    devices: int = 2
    min_size: int = 0
    plan: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate(op, self.devices, self.min_size, self.plan)
