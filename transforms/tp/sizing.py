"""Choose the device count for the user (`device-memory=BYTES`): the
smallest P, up to `max-devices`, whose per-device share of the parameters
plus its share of the KV cache fits. Each P is measured on the program it
would run (`sharing_passes`: experts stacked, annotated and
partitioned), so replicated layers, padded vocabularies and a
replicated cache count as they will.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Operation, SSAValue

from forge_opt import dtypes
from forge_opt.data_formats import BLOCK_FORMATS, FORMATS, FormatName
from forge_opt.diagnostics import ForgeOptError
from forge_opt.dialects import shard, tir
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.data_formats import matmul_weights
from forge_opt.transforms.static_cache import pairs_as_cache, static_past
from forge_opt.transforms.tp.sharing import sharing_passes


def _is_weight(op: Operation) -> bool:
    """The model's weights and the float constants computed from them (a tied
    LM head's transposed table); integer constants are indices and shapes
    the lowering consumes."""
    return isinstance(op, tir.ConstantOp) and (op.weight_name is not None or _is_float(op.output.type))


def device_bytes(module: ModuleOp, weight_format: FormatName = FormatName.FLOAT32) -> tuple[int, int]:
    """What one device holds of a (per-device) program: its weights and
    constants (one read through `shard.all_slice` counts as its block), the
    matmul weights in `weight_format` where it is a block float, and its KV
    cache (the results that extend an input of the same kind, or a static
    cache's, which write it in place)."""
    params = cache = 0
    blocks = set()
    if weight_format in BLOCK_FORMATS:
        blocks = set(matmul_weights(module, lambda op: op.rhs if isinstance(op, tir.MatmulOp) else None, _is_weight))
    for op in module.walk():
        if _is_weight(op):
            assert isinstance(op, tir.ConstantOp)
            t = op.output.type
            size = math.prod(dtypes.tensor(t).get_shape()) * FORMATS[weight_format].bytes_per_element \
                if op in blocks else dtypes.tensor_nbytes(t)
            params += math.ceil(size * _share(op.output))
    for func in module.ops:
        if isinstance(func, FuncOp) and func.body.blocks and isinstance(ret := func.body.block.last_op, ReturnOp):
            args = func.body.block.args
            cache += sum(dtypes.tensor_nbytes(v.type) for v in ret.arguments if _extends_a_cache(v, args))
    return params, cache


def _extends_a_cache(v: SSAValue, args: Sequence[SSAValue]) -> bool:
    """Whether result `v` is a KV cache's present: a static cache written in
    place, or the Concat of its past input and the new entries (an empty
    past's folded away). A result that only differs in one size from an
    input (a pipeline stage's logits from the hidden state it receives) is not."""
    if static_past(v) is not None:
        return True
    pasts = [a for a in args if pairs_as_cache(a, v)]
    if isinstance(v.owner, tir.ConcatOp):
        return any(a in v.owner.operands for a in pasts)
    return any(0 in dtypes.tensor(a.type).get_shape() for a in pasts)


def _is_float(t) -> bool:
    return dtypes.is_float(dtypes.numpy_dtype(dtypes.tensor(t).element_type))


def _share(v: SSAValue) -> float:
    """The fraction of constant `v` one device holds: the sum of its
    distinct blocks (`shard.all_slice`), through the constant layout ops
    before them (a fused projection's column permutation), plus all of it
    if any use reads it whole. A weight tied to two layers (an embedding
    and its LM head) is held as one block per layer."""
    return sum(_blocks(v).values()) if v.uses else 1.0


def _blocks(v: SSAValue) -> dict[object, float]:
    """Each distinct piece of `v` a device holds (by its reader's kind,
    axis and type, or `v` itself when read whole), with its fraction of `v`."""
    pieces: dict[object, float] = {}
    for use in v.uses:
        op = use.operation
        if isinstance(op, shard.AllSliceOp):
            key = ("block", op.axis, op.result.type)
            pieces[key] = dtypes.tensor_nbytes(op.result.type) / max(dtypes.tensor_nbytes(op.input.type), 1)
        elif op.results and all(_constant(o) for o in op.operands):
            for r in op.results:  # a layout op's result is the constant rearranged: its pieces are v's
                pieces.update(((op.name, key), fraction) for key, fraction in _blocks(r).items())
        else:
            pieces["whole"] = 1.0
    return pieces


def _constant(v: SSAValue) -> bool:
    """Made of constants alone, none of them a device's block."""
    op = v.owner
    if isinstance(op, tir.ConstantOp):
        return True
    return isinstance(op, Operation) and not isinstance(op, shard.AllSliceOp) and all(_constant(o) for o in op.operands)


#: the module attribute carrying the sizing table to the driver's report
SIZING_ATTR = "tensor_parallel.sizing"


@dataclass
class Sizing:
    devices: int
    table: list[str]
    cache: int = 0  # the KV cache bytes a device holds at `devices`


def choose_devices(module: ModuleOp, options: CompileOptions, start: int = 1, table: list[str] | None = None) -> Sizing:
    """The smallest P from `start` whose per-device bytes fit in
    `options.memory`, for `module` as onnx-to-tir leaves it (in its data
    format), its matmul weights in the weight format; each P shared as
    `options` ask, up to their `max_devices`; the table of every P tried
    (added to `table`, a search resumed)."""
    memory, max_devices, weight_format = options.memory, options.max_devices, options.formats[1]
    table = table if table is not None else \
        [f"{'devices':<8} {'parameters':>14} {'kv cache':>12} {'per device':>14}  fits {memory:,} bytes"]
    for p in range(start, max_devices + 1):
        program = module.clone()
        try:
            if p > 1:
                for sharing in sharing_passes(options, p):
                    sharing.apply(Context(), program)
        except ForgeOptError as e:
            table.append(f"{p:<8} {'':>14} {'':>12} {'':>14}  no: {e}")
            continue
        params, cache = device_bytes(program, weight_format)
        fits = params + cache <= memory
        table.append(f"{p:<8} {params:>14,} {cache:>12,} {params + cache:>14,}  {'yes' if fits else 'no'}")
        if fits:
            return Sizing(p, table, cache)
    raise ForgeOptError(
        f"no device count up to {max_devices} fits the model in {memory:,} bytes per device "
        f"(raise --max-devices or the memory):\n" + "\n".join(table)
    )
