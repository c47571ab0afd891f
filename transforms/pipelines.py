"""The standard pipelines, each also usable as one pass name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException

from forge_opt.data_formats import BLOCK_FORMATS, WEIGHT_FORMAT_ATTR, FormatName
from forge_opt.diagnostics import ForgeOptError, describe
from forge_opt.dialects import forge
from forge_opt.transforms.compile_options import CompileOptions
from forge_opt.transforms.data_formats import (
    MarkWeightFormatsPass,
    TirDataFormatPass,
    data_format_passes,
    weight_format_passes,
)
from forge_opt.transforms.fold_weight_layouts import FoldWeightLayoutsPass
from forge_opt.transforms.forge_to_stablehlo import ForgeToStableHLO
from forge_opt.transforms.fuse_patterns import FusePatternsPass
from forge_opt.transforms.lower_split import LowerSplitPass
from forge_opt.transforms.merge_equal_ops import MergeEqualOpsPass
from forge_opt.transforms.onnx_to_tir import OnnxToTirPass
from forge_opt.transforms.partition_for_forge import PartitionForForgePass
from forge_opt.transforms.stack_experts import StackExpertsPass
from forge_opt.transforms.static_cache import StaticKvCachePass
from forge_opt.transforms.tir_to_forge import TirToForgePass
from forge_opt.transforms.tp.annotate import TensorParallelPass
from forge_opt.transforms.tp.combine import CombineAllReducesPass
from forge_opt.transforms.tp.mesh import CollectivesOnMeshPass
from forge_opt.transforms.tp.partition import TPPartitionPass
from forge_opt.transforms.tp.scatter_all_reduces import ScatterAllReducesPass
from forge_opt.transforms.tp.scatter_heads import ScatterAttentionHeadsPass
from forge_opt.transforms.tp.sharing import sharing_passes

if TYPE_CHECKING:
    from forge_opt.transforms.tp.sizing import Sizing


def verify_after(done: ModulePass | None, module: ModuleOp) -> None:
    """Verify `module`; invalid IR is an error naming the pass that made it
    (none: the input itself, whose checks name their ONNX node)."""
    try:
        module.verify()
    except VerifyException as e:
        if done is None:
            raise ForgeOptError(str(e)) from None
        raise ForgeOptError(f"pass '{done.name}' produced invalid IR{_at(module)}: {e}") from None


def _at(module: ModuleOp) -> str:
    """` at node 'n' (tir.binary)`: the first op that fails its own checks."""
    for op in module.walk():
        try:
            op.verify_()
        except VerifyException:
            return f" at {describe(op)}"
    return ""


def run_passes(passes: list[ModulePass], ctx: Context, module: ModuleOp, verify_each: bool = True) -> None:
    """Apply passes in order. With `verify_each`, verify after each so a bad
    rewrite is blamed on the pass that made it. Otherwise the driver verifies
    the result, as it does after any pass (xdsl-opt, forge-opt and
    `compile_onnx` all do)."""
    for p in passes:
        p.apply(ctx, module)
        if verify_each:
            verify_after(p, module)


def lowering_passes(data_format: FormatName = FormatName.FLOAT32) -> list[ModulePass]:
    """From `tir` to Forge calls, computing in `data_format`: what follows
    onnx-to-tir for a whole model (then `weight_passes`), or tp-partition
    for every device's program at once."""
    return [FusePatternsPass(), MergeEqualOpsPass(), *data_format_passes(data_format), LowerSplitPass(),
            TirToForgePass()]


def weight_passes(weight_format: FormatName = FormatName.FLOAT32) -> list[ModulePass]:
    """What a Forge program's weights take once they are its own (the whole
    model's, or a device's blocks): their load-time layouts, and the block
    float the matmul weights are stored in."""
    return [FoldWeightLayoutsPass(), *weight_format_passes(weight_format)]


