"""`tensor-parallel`: choose how P devices (`devices=P`) share each large
layer, with `paddle.distributed.split`'s three cases, and write the choice
into the IR as `shard` annotations (the global program stays exact:
`shard.shard` is the identity on values). Layers of fewer than `min-size`
weight elements stay replicated.

- A *Linear* is `tir.matmul(x, W)` with W a 2-d constant, or one laid
  out by a transpose, reshape or cast, or dequantized (ONNX MatMul, Gemm,
  MatMulInteger; an LM head reading the embedding's table). With x replicated
  (or partial, all-reduced first) it is column-parallel (W split by
  columns: `split_axes = [[], [0]]`); with x split along its last dim, as
  the output of a column layer is after element-wise ops, head reshapes,
  RoPE and the attention matmuls, it is row-parallel (W split by rows) and
  its sum is all-reduced where first needed: Megatron's pairing, one
  all-reduce per MLP and per attention. A bias or a residual added to a
  partial sum that nothing else reads is counted on device 0 alone
  (`tp/rules`), so a parallel block's attention and MLP sums (GPT-J,
  GPT-NeoX, Phi-2) meet before their one all-reduce. A column layer whose
  heads P does not divide (grouped-query attention's K/V) stays
  replicated, as Megatron does (on a mesh, `mesh=RxC`, whose R rows divide
  them it is split by rows instead: each row holds its block of the heads
  and of their KV cache, whole along the row); so does a Linear whose
  columns P does not divide (or whose rows, where it would be row-parallel), a 3-class head
  say, with its reason in the report (pinned so by the plan, an error). A
  weight several Linears read takes one case for all (`weight_layouts`);
  a quantized one is split as stored, before its cast (`narrow_blocks`).
  A matmul of a replicated image by a constant the compiler made (a
  bilinear Resize's interpolation) stays replicated, not split by pixels.
- A column layer whose output is taken apart by columns, by a `Split` or
  by `Slice`s, in equal parts or not (GPT-2's `c_attn`, Phi-3's `qkv_proj`
  and `gate_up_proj`), is packed: W's columns are permuted so device d
  holds the d-th block of every part, and each part is read per device.
  Parts of heads P does not divide (a multi-query K/V) are a Linear of
  their own, whole on every device (`fused_parts`).
- An *Embedding* is `tir.gather(T, idx)` on axis 0 of a 2-d constant: its
  rows are split (vocab-parallel). A vocabulary P does not divide is padded
  with zero rows to a multiple of P, which no index reaches. An LM head
  tied to the table (reading it transposed, or a transposed copy of it)
  reads the table's rows instead (`tied_head`): one block a device.
- A *Convolution* (`tir.conv2d`, `tir.conv_transpose2d` with a constant
  weight) is shared by channels, Megatron's pairing carried over: with its
  input replicated (or partial) it is output-channel parallel (its block of
  output channels and of the bias), and the per-channel ops after it
  (activations, pooling, normalisations, nearest-neighbour resizing, the
  residual adds) stay split; with its input split by channels it is
  input-channel parallel (its block of input channels; the partial sums
  all-reduced where first needed, the bias in device 0's summand). A grouped or
  depthwise convolution takes its devices' groups (with their channels of
  the input, sliced at no cost). Channels or groups that P does not divide
  stay replicated, with the reason. Channels taken apart by a `Split` and
  joined by a `Concat` between convolutions (YOLOv8's C2f) are permuted so
  each device holds its block of every part (`channel_parts`).
- *Experts*: a matmul on a mixture's experts' weights stacked
  (`stack-experts`, `[E, in, out]`) is split by experts, each device its
  E/P experts whole; their sum over the experts is partial (`experts`).
- A *KV cache*: a model input joined to keys or values split by heads,
  and returned, arrives and leaves split (`shard.shard` on the argument,
  and `annotate_for_users` before the return), so each device keeps its
  heads of the cache. A `present.*` output split by heads with no past to
  pair (an encoder-decoder's cross-attention cache, a decoder exported
  without its past) leaves split too: the host joins the heads.

Each layer's case and its reason are recorded on the module
(`tensor_parallel.layers`) for the plan; `require-sharded` makes a layer
left replicated though large enough to share an error.

`plan=FILE.json` pins layers by ONNX node name, in Paddle's terms:
`{"layers": {"NODE": {"axis": 0 | 1 | null, "gather_out": true}}}` (axis 1:
column, 0: row for a Linear, vocab for an Embedding and by experts for
stacked experts, null: replicated; `gather_out` all-gathers a column
layer's output at once; `column_axis`: over a mesh's columns, `axis` then
over its rows, in Galaxy's layout).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr, UnitAttr
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import shard, tir
from forge_opt.dialects.tir_functions import BinaryFn
from forge_opt.plan.graph_infos import COLUMN, GALAXY_LAYOUT, GROUPS, IN_CHANNELS, OUT_CHANNELS, REPLICATE, ROW, VOCAB
from forge_opt.targets.forge_python import output_names
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.lowering import erase_dead_ops
from forge_opt.transforms.static_cache import PRESENT, pairs_as_cache, static_past
from forge_opt.transforms.tp.channel_parts import (
    channel_split,
    pack_concat,
    pack_split,
    packable_concat,
    parts_stay_split,
)
from forge_opt.transforms.tp.experts import expert_case
from forge_opt.transforms.tp.fused_parts import Fused, fused_parts, pack, unfuse, whole_parts
from forge_opt.transforms.tp.layer_choice import LayerChoice, find_layer, model_weight
from forge_opt.transforms.tp.layer_records import MESH_LAYOUT_ATTR, record_layers
from forge_opt.transforms.tp.mesh import COLUMNS, mesh_grid
from forge_opt.transforms.tp.narrow_blocks import split_narrow
from forge_opt.transforms.tp.plan_file import Pin, not_a_layer, pins_on
from forge_opt.transforms.tp.rules import (
    REPLICATED,
    Sharding,
    TPError,
    nonnegative_indices,
    reshape_axis,
    rule,
    shape,
    split,
)
from forge_opt.transforms.tp.tied_head import read_rows, tied_table
from forge_opt.transforms.tp.weight_layouts import WeightLayouts, read_twice

GRID = "tp"


@dataclass
class _Annotator:
    func: FuncOp
    devices: int
    min_size: int
    pins: dict[str, Pin]
    grid: list[int]  # [P], or a mesh [R, C] (heads its rows divide split by rows)
    axis: int | None = None  # the one grid axis split over (`galaxy`): on the columns, Embeddings by hidden
    layers: list[LayerChoice] = field(default_factory=list)
    sharding: dict[SSAValue, Sharding] = field(default_factory=dict)
    tables: dict[SSAValue, LayerChoice] = field(default_factory=dict)  # vocab-parallel Embeddings by their table
    dead: bool = False  # ops were replaced (a tied head read as its table's rows, a fused projection unfused)
    whole: set[Operation] = field(default_factory=set)  # the Linears of parts kept whole (`fused_parts`)
    replaced: set[Operation] = field(default_factory=set)  # layers rewritten into others
    layouts: WeightLayouts = field(default_factory=WeightLayouts)  # one per weight (`weight_layouts`)

    def of(self, v: SSAValue) -> Sharding:
        return self.sharding.get(v, REPLICATED)

    @property
    def rows(self) -> int:
        return self.grid[0] if len(self.grid) == 2 and self.axis is None else 1

    def run(self) -> list[LayerChoice]:
        seen: set[str] = set()
        op = self.func.body.block.first_op
        while op is not None:
            layer = find_layer(op)
            if layer is not None:
                seen.add(layer.name)
                self.decide(layer)  # may rewrite the ops after it (a fused projection's parts)
                if op not in self.replaced:
                    self.layers.append(layer)
            if isinstance(op, tir.ConcatOp) and packable_concat(op, [self.of(v) for v in op.operands], self.devices):
                pack_concat(op, self.devices, self.insert_after(op)[0], self._insert)  # (`channel_parts`)
                self.dead = True
            nxt = op.next_op
            given = [self.of(v) for v in op.operands]
            r = rule(op, given, self.devices)
            for res, s in zip(op.results, r.results):
                self.sharding[res] = s
            if layer is not None and layer.gather_out:
                self.annotate_output(layer)
            op = nxt
        if self.dead:
            erase_dead_ops(self.func)  # what was replaced: tied heads and their copies of the table, fused Linears
        if self.axis != COLUMNS:  # (the columns hold whole caches: their keys and values all-reduced)
            self.shard_caches()
        missing = [name for name in self.pins if name not in seen]
        if missing:
            raise ForgeOptError(not_a_layer(self.func, missing[0]))
        return self.layers

    def shard_caches(self) -> None:
        """A KV cache stays on its devices. A result split along an axis
        (heads) that pairs with a model input, the same but for the length
        of one other axis, is the present of the cache whose past that input
        is (the two are joined by a `Concat`, which an empty past folds
        away). Both are annotated split (the input as it arrives, the result
        as the return takes it), so each device receives and returns only
        its heads, and the host keeps them there between steps."""
        block = self.func.body.block
        ret = block.last_op
        if not isinstance(ret, ReturnOp):
            return
        marked: set[SSAValue] = set()
        presents = {v for v, name in zip(ret.arguments, output_names(self.func)) if name.startswith(PRESENT)}
        for v in dict.fromkeys(ret.arguments):
            s = self.of(v)
            static = static_past(v) if s.axis is not None and not s.partial else None
            pasts = [a for a in block.args if s.axis is not None and pairs_as_cache(a, v, s.axis)]
            if static is not None:  # a static cache (`static-kv-cache`): the present is the past written in place
                pasts = [static]
            elif isinstance(v.owner, tir.ConcatOp):
                pasts = [a for a in pasts if a in v.owner.operands]
            else:  # the Concat of an empty past folded away: only an empty input can be that past
                pasts = [a for a in pasts if 0 in shape(a)]
            if not pasts:
                # a present with no past to pair (an encoder-decoder's cross-attention keys and values, a
                # decoder exported without its past): it leaves each device as its heads all the same
                if v in presents and s.axis is not None and not s.partial:
                    self.annotate_return(v, s)
                continue
            self.annotate_return(v, s)
            for past in pasts:  # read by its Concat alone (and, static, by the Where writing it)
                if past not in marked and past.uses.get_length() <= (1 if static is None else 2):
                    marked.add(past)
                    self.annotate_input(past, s)

    def grid_axes(self, s: Sharding) -> list[int]:
        """The grid axes a split runs over: every one (a mesh's row-major),
        or for a split by the mesh's rows its first; the one split over."""
        return [self.axis] if self.axis is not None else [0] if s.blocks else list(range(len(self.grid)))

    def per_dim(self, rank: int, s: Sharding) -> list[list[int]]:
        """`s` as a `shard.sharding`'s grid axes per dim."""
        return [self.grid_axes(s) if i == s.axis else [] for i in range(rank)]

    def annotate_return(self, v: SSAValue, s: Sharding) -> None:
        ret = self.func.body.block.last_op
        assert ret is not None
        target = self._insert(shard.sharding(GRID, self.per_dim(len(shape(v)), s)), ret)
        kept = self._insert(shard.ShardOp(v, target, UnitAttr()), ret)
        v.replace_uses_with_if(kept, lambda use: use.operation is ret)
        self.sharding[kept] = s

    def annotate_input(self, arg: SSAValue, s: Sharding) -> None:
        first = self.func.body.block.first_op
        assert first is not None
        target = self._insert(shard.sharding(GRID, self.per_dim(len(shape(arg)), s)), first)
        arrives = self._insert(shard.ShardOp(arg, target, None), first)
        arg.replace_uses_with_if(arrives, lambda use: use.operation is not arrives.owner)
        self.sharding[arrives] = s

    def decide(self, layer: LayerChoice) -> None:
        pin = self.pins.get(layer.name)
        w = shape(layer.weight)
        small = math.prod(w) < self.min_size
        if layer.kind == "conv":
            self.decide_conv(layer, pin, small)
            return
        if layer.kind == "experts":
            assert isinstance(layer.op, tir.MatmulOp)
            layer.case, layer.reason, axis = expert_case(layer.op, self.of(layer.op.lhs), self.devices, pin,
                                                         self.min_size)
            layer.unshared = axis is None and pin is None and not small
            if axis is not None:
                self.annotate_weight(layer, axis)
            return
        if layer.kind == "linear":
            weight, parts = layer.weight, fused_parts(layer.op.results[0]) is not None  # (before packing)
            self.decide_linear(layer, pin, small)
            self.layouts.note(weight, layer.case, parts)
            layer.reason += self.layouts.record(weight, layer.case, layer.packed, layer.name)
            return
        if layer.kind == "embedding":
            if pin is not None and pin.axis == 1 and self.axis != COLUMNS:
                raise TPError(f"the plan asks for axis 1 on the Embedding {describe(layer.op)}: an embedding is "
                              "split by rows (axis 0, vocab-parallel) or replicated (null)")
            indices = self.of(layer.op.operands[1])
            if pin is not None and pin.axis != 1:
                vocab, layer.reason = pin.axis == 0, "pinned by the plan"
            elif small and pin is None:
                vocab, layer.reason = False, f"{math.prod(w)} weight elements, under min-size {self.min_size}"
            elif self.axis == COLUMNS:  # Galaxy's: the residual stream split by hidden over the columns
                layer.case = COLUMN
                layer.reason = "pinned by the plan" if pin else "by hidden: the residual stream split over the columns"
                self.annotate_weight(layer, 1)
                return
            else:  # with indices already split, the lookup stays local to them
                vocab = indices == REPLICATED
                layer.reason = "a table of rows" if vocab else f"its indices are {indices}"
            if vocab:
                self.vocab(layer)
            layer.unshared = not vocab and pin is None and not small

    def decide_linear(self, layer: LayerChoice, pin: Pin | None, small: bool) -> None:
        w = shape(layer.weight)
        x = self.of(layer.op.operands[0])
        last = len(shape(layer.op.operands[0])) - 1
        fused = fused_parts(layer.op.results[0])
        follow = self.layouts.follow(layer.weight, x, last)
        router = image = False
        if layer.op in self.whole:
            wanted, layer.reason = REPLICATE, ("the parts of a fused projection whose heads the devices do not "
                                               "divide (multi-query K/V): whole on every device")
        elif pin is not None:
            wanted, layer.reason = {1: COLUMN, 0: ROW, None: REPLICATE}[pin.axis], "pinned by the plan"
            layer.gather_out = pin.gather_out and wanted == COLUMN
        elif small:
            wanted, layer.reason = REPLICATE, f"{math.prod(w)} weight elements, under min-size {self.min_size}"
        elif follow is not None and follow[0] == ROW:
            wanted, layer.reason = follow
        elif x == split(last) and follow is None:
            wanted, layer.reason = ROW, "its input is split along its last dim (a column layer's output)"
        elif x == REPLICATED and len(shape(layer.op.operands[0])) == 4 and not model_weight(layer.weight):
            # (a model's Linear on an image, as ConvNeXt's on channels last, reads a model weight)
            wanted, layer.reason = REPLICATE, ("a constant the compiler made for an image (a Resize's "
                                               "interpolation): split, its result would be split by pixels")
            image = True
        elif x == REPLICATED or x.partial or follow is not None:  # a partial input all-reduced first
            wanted, layer.reason = (COLUMN, f"its input is {x}") if follow is None else follow
            if fused is not None:  # its parts decide (`fuse_column`)
                whole = whole_parts(fused, self.devices)
                if all(whole):
                    wanted, layer.reason = REPLICATE, (
                        f"the heads of each of its {len(fused.parts)} parts do not divide by {self.devices} devices")
                elif not any(whole) and any(n % self.devices for _, n in fused.parts):  # (a GRU's 3 gates of 64)
                    wanted, layer.reason = REPLICATE, (f"its parts of {[n for _, n in fused.parts]} columns do not "
                                                       f"all divide by {self.devices} devices")
            elif (undivided := self._undivided_heads(layer, self.devices)) is not None:
                # Megatron's rule for grouped-query attention with fewer KV heads than devices, but on a mesh
                # whose rows divide them (Galaxy's layout): each row its block of them
                if self._by_rows(layer):
                    layer.reason = f"{undivided}: each of the mesh's {self.rows} rows holds its block of them"
                else:
                    wanted, layer.reason = REPLICATE, undivided
            elif (whole := self._read_whole(layer)) is not None:
                wanted, layer.reason = REPLICATE, (
                    f"{describe(whole)} repeats its heads whole (query head j reads KV head j mod the KV heads), so "
                    "every device needs all of them" if isinstance(whole, tir.TileOp) else
                    f"{describe(whole)} reads all its columns at once (a router's scores): whole on every device")
                router = not isinstance(whole, tir.TileOp)
        elif x.axis is not None:  # a bilinear Resize's interpolation matrix, say: no collective, each its block
            wanted, layer.reason = REPLICATE, f"its input is split along axis {x.axis}, which the product keeps"
        else:
            wanted, layer.reason = REPLICATE, f"its input is {x}"
        if wanted == COLUMN and (table := tied_table(layer.weight, list(self.tables))) is not None:
            self.tie(layer, table)
            return
        dim, blocks = {COLUMN: 1, ROW: 0}.get(wanted), self._by_rows(layer) if wanted == COLUMN and fused is None else 0
        if dim is not None and w[dim] % (blocks or self.devices):
            what = "output columns" if dim else "input rows"
            if pin is not None:  # the user asked for this case: say why it cannot be
                raise TPError(f"{describe(layer.op)}: a {wanted}-parallel Linear needs its {what} ({w[dim]}) to "
                              f"divide by the {self.devices} devices")
            # a 3-class head, a 64-wide projection at P=3: replicated, its reason in the report
            layer.reason = f"its {what} ({w[dim]}) do not divide by {self.devices} devices"
            dim, wanted = None, REPLICATE
        if dim is None:  # (a router is whole by design, as Megatron keeps it)
            layer.unshared = (pin is None and not small and not (x.axis is not None and x.axis < last)
                              and layer.op not in self.whole and not router and not image)
            return
        layer.case, layer.blocks = wanted, blocks
        if wanted == COLUMN and not layer.gather_out and fused is not None:
            self.fuse_column(layer, fused)
            return
        self.annotate_weight(layer, dim, blocks)

    def decide_conv(self, layer: LayerChoice, pin: Pin | None, small: bool) -> None:
        """Output-channel, input-channel or grouped, as `_window` reads it;
        a plan's axis 1 asks for output channels, 0 for input channels
        (either, for a grouped convolution: its groups)."""
        op = layer.op
        assert isinstance(op, tir.Conv2dOp | tir.ConvTranspose2dOp)
        p, groups = self.devices, op.groups.value.data
        cin, cout = shape(op.input)[1], shape(op.output)[1]
        x = self.of(op.input)
        if groups > 1:
            wanted, layer.reason = GROUPS, f"each device its {groups // p} of {groups} groups"
        elif x == split(1):
            wanted, layer.reason = IN_CHANNELS, "its input is split by channels (an output-channel layer's output)"
        elif x == REPLICATED or x.partial:
            wanted, layer.reason = OUT_CHANNELS, f"its input is {x}"
        else:
            wanted, layer.reason = REPLICATE, f"its input is {x}"
        if pin is not None:
            if pin.axis is None:
                wanted = REPLICATE
            elif groups == 1:
                wanted = OUT_CHANNELS if pin.axis == 1 else IN_CHANNELS
            layer.reason = "pinned by the plan"
        elif small:
            wanted, layer.reason = REPLICATE, f"{math.prod(shape(layer.weight))} weight elements, under min-size " \
                f"{self.min_size}"
        count = {GROUPS: groups, IN_CHANNELS: cin, OUT_CHANNELS: cout}.get(wanted)
        if count is not None and count % p:
            what = {GROUPS: "groups", IN_CHANNELS: "input channels", OUT_CHANNELS: "output channels"}[wanted]
            if pin is not None:
                raise TPError(f"{describe(op)}: a convolution split by its {what} needs them ({count}) to divide "
                              f"by the {p} devices")
            layer.reason, wanted = f"its {what} ({count}) do not divide by {p} devices", REPLICATE
        if wanted == REPLICATE:
            layer.unshared = pin is None and not small
            return
        layer.case = wanted
        parts = channel_split(op.output) if wanted == OUT_CHANNELS else None
        if isinstance(op, tir.Conv2dOp) and parts is not None and not any(k % p for k in parts.sections.get_values()) \
                and parts_stay_split(parts, p):
            layer.packed = len(parts.results)  # each device its block of every part
            pack_split(op, parts, p, self._insert)
        transposed = isinstance(op, tir.ConvTranspose2dOp)
        axis = 0 if wanted == GROUPS else int((wanted == IN_CHANNELS) != transposed)
        self.annotate_weight(layer, axis)

    def _by_rows(self, layer: LayerChoice) -> int:
        """The mesh's rows, where they divide a column layer's heads that
        its devices do not (grouped-query attention's 8 KV heads at 8x4);
        else 0."""
        last = len(shape(layer.op.results[0])) - 1
        if self.rows == 1 or shape(layer.weight)[1] % self.rows or \
                self._undivided_heads(layer, self.devices) is None or \
                self._undivided_heads(layer, self.rows) is not None or \
                self._read_whole(layer, split(last, self.rows)) is not None:  # (a Tile repeating the heads whole)
            return 0
        return self.rows

    def _undivided_heads(self, layer: LayerChoice, devices: int) -> str | None:
        """Why not, where the reshape to heads after a Linear (past its
        bias, or the casts and scales that dequantize an integer product)
        parts its columns by an axis `devices` do not divide: the heads of
        [heads, head_dim], or the first of more parts (SAM's fused
        [3, heads, head_dim])."""
        v = layer.op.results[0]
        while v.uses.get_length() == 1:
            user = next(iter(v.uses)).operation
            if isinstance(user, tir.CastOp) or (isinstance(user, tir.BinaryOp) and user.fn.data in (
                    BinaryFn.ADD, BinaryFn.MUL) and shape(user.output) == shape(v)):
                v = user.results[0]
                continue
            if isinstance(user, tir.ReshapeOp):
                dims = shape(user.output)
                b = reshape_axis(shape(v), dims, len(shape(v)) - 1)
                # one head left on this mesh axis (the other took the rest): its dims stay whole, as a rotary
                # embedding would gather them at once
                if self.axis is not None and b == len(dims) - 1 and len(dims) > len(shape(v)) and dims[-2] == 1:
                    return f"its 1 head does not divide by {devices} devices"
                if b is not None and dims[b] % devices and b != len(dims) - 1:
                    if b == len(dims) - 2:
                        return f"its {dims[b]} heads do not divide by {devices} devices"
                    return (f"{describe(user)} parts its columns as {list(dims[b:])}, whose first axis ({dims[b]}) "
                            f"does not divide by {devices} devices")
            return None
        return None

    def _read_whole(self, layer: LayerChoice, s: Sharding | None = None) -> Operation | None:
        """The op, if one, that would need a column layer's output whole
        along the axis it would be split on (as `s`, by default over every
        device), so an all-gather would follow at once: a Tile repeating it
        (GQA's K/V as `repeat` exports them), a softmax or argmax across it
        (an MoE router's scores)."""
        v = layer.op.results[0]
        s = s or split(len(shape(v)) - 1)
        while v.uses.get_length() == 1 and s.axis is not None:
            user = next(iter(v.uses)).operation
            if isinstance(user, tir.MatmulOp) or not user.results:
                return None
            given = [s if o is v else self.of(o) for o in user.operands]
            r = rule(user, given, self.devices)
            if isinstance(user, tir.TileOp | tir.SoftmaxOp | tir.ArgmaxOp) and r.operands[0] == REPLICATED:
                return user
            v, s = user.results[0], r.results[0]
        return None

    def _insert(self, op: Operation, before: Operation) -> SSAValue:
        op.location = before.location
        assert before.parent is not None
        before.parent.insert_op_before(op, before)
        return op.results[0]

    def annotate_weight(self, layer: LayerChoice, axis: int, blocks: int = 0) -> None:
        """The layer's weight split along `axis` (in `blocks` by the mesh's rows)."""
        s = split(axis, blocks)
        if layer.kind in ("linear", "conv") and split_narrow(layer.weight, s, self.sharding, self.devices, GRID,
                                                             self.grid_axes(s), self._insert):
            return
        target = self._insert(shard.sharding(GRID, self.per_dim(len(shape(layer.weight)), s)), layer.op)
        annotated = self._insert(shard.ShardOp(layer.weight, target, None), layer.op)
        layer.op.operands[0 if layer.kind == "embedding" else 1] = annotated
        self.sharding[annotated] = s

    def annotate_output(self, layer: LayerChoice) -> None:
        """`gather_out`: the column layer's output replicated at once."""
        y = layer.op.results[0]
        after = layer.op.next_op
        assert after is not None
        s = self._insert(shard.sharding(GRID, [[]] * len(shape(y))), after)
        gathered = self._insert(shard.ShardOp(y, s, None), after)
        y.replace_uses_with_if(gathered, lambda use: use.operation is not gathered.owner)
        self.sharding[gathered] = REPLICATED

    def insert_after(self, old: Operation) -> tuple[Callable[[Operation], SSAValue], list[Operation]]:
        """Inserts ops after `old`, each after the last, so that `run` visits
        each; and the ops inserted."""
        made: list[Operation] = []

        def insert(new: Operation) -> SSAValue:
            new.location = old.location
            assert old.parent is not None
            old.parent.insert_op_after(new, made[-1] if made else old)
            made.append(new)
            return new.results[0]

        return insert, made

    def fuse_column(self, layer: LayerChoice, fused: Fused) -> None:
        """A column layer taken apart into parts: packed, or, where some parts
        are heads the devices do not divide, two Linears (`fused_parts`)."""
        op = layer.op
        assert isinstance(op, tir.MatmulOp)  # (a Linear: `find_layer`)
        whole = whole_parts(fused, self.devices)
        if not any(whole):
            layer.packed = len(fused.parts)
            pack(op, fused, self.devices, self._insert)
            self.annotate_weight(layer, 1)
            return
        _, kept = unfuse(op, fused, whole, self.insert_after(op)[0])
        self.whole.add(kept)
        self.replaced.add(op)
        self.dead = True

    def tie(self, head: LayerChoice, table: SSAValue) -> None:
        """A head tied to a vocab-parallel Embedding's `table` reads that
        table's block (`tied_head`): column-parallel in effect, stored once."""
        embedding, old = self.tables[table], head.op
        assert isinstance(old, tir.MatmulOp)
        insert, made = self.insert_after(old)
        y = read_rows(old, embedding.weight, shape(table)[0], insert)
        y.name_hint = old.output.name_hint
        old.output.replace_all_uses_with(y)
        self.dead = True
        head.op = next(op for op in made if isinstance(op, tir.MatmulOp))
        head.case, head.reason = COLUMN, f"tied to {describe(embedding.op)}: reads the rows of its table's block"

    def vocab(self, layer: LayerChoice) -> None:
        op = layer.op
        assert isinstance(op, tir.GatherOp)
        self.tables[op.input] = layer
        rows, _ = shape(op.input)
        extra = -rows % self.devices
        layer.case = VOCAB
        if extra:
            # Megatron's padding: zero rows no index reaches (negative
            # indices, which count from the end, made positive first)
            layer.padded_rows = extra
            op.operands[1] = nonnegative_indices(lambda new: self._insert(new, op), op.indices, rows)
            op.operands[0] = self._insert(tir.PadOp(op.input, [0, extra, 0, 0], 0.0), op)
        self.annotate_weight(layer, 0)


def annotate(module: ModuleOp, asked: TensorParallelPass) -> list[LayerChoice]:
    """Annotate `module` for `asked.devices` devices; the layers, each with
    its case. `asked.require_sharded`: a layer left replicated though large
    enough to share (and not pinned so) is an error."""
    devices, min_size, plan = asked.devices, asked.min_size, asked.plan
    if asked.axis >= 0:
        module.attributes[MESH_LAYOUT_ATTR] = StringAttr(GALAXY_LAYOUT)
    if devices < 2:
        return []
    grid = mesh_grid(1, asked.mesh) if asked.axis >= 0 else mesh_grid(devices, asked.mesh) if asked.mesh else [devices]
    axis = None if asked.axis < 0 else asked.axis
    pins = pins_on(plan, axis) if plan else {}
    funcs = [f for f in module.ops if isinstance(f, FuncOp) and f.body.blocks]
    layers: list[LayerChoice] = []
    for func in funcs:
        layouts = WeightLayouts()
        if read_twice([layer.weight for op in func.walk() if (layer := find_layer(op)) and layer.kind == "linear"]):
            first = WeightLayouts(following=False)  # each reader's own case, for the case most take
            _Annotator(func.clone(), devices, min_size, pins, grid, axis, layouts=first).run()
            layouts.preferred = first.settled()
        layers += _Annotator(func, devices, min_size, pins, grid, axis, layouts=layouts).run()
    block = module.body.block
    if block.first_op is None:
        block.add_op(shard.grid(GRID, grid))
    elif not isinstance(block.first_op, shard.GridOp):  # (a mesh's second axis: the grid is there)
        block.insert_op_before(shard.grid(GRID, grid), block.first_op)
    recorded = record_layers(module, [layer.entry() for layer in layers], axis)  # (the rows': with the columns')
    unshared = [(x, e) for x, e in zip(layers, recorded) if e["unshared"] and axis != COLUMNS]
    if asked.require_sharded and unshared:
        listed = "; ".join(f"{describe(layer.op)}: {entry['reason']}" for layer, entry in unshared)
        raise TPError(f"{len(unshared)} layer{'s' if len(unshared) > 1 else ''} of at least min-size {min_size} "
                      f"weight elements would stay replicated on every device (--require-sharded): {listed}")
    return layers


@dataclass(frozen=True)
class TensorParallelPass(ModulePass):
    """Choose each layer's case (column, row, vocab, channels, experts) and annotate with `shard`."""

    name = "tensor-parallel"

    devices: int = 2
    min_size: int = 0
    plan: str = ""
    require_sharded: bool = False
    mesh: str = ""  # RxC: the devices' grid, and heads by its rows where the devices do not divide them
    axis: int = -1  # of the mesh: split over it alone (`devices` its size; the Galaxy layout's two passes)

    @classmethod
    def of(cls, options: CompileOptions, devices: int, axis: int = -1) -> TensorParallelPass:
        """The pass `options` ask for, at `devices` (a count `device-memory`
        tries), or over the mesh's `axis` alone."""
        return cls(devices, options.min_size, options.plan, options.require_sharded, options.mesh, axis)

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate(op, self)
