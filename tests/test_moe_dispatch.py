"""A mixture of experts' dispatch at a fixed size (`frontends/onnx/dispatch.py`,
issue 39): Hugging Face's `torch.where(expert_mask[e])` / `index_add_`, exported
as a NonZero of run-time size, becomes one row per token, the tokens that did
not choose the expert adding zero; Qwen3-MoE as Optimum exports it compiles,
matches onnxruntime and shares its experts over devices at Megatron's count."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest
from test_llm_families import feeds

from forge_opt.check.model import check_model
from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.transforms.compile_options import CompileOptions

ROOT = Path(__file__).parent.parent
DISPATCH = ROOT / "lit_tests" / "frontends" / "resolve_expert_dispatch.onnxtxt"
QWEN3_MOE = Path(__file__).parent / "data" / "models" / "fam_qwen3_moe.onnx"


def dispatch_text() -> str:
    return "\n".join(line for line in DISPATCH.read_text().splitlines() if not line.startswith("#"))


def routed_to_expert_1(x: np.ndarray) -> np.ndarray:
    """Which tokens choose expert 1 among their top 2 (the model's router)."""
    model = onnx.parser.parse_model(dispatch_text())
    router = next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == "router")
    scores = x @ router
    return (np.argsort(-scores, axis=1, kind="stable")[:, :2] == 1).any(axis=1)


def test_every_token_is_a_row_and_those_not_routed_add_zero():
    rng = np.random.default_rng(0)
    unrouted = 0
    for _ in range(6):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        report = check_model(DISPATCH, {"x": x})
        assert report.status == MATCH, report.format()
        unrouted += int((~routed_to_expert_1(x)).sum())
    assert unrouted  # some token's row was computed and weighed nothing


SCATTER = "[scatter] out = ScatterElements <axis = 0> (zeros, indices, update)"
VARIANTS = {
    # the rows summed: a sum over the routed tokens is not one over every token
    "rows reduced": [("=> (float[3, 4] out)", "=> (float[3, 4] out, float total)"),
                     (SCATTER, SCATTER + "\n  [total] total = ReduceSum <keepdims = 0> (update)")],
    # a scatter over data that is not zeros: a token not routed would overwrite its row
    "not into zeros": [(SCATTER, SCATTER.replace("(zeros,", "(x,"))],
    # the rows' count read as data
    "count as data": [("=> (float[3, 4] out)", "=> (float[3, 4] mean)"),
                      (SCATTER, SCATTER + "\n  [n] n = Shape (token)\n  [nf] nf = Cast <to = 1> (n)\n"
                                          "  [mean] mean = Div (out, nf)")],
}


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_dispatch_not_provably_row_by_row_keeps_its_nonzero(tmp_path, variant):
    text = dispatch_text()
    for old, new in VARIANTS[variant]:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "variant.onnxtxt"
    path.write_text(text)
    report = check_model(path, {"x": np.ones((3, 4), np.float32)})
    assert report.status == NOT_COMPILED
    assert "node 'routed' (onnx.NonZero), whose result shape is not known at compile time" in report.error


def test_qwen3_moe_matches_on_one_device():
    report = check_model(QWEN3_MOE, feeds("qwen3_moe"))
    assert report.status == MATCH, report.format()


def test_qwen3_moe_keeps_its_router_whole_and_shares_its_experts():
    """Each device computes its experts whole (`stack-experts`, then the
    expert case); the experts' weighted sum stays partial, one all-reduce a
    layer; the router stays whole, its reason in the report."""
    from forge_opt.check.split import check_parallel
    report = check_parallel(QWEN3_MOE, 2, feeds("qwen3_moe"))
    assert report.status == MATCH, report.format()
    assert int(re.search(r"(\d+) collectives? sending", report.summary).group(1)) == 6  # pyright: ignore
    assert "6 expert" in report.summary and "warning" not in report.summary


@pytest.mark.parametrize("devices", [2, 4])
def test_each_device_holds_its_experts_weights_whole(tmp_path, devices):
    """Expert parallelism: the 4 experts' gate, up and down weights stacked
    per layer and split by experts, E/P of them whole on each device."""
    from forge_opt.split.api import tensor_parallel

    # (at 4 devices, the 2 KV heads stay replicated)
    plan = tensor_parallel(QWEN3_MOE, tmp_path / "tp", devices, dims={"batch_size": 1, "sequence_length": 4,
                                                                      "past_sequence_length": 3},
                           require_sharded=devices == 2)
    routers = [layer for layer in plan.layers if "/mlp/gate/" in layer.node]
    assert len(routers) == 2 and all(layer.case == "replicated" for layer in routers)
    assert "reads all its columns at once (a router's scores)" in routers[0].reason
    experts = [layer for layer in plan.layers if "/experts." in layer.node]
    assert [layer.node for layer in experts[:3]] == [f"/model/layers.0/mlp/experts.*/{p}/MatMul"
                                                     for p in ("gate_proj", "up_proj", "down_proj")]
    assert len(experts) == 6 and {(layer.case, layer.kind) for layer in experts} == {("expert", "experts")}
    assert experts[0].reason == f"each device {4 // devices} of 4 experts"
    segments = "".join(p.read_text() for p in (tmp_path / "tp" / "dev0").glob("*.py"))
    assert (f'"/model/layers.0/mlp/experts.*/down_proj/MatMul.weight.shard", forge.Parameter(*({4 // devices}, 16, 32)'
            in segments)


