"""A vocab-parallel embedding and the layers after it; an LM head tied to
the embedding's table, held once per device (`transforms/tp/tied_head.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check.report import MATCH
from forge_opt.check.split import check_parallel, size_devices
from forge_opt.split.api import tensor_parallel
from forge_opt.transforms.compile_options import CompileOptions

MODELS = Path(__file__).parent / "data" / "models"
RNG = np.random.default_rng(0)
IDS = {"ids": np.random.default_rng(1).integers(-60, 60, (2, 5)).astype(np.int64)}


def _embedding_then_linear(head: str = "", vocab: int = 64) -> onnx.ModelProto:
    """An embedding, two Linears, and the LM head: none, one reading the
    table through a Transpose (`tied`), or a transposed copy of the table
    as its own initializer, as Optimum exports GPT-2 (`copy`)."""
    table = RNG.standard_normal((vocab, 16)).astype(np.float32)
    inits = [numpy_helper.from_array(table, "table"),
             numpy_helper.from_array(RNG.standard_normal((16, 32)).astype(np.float32), "w0"),
             numpy_helper.from_array(RNG.standard_normal((32, 16)).astype(np.float32), "w1")]
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
        helper.make_node("MatMul", ["e", "w0"], ["h"], name="proj"),
        helper.make_node("Relu", ["h"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w1"], ["o"], name="out"),
    ]
    if head == "tied":
        nodes.append(helper.make_node("Transpose", ["table"], ["tt"], name="tie", perm=[1, 0]))
    elif head == "copy":
        inits.append(numpy_helper.from_array(np.ascontiguousarray(table.T), "tt"))
    if head:
        nodes.append(helper.make_node("MatMul", ["o", "tt"], ["y"], name="lm_head"))
    width = vocab if head else 16
    return make_model(
        nodes,
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 5])],
        [helper.make_tensor_value_info("y" if head else "o", TensorProto.FLOAT, [2, 5, width])],
        inits,
    )


def test_the_linear_after_a_vocab_parallel_embedding_is_column_parallel(tmp_path):
    report = check_parallel(_embedding_then_linear(), 2, IDS)
    assert report.status == MATCH, report.error
    assert "layers: 1 vocab, 1 column, 1 row" in report.summary
    plan = tmp_path / "plan.json"  # pinned so, as the plan file says it
    plan.write_text(json.dumps({"layers": {"proj": {"axis": 1}}}))
    assert check_parallel(_embedding_then_linear(), 2, IDS, plan=str(plan)).status == MATCH


@pytest.mark.parametrize("head", ["tied", "copy"])
def test_an_lm_head_tied_to_the_embedding_reads_its_block(tmp_path, head):
    """Each device holds one block of the table, which the embedding and
    the head both read: half of the parameters on each of 2 devices, where
    a head split on its own held three quarters."""
    report = check_parallel(_embedding_then_linear(head), 2, IDS)
    assert report.status == MATCH, report.error
    assert "layers: 1 vocab, 2 column, 1 row" in report.summary
    plan = tensor_parallel(_embedding_then_linear(head), tmp_path, 2)
    (lm_head,) = [layer for layer in plan.layers if layer.node == "lm_head"]
    assert lm_head.case == "column" and "tied to" in lm_head.reason
    distinct = (64 * 16 + 16 * 32 + 32 * 16) * 4
    assert [d.parameter_bytes for d in plan.devices] == [distinct // 2 + 8] * 2  # and its first row index
    weights = onnx.load(str(tmp_path / "dev1" / "weights.onnx"))
    # embed.shard: the device's first row index
    assert sorted(t.name for t in weights.graph.initializer) == ["embed.shard", "table.shard", "w0.shard", "w1.shard"]


def test_a_tied_head_over_a_padded_vocabulary_slices_the_padding_off():
    """66 rows on 4 devices: the table padded to 68, the head's logits
    gathered and their 2 padding columns dropped."""
    report = check_parallel(_embedding_then_linear("copy", vocab=66), 4, IDS)
    assert report.status == MATCH, report.error
    assert "layers: 1 vocab, 2 column, 1 row" in report.summary


def test_a_head_equal_to_the_table_but_in_one_element_is_its_own_weight(tmp_path):
    model = _embedding_then_linear("copy")
    tt = model.graph.initializer[-1]
    values = numpy_helper.to_array(tt).copy()
    values[5, 40] += 1.0
    tt.CopyFrom(numpy_helper.from_array(values, "tt"))
    plan = tensor_parallel(model, tmp_path, 2)
    (lm_head,) = [layer for layer in plan.layers if layer.node == "lm_head"]
    assert "tied" not in lm_head.reason
    assert check_parallel(model, 2, IDS).status == MATCH


def test_optimums_gpt2_holds_its_table_once(tmp_path):
    """Optimum writes GPT-2's head as a transposed copy of `wte`: at P=2 no
    device holds a block of the copy, and `--device-memory` counts what the
    devices hold (within the all-zero biases the lowering drops)."""
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 3}
    model = MODELS / "llm_gpt2.onnx"
    plan = tensor_parallel(model, tmp_path, 2, dims=dims)
    names = {t.name for t in onnx.load(str(tmp_path / "dev0" / "weights.onnx")).graph.initializer}
    copy = next(t.name for t in onnx.load(str(model)).graph.initializer if t.name.startswith("onnx::MatMul"))
    assert "transformer.wte.weight.shard" in names and not any(n.startswith(copy) for n in names)
    stored = plan.devices[0].stored_bytes
    fits = CompileOptions(device_memory=int(stored * 1.01) + 2048, max_devices=2)  # + its KV cache
    row = size_devices(str(model), fits, dims=dims).table[2].split()
    assert int(row[1].replace(",", "")) == pytest.approx(stored, rel=0.01)
