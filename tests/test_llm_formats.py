"""Optimum's decoders in the formats Tenstorrent hardware runs LLMs in:
bfloat16 values with bfp8_b or bfp4_b matmul weights, on one device and
tensor-parallel, judged by the logits' PCC and reported as top-1/top-5 token
agreement."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from test_llm_decoders import DECODE, model_path, optimum_feeds
from test_tensor_parallel import needs_mpiexec

from forge_opt.check.decode import Agreement, check_decode
from forge_opt.check.report import MATCH
from forge_opt.split.api import tensor_parallel
from forge_opt.split.runner import assemble, run_parallel
from forge_opt.transforms.compile_options import CompileOptions

BF16, BFP8 = "bfloat16", "bfp8_b"


@pytest.mark.parametrize("name, devices", [("llama", 1), ("qwen2", 2)])
def test_decode_in_bfloat16_with_bfp8_weights_reports_token_agreement(name, devices):
    report = check_decode(model_path(name), 8, optimum_feeds(name, DECODE), devices=devices, data_format=BF16,
                          weight_format=BFP8)
    text = report.format()
    assert report.status == MATCH, text
    # a near tie may go either way on the oracle's feeds (qwen2 at P=2: 7 of 8), never far
    found = re.search(r"top-1 (\d)/8 \(\d+%\), top-5 8/8 \(100%\)", text)
    assert found is not None and int(found.group(1)) >= 7, text
    assert all(0.999 < r.pcc < 1 for r in report.outputs if r.name.startswith("logits")), text


@pytest.mark.slow
def test_decode_in_bfloat16_with_bfp8_weights_under_mpi():
    needs_mpiexec()
    report = check_decode(model_path("llama"), 4, optimum_feeds("llama", DECODE), devices=2, mpi=True,
                          data_format=BF16, weight_format=BFP8)
    assert report.status == MATCH, report.format()
    assert "(2 devices under MPI" in report.format()


def test_each_device_converts_its_own_blocks_of_the_weights(tmp_path):
    """At P=2 the plan's program is bfloat16 (its inputs too), each device's
    modules ask tt-mlir for bfp8_b weights, and the devices agree."""
    plan = tensor_parallel(model_path("llama"), tmp_path / "tp", 2, dims=DECODE, data_format=BF16, weight_format=BFP8)
    infos = json.loads((tmp_path / "tp" / "graph_infos.json").read_text())
    assert infos["tensors"]["past_key_values.0.key"]["dtype"] == "bfloat16"
    for dev in ("dev0", "dev1"):
        for module in (tmp_path / "tp" / dev).glob("segment_*.py"):
            source = module.read_text()
            if "forge.op.Matmul" in source and "get_parameter" in source:
                assert "experimental-weight-dtype=bfp_bf8" in source
    feeds = optimum_feeds("llama", DECODE)  # float32, as the user has them: cast to the program's bfloat16
    got, differ = assemble(plan, run_parallel(tmp_path / "tp", feeds))
    assert not differ and got["logits"].dtype == np.dtype("bfloat16")


def test_token_agreement_counts_top_1_and_top_5():
    agree = Agreement()
    want = np.zeros((1, 1, 10))
    want[0, 0, 3] = 1.0  # the oracle's token: 3
    ours = np.arange(10.0)[None, None, :]  # ours ranks 9, 8, 7, 6, 5 first
    agree.add(want, ours)
    ours = ours.copy()
    ours[0, 0, 3] = 8.5  # now 3 is second
    agree.add(want, ours)
    ours[0, 0, 3] = 10.0
    agree.add(want, ours)
    assert (agree.steps, agree.top1, agree.top5) == (3, 1, 2)
    assert "top-1 1/3 (33%), top-5 2/3 (67%)" in agree.format("onnxruntime")


def test_arrays_between_processes_keep_their_element_types(tmp_path):
    """numpy's .npz holds bfloat16 as opaque bytes: the MPI run's inputs and
    outputs (a bfloat16 cache among them) travel as bits with their types."""
    from forge_opt.files import load_arrays, save_arrays

    arrays = {"cache": np.arange(6, dtype=np.float32).reshape(2, 3).astype("bfloat16"),
              "ids": np.arange(3, dtype=np.int64)}
    save_arrays(tmp_path / "a.npz", arrays)
    back = load_arrays(tmp_path / "a.npz")
    assert back.keys() == arrays.keys()
    for name, a in arrays.items():
        assert back[name].dtype == a.dtype and np.array_equal(back[name], a)


def test_device_bytes_count_each_format_as_the_device_stores_it(tmp_path):
    """bfloat16 halves a device's parameters; bfp8_b matmul weights take
    1,088 bytes per 1,024 elements; --device-memory's figure for P=2 is the
    written program's, within the scalars lowering writes inline."""
    from forge_opt.check.split import size_devices

    stored = {}
    for data, weights in [("float32", ""), ("bfloat16", ""), ("bfloat16", BFP8)]:
        plan = tensor_parallel(model_path("llama"), tmp_path / data / weights, 2, dims=DECODE, data_format=data,
                               weight_format=weights)
        assert len({d.stored_bytes for d in plan.devices}) == 1  # the devices hold equal shares
        stored[data, weights] = plan.devices[0].stored_bytes
    assert stored["bfloat16", ""] == pytest.approx(stored["float32", ""] / 2, rel=0.01)
    assert stored["bfloat16", BFP8] < 0.65 * stored["bfloat16", ""]
    sizing = size_devices(str(model_path("llama")), CompileOptions(
        data_format="bfloat16", weight_format=BFP8, device_memory=stored["bfloat16", BFP8] + 1000, max_devices=2),
        dims=DECODE)
    assert sizing.devices == 2
    row = sizing.table[2].split()  # devices, parameters, kv cache, per device, fits
    assert int(row[1].replace(",", "")) == pytest.approx(stored["bfloat16", BFP8], rel=0.01)