@pytest.mark.parametrize(("axis", "said"), [
    (None, "pinned by the plan"),
    (1, "they are split by experts (axis 0) or replicated (null)"),
])
def test_a_plan_pins_stacked_experts_by_their_node(tmp_path, axis, said):
    """Replicated (null) as asked; axis 1, which experts do not have, is an
    error naming the layer."""
    import json

    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.split.api import tensor_parallel

    node = "/model/layers.0/mlp/experts.*/up_proj/MatMul"
    (tmp_path / "plan.json").write_text(json.dumps({"layers": {node: {"axis": axis}}}))
    dims = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
    if axis is not None:
        with pytest.raises(ForgeOptError, match=re.escape(said)):
            tensor_parallel(QWEN3_MOE, tmp_path / "tp", 2, dims=dims, plan=str(tmp_path / "plan.json"))
        return
    plan = tensor_parallel(QWEN3_MOE, tmp_path / "tp", 2, dims=dims, plan=str(tmp_path / "plan.json"))
    [up] = [layer for layer in plan.layers if layer.node == node]
    assert (up.case, up.reason) == ("replicated", said)


def test_experts_the_devices_do_not_divide_are_each_split_as_an_mlp(tmp_path):
    """4 experts on 8 devices: each expert's weights split by columns or
    rows as a Linear's are (batched over the experts), with that reason;
    the program matches (`tp_experts.mlir` shows the pairing)."""
    from forge_opt.check.split import check_parallel
    from forge_opt.split.api import tensor_parallel

    dims = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
    plan = tensor_parallel(QWEN3_MOE, tmp_path / "tp", 8, dims=dims)
    experts = [layer for layer in plan.layers if "/experts." in layer.node]
    assert len(experts) == 6 and {layer.case for layer in experts} == {"column", "row"}
    assert all(layer.reason.startswith("its 4 experts do not divide by 8 devices: each expert's") for layer in experts)
    report = check_parallel(QWEN3_MOE, 8, feeds("qwen3_moe"))
    assert report.status == MATCH, report.format()


def test_a_plan_asking_for_experts_the_devices_do_not_divide_says_so(tmp_path):
    import json

    from forge_opt.diagnostics import ForgeOptError
    from forge_opt.split.api import tensor_parallel

    node = "/model/layers.0/mlp/experts.*/up_proj/MatMul"
    (tmp_path / "plan.json").write_text(json.dumps({"layers": {node: {"axis": 0}}}))
    with pytest.raises(ForgeOptError, match=re.escape(f"node '{node}' (tir.matmul): an expert-parallel matmul needs "
                                                      "its experts (4) to divide by the 8 devices")):
        tensor_parallel(QWEN3_MOE, tmp_path / "tp", 8, plan=str(tmp_path / "plan.json"),
                        dims={"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3})


def test_device_memory_sizes_the_experts_as_they_will_be_shared():
    """`--device-memory` measures each P on the program it would run, its
    experts stacked and split (3 devices: replicated, measured, not an
    error); a P of 1 keeps one device's program, whose weights load by the
    model's names: no stack of them."""
    from forge_opt import import_onnx
    from forge_opt.check.split import size_devices
    from forge_opt.transforms.pipelines import run_pipeline

    dims = {"batch_size": 1, "sequence_length": 4, "past_sequence_length": 3}
    sizing = size_devices(QWEN3_MOE, CompileOptions(device_memory=40_000), dims=dims)
    assert sizing.devices == 4
    [three] = [line for line in sizing.table if line.startswith("3 ")]
    assert "no:" not in three, sizing.table
    module = import_onnx(onnx.load(QWEN3_MOE), dims=dims)
    run_pipeline(module, "onnx-to-forge{device-memory=100000000}")
    names = [str(op.parameter_name.data) for op in module.walk() if hasattr(op, "parameter_name")]
    assert names and not any("experts.*" in n for n in names)
