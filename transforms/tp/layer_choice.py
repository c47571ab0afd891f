"""What `tensor-parallel` takes for a layer: a Linear (a matmul by a 2-d
constant weight), stacked experts, an Embedding (a lookup in a constant
table) or a convolution; and the record of the case chosen for it."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation, SSAValue

from forge_opt.diagnostics import node_name
from forge_opt.dialects import tir
from forge_opt.plan.graph_infos import REPLICATE
from forge_opt.transforms.tp.rules import constant_root, constant_weight


@dataclass
class LayerChoice:
    """A layer as the annotator decides it (the plan records it as `graph_infos.Layer`)."""

    op: Operation
    kind: str  # "linear", "embedding", "experts" or "conv"
    case: str = REPLICATE
    gather_out: bool = False
    packed: int = 0  # parts of a packed column layer
    blocks: int = 0  # of a column layer split by a mesh's rows: their count (each row one block)
    padded_rows: int = 0
    reason: str = ""  # why this case
    unshared: bool = False  # replicated, though large enough to share and not pinned so

    def entry(self) -> dict:
        """The layer as `graph_infos.json`'s `layers` lists it."""
        return {"node": self.name, "kind": self.kind, "case": self.case, "packed": self.packed,
                "padded_rows": self.padded_rows, "reason": self.reason, "unshared": self.unshared,
                **({"blocks": self.blocks} if self.blocks else {})}

    @property
    def name(self) -> str:
        return node_name(self.op) or self.op.name

    @property
    def weight(self) -> SSAValue:
        return self.op.operands[0] if self.kind == "embedding" else self.op.operands[1]


def model_weight(v: SSAValue) -> bool:
    """Laid out from one of the model's weights (not a constant the compiler made)."""
    root = constant_root(v)
    return root is not None and root.weight_name is not None


def find_layer(op: Operation) -> LayerChoice | None:
    """`op` as a layer tensor parallelism can share, if it is one."""
    if isinstance(op, tir.MatmulOp) and constant_weight(op.rhs):
        return LayerChoice(op, "linear")
    if isinstance(op, tir.MatmulOp) and constant_weight(op.rhs, 3) and model_weight(op.rhs):
        # weights stacked over experts; not a table the compiler computed (SAM's relative positions, gathered)
        return LayerChoice(op, "experts")
    if isinstance(op, tir.GatherOp) and op.axis.value.data == 0 and constant_weight(op.input) and \
            not isinstance(op.indices.owner, tir.ConstantOp):  # rows a constant picks (a GRU's direction): a slice
        return LayerChoice(op, "embedding")
    if isinstance(op, tir.Conv2dOp | tir.ConvTranspose2dOp) and constant_weight(op.weight, 4):
        return LayerChoice(op, "conv")
    return None