def test_layers_shows_where_a_block_float_loses_accuracy(capsys):
    """--layers: every float node output against onnxruntime's, in the
    model's order; the interpreters compute the block-float program as the
    stand-in does (the last row is the logits' own figures)."""
    from forge_opt.tools.forge_check import main

    with pytest.raises(SystemExit) as done:
        main([str(model_path("llama")), "--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim",
              "past_sequence_length=3", "--data-format", BF16, "--weight-format", "bfp4_b", "--layers"])
    out = capsys.readouterr().out
    assert done.value.code in (0, 1), out
    logits = next(line for line in out.splitlines() if line.startswith("logits "))
    rows = out.split("float node outputs against onnxruntime's, in order\n")[1].splitlines()[1:]
    nodes = [row.split()[0] for row in rows if row.startswith("/")]
    order = [n.name for n in onnx.load(str(model_path("llama")), load_external_data=False).graph.node]
    assert nodes == sorted(nodes, key=order.index) and len(nodes) > 100
    assert nodes[0] == "/model/embed_tokens/Gather" and nodes[-1] == "/lm_head/MatMul"
    head = next(row for row in rows if row.startswith("/lm_head/MatMul "))
    assert head.split()[-3:] == logits.split()[-4:-1]  # pcc, rel L2, max abs: the same numbers
    # bfloat16 alone loses little; the first matmul with bfp4_b weights, ten times more
    embedding, first_matmul = float(rows[0].split()[-2]), float(
        next(row for row in rows if row.startswith("/model/layers.0/self_attn/q_proj/MatMul ")).split()[-2])
    assert embedding < 0.01 < 10 * embedding < first_matmul


def test_bisect_in_a_reduced_format_names_the_first_node_below_the_pcc():
    from forge_opt.check.model import check_model

    report = check_model(str(model_path("llama")), dims={"batch_size": 1, "sequence_length": 4,
                                                         "past_sequence_length": 3},
                         data_format=BF16, weight_format="bfp4_b", min_pcc=0.9999, bisect=True, layers=True)
    found, layers = report.divergence, report.layers
    assert report.status == 1 and found is not None and layers is not None, report.format()
    assert found.pcc < 0.9999, report.format()
    before = [layer.result.pcc for layer in layers[:[layer.node for layer in layers].index(found.node)]]
    assert all(p >= 0.9999 for p in before if p == p), report.format()
