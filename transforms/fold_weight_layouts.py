"""`fold-weight-layouts`: a Transpose, Reshape, Squeeze or Unsqueeze whose
input is a model weight (a `forge.parameter` read nowhere else) becomes a
step of the parameter's `layout`, which the emitted module's
`process_framework_parameters` applies once as it loads the ONNX weight.
The weight is stored in the layout the call reading it needs, and the
module makes no call per run for it: a Gemm's `transB=1` costs nothing.

Only the parameter's properties change: no weight is read at compile time.
A weight read by two calls (an LM head tied to the embedding) keeps its
Transpose, since one Forge parameter has one layout. A constant the
compiler made (a repeated value, or one it computed) is laid out at
compile time instead."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseIntOrFPElementsAttr, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from forge_opt import dtypes
from forge_opt.dialects import forge
from forge_opt.dialects.elements import array_to_attr, attr_to_array
from forge_opt.dialects.forge_ops import ReshapeOp, SqueezeOp, TransposeOp, UnsqueezeOp
from forge_opt.interpreters.forge import laid_out

#: Forge calls that only lay their input out anew
LAYOUT_CALLS = (TransposeOp, ReshapeOp, SqueezeOp, UnsqueezeOp)


def _step(call: forge.ForgeOp, rank: int) -> tuple[str, tuple[int, ...]]:
    if isinstance(call, TransposeOp):
        keywords = forge.rule_call(call).keywords
        perm = list(range(rank))
        a, b = keywords["dim0"] % rank, keywords["dim1"] % rank
        perm[a], perm[b] = perm[b], perm[a]
        return "transpose", tuple(perm)
    return "reshape", tuple(dtypes.tensor(call.results[0].type).get_shape())


def _folded(call: Operation, reads: Counter) -> forge.ParameterOp | forge.ConstantOp | None:
    """The parameter or constant `call` becomes, if it lays out one read
    by it alone."""
    if not isinstance(call, LAYOUT_CALLS):
        return None
    weight = call.operands[0]
    source = weight.owner
    if weight.uses.get_length() != 1:
        return None
    rank = len(dtypes.tensor(weight.type).get_shape())
    result = call.results[0].type
    step = _step(call, rank)
    if isinstance(source, forge.ConstantOp):
        properties = dict(source.properties)
        if source.value is not None:
            if not isinstance(source.value, DenseIntOrFPElementsAttr):
                return None
            properties["value"] = array_to_attr(laid_out(attr_to_array(source.value), [step]))
        return forge.ConstantOp.build(result_types=[result], properties=properties)
    if not isinstance(source, forge.ParameterOp) or reads[source.parameter_name.data] != 1:
        return None
    steps = [*(source.layout.data if source.layout is not None else ()), forge.layout_step(*step)]
    return forge.ParameterOp.build(
        result_types=[result],
        properties={"parameter_name": source.parameter_name, "value": source.value, "layout": ArrayAttr(steps)},
    )


@dataclass(frozen=True)
class FoldWeightLayoutsPass(ModulePass):
    """A Transpose, Reshape, Squeeze or Unsqueeze of a weight read nowhere
    else becomes a load-time step of its `forge.parameter` (of a constant
    the compiler made, its value laid out at compile time)."""

    name = "fold-weight-layouts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        reads = Counter(p.parameter_name.data for p in op.walk() if isinstance(p, forge.ParameterOp))
        for call in list(op.walk()):
            new = _folded(call, reads)
            if new is None:
                continue
            old = call.operands[0].owner
            assert isinstance(old, Operation) and old.parent is not None
            new.location = old.location
            old.parent.insert_op_before(new, old)  # declared where the weight was
            call.results[0].replace_all_uses_with(new.output)
            new.output.name_hint = call.operands[0].name_hint  # the weight's name
            call.detach()
            call.erase()
            old.detach()
            old.erase()