@dataclass(frozen=True)
class OnnxToForgePass(CompileOptions, ModulePass):
    """The whole lowering: onnx-to-tir, fuse-patterns, merge-equal-ops,
    lower-split, tir-to-forge, fold-weight-layouts; its options are a
    `CompileOptions`'s fields. `static-cache=L` makes
    a growing KV cache one of L positions (`static-kv-cache`, after
    onnx-to-tir). `data-format=bfloat16`
    computes in Forge's Float16_b (`tir-data-format` before lower-split);
    `weight-format=bfp8_b` or `bfp4_b` stores the matmul weights as block
    floats (`mark-weight-formats` last). With
    `devices=P` (P > 1): onnx-to-tir, then `sharing_passes` (stack-experts,
    tensor-parallel, tp-partition, combine-all-reduces; `mesh=RxC`, P = R·C,
    adds collectives-on-mesh), then
    the same lowering to Forge calls, of the program every device runs: its
    blocks of the weights are `shard.all_slice`s of the model's
    `forge.parameter`s, the collectives between stay `shard` ops. forge-python
    cuts it at each collective and gives each device its blocks, laid out
    and formatted for that device (`targets/devices/`). `device-memory=BYTES`
    chooses `devices` (`tp/sizing`)."""

    name = "onnx-to-forge"

    # `onnx-to-forge{verify-each=true}` verifies between its steps, naming the
    # step that produced invalid IR.
    verify_each: bool = False

    @classmethod
    def of(cls, options: CompileOptions, verify_each: bool = False) -> OnnxToForgePass:
        """The lowering `options` ask for."""
        return cls(**options.values(), verify_each=verify_each)

    def passes(self, devices: int | None = None) -> list[ModulePass]:
        devices = self.device_count if devices is None else devices
        data_format, weight_format = self.formats
        first: list[ModulePass] = [OnnxToTirPass()]
        if self.static_cache:
            first.append(StaticKvCachePass(self.static_cache))
        if devices > 1:
            # the whole program in its format before it is shared: the blocks, the collectives and the plan
            # are then in it too; each device's segments mark their block-float weights (`weight_passes`)
            shared = sharing_passes(self, devices)
            return [*first, *data_format_passes(data_format), *shared, *lowering_passes()]
        return [*first, *lowering_passes(data_format), *weight_passes(weight_format)]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.formats[1] in BLOCK_FORMATS:  # the setting, which each device's segments are lowered with
            op.attributes[WEIGHT_FORMAT_ATTR] = forge.DataFormatAttr(self.formats[1])
        if not self.device_memory:
            run_passes(self.passes(), ctx, op, self.verify_each)
            return
        from forge_opt.transforms.tp.sizing import SIZING_ATTR

        sizing = self.size(ctx, op)
        run_passes([p for p in self.passes(sizing.devices) if not isinstance(p, _BEFORE_SIZING)], ctx, op,
                   self.verify_each)
        op.attributes[SIZING_ATTR] = StringAttr("\n".join([*sizing.table, f"devices: {sizing.devices}"]))

    def size(self, ctx: Context, op: ModuleOp, start: int = 1) -> Sizing:
        """`device-memory`: run the passes before sharing on `op` (the program
        measured as it will run: its cache static, in its format) and choose
        the device count, from `start` up. forge-check --device-memory sizes
        by this too."""
        from forge_opt.transforms.tp.sizing import choose_devices

        run_passes([p for p in self.passes(2) if isinstance(p, _BEFORE_SIZING)], ctx, op, self.verify_each)
        return choose_devices(op, self, start)


#: what onnx-to-forge{device-memory=} runs before it chooses the device count
_BEFORE_SIZING = (OnnxToTirPass, StaticKvCachePass, TirDataFormatPass)


ALL_PASSES: dict[str, type[ModulePass]] = {
    p.name: p
    for p in (
        OnnxToTirPass, FusePatternsPass, MergeEqualOpsPass, LowerSplitPass, TirToForgePass, FoldWeightLayoutsPass,
        TirDataFormatPass, MarkWeightFormatsPass, StaticKvCachePass, OnnxToForgePass,
        PartitionForForgePass, StackExpertsPass, TensorParallelPass, TPPartitionPass, ScatterAllReducesPass,
        ScatterAttentionHeadsPass, CombineAllReducesPass, CollectivesOnMeshPass, ForgeToStableHLO,
    )
}


def run_pipeline(module: ModuleOp, pipeline: str | CompileOptions = "onnx-to-forge",
                 ctx: Context | None = None) -> None:
    """Run a pass pipeline (xdsl-opt's syntax, our passes; or the lowering
    compile options ask for) on `module` in place, verifying the IR before
    the first pass and after each, as xdsl-opt does."""
    verify = lambda done, module, _next: verify_after(done, module)  # noqa: E731
    if isinstance(pipeline, CompileOptions):
        passes = PassPipeline((OnnxToForgePass.of(pipeline),), verify)
    else:
        passes = PassPipeline.parse_spec({n: (lambda p=p: p) for n, p in ALL_PASSES.items()}, pipeline, verify)
    passes.apply(ctx or Context(), module)
