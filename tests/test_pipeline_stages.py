"""Pipeline stages (issue 54, item 2): a model cut into S contiguous
stages, one device (or P) each, that exchange only activations; checked
against onnxruntime, against the one-stage program bit for bit, under MPI
and through a decode."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from test_llm_decoders import DECODE, model_path, optimum_feeds
from test_tensor_parallel import needs_mpiexec

from forge_opt.check import stages as stage_check
from forge_opt.check.decode import check_decode
from forge_opt.check.report import MATCH, MISMATCH, NOT_COMPILED
from forge_opt.check.stages import check_stages
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.names import layer_key
from forge_opt.plan.folder import read_split
from forge_opt.plan.graph_infos import Plan
from forge_opt.split.api import convert, split_model
from forge_opt.split.folder import converted_module
from forge_opt.split.mpi import run_mpi
from forge_opt.split.stages import schedule_report
from forge_opt.tools import forge_check, forge_split
from forge_opt.transforms.stage_cuts import Cut, StageInfo

DIMS = DECODE  # a decode step: 4 new tokens over 3 cached
DECODERS = ["llama", "qwen2", "mistral", "phi3", "gpt2"]


@pytest.mark.parametrize("name", DECODERS)
def test_two_stages_match_and_equal_the_one_stage_program_bit_for_bit(name):
    report = check_stages(model_path(name), 2, optimum_feeds(name, DECODE))
    text = report.format()
    assert report.status == MATCH, text
    assert "every output of the 2 stages equals the one-stage program's, bit for bit" in text
    assert report.summary.startswith("pipeline: 2 stages, cut where a layer starts, balanced by stored weights")
    assert "            8      9   11.1%" in report.summary  # 8 micro-batches: M + S - 1 steps, bubble 1/9


def test_each_stage_holds_its_own_layers_weights_and_cache(tmp_path):
    """The embedding on the first stage, the head on the last, each layer's
    KV cache on its own layer's stage, and only activations between them."""
    partition, plan = split_model(model_path("llama"), tmp_path / "p", stages=2, dims=DIMS)
    assert [g.stage for g in plan.graphs] == [0, 1] and plan.stages == 2 and plan.device_count == 2
    first, last = (onnx.load(tmp_path / "p" / g.model_path, load_external_data=False) for g in plan.graphs)
    assert {"past_key_values.0.key", "past_key_values.0.value"} <= {i.name for i in first.graph.input}
    assert not any(i.name.startswith("past_key_values.1") for i in first.graph.input)
    assert not any(i.name.startswith("past_key_values.0") for i in last.graph.input)
    assert any(n.op_type == "Gather" and "embed_tokens" in n.name for n in first.graph.node)
    assert any("lm_head" in n.name for n in last.graph.node)
    assert not any("lm_head" in n.name for n in first.graph.node)
    weights = [{t.name for t in m.graph.initializer if np.prod(t.dims) > 64} for m in (first, last)]
    assert not weights[0] & weights[1]  # no weight stored twice
    sent = set(plan.graphs[0].outputs) & set(plan.graphs[1].inputs)
    assert sent and all(plan.tensors[x].attr == "intermediate" for x in sent)  # activations only
    cut = partition.cut
    assert cut is not None and cut.how == "where a layer starts" and [s.layers for s in cut.stages] == ["0-0", "1-1"]
    assert abs(cut.stages[0].weight_bytes - cut.stages[1].weight_bytes) <= 0.1 * cut.stages[0].weight_bytes


def test_stages_on_two_devices_each_match():
    """S x P: each stage tensor-parallel; a stage boundary sums the residual
    stream the one program keeps as partial sums a layer longer, so the two
    differ in the order of their additions, which the report says."""
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", DECODE), devices=2)
    text = report.format()
    assert report.status == MATCH, text
    assert "each stage tensor-parallel on 2 devices (2 x 2 = 4 devices)" in report.summary
    assert "sums the partial residual stream" in text or "bit for bit" in text
    assert report.cut is not None and [s.layers for s in report.cut.stages] == ["0-0", "1-1"]  # for the API


@pytest.mark.parametrize(("name", "devices"), [("llama", 1), ("gpt2", 1), ("qwen2", 2)])
def test_decode_8_through_two_stages_equals_onnxruntime(name, devices):
    """Each stage keeps its own layers' static KV cache: two programs for
    the whole decode, the prompt's and a step's."""
    report = check_decode(model_path(name), 8, optimum_feeds(name, DECODE), stages=2, devices=devices)
    assert report.status == MATCH, report.format()
    each = f" of {devices} devices each" if devices > 1 else ""
    assert f"decode: 8/8 tokens equal to onnxruntime's (2 pipeline stages{each}; 2 programs built, a static KV " \
           "cache of 15 positions)" in report.format()


def test_each_stage_keeps_its_own_layers_static_cache(tmp_path):
    static = {**DIMS, "past_sequence_length": 12}
    _, plan = split_model(model_path("llama"), tmp_path / "s", stages=2, dims=static, static_cache=12)
    assert plan.static_cache is not None and plan.static_cache.length == 12
    assert plan.static_cache.caches["past_key_values.1.value"] == "present.1.value"
    assert [plan.cache_of(g) for g in plan.graphs] == [12, 12]
    convert(tmp_path / "s")
    for g in read_split(tmp_path / "s")[1]:  # each stage's module writes its own layers' cache at the position
        module = converted_module(g)
        assert module is not None and "cache_position" in module.read_text()
        assert {x for x in g.inputs if x.startswith("past")} == {f"past_key_values.{g.index}.key",
                                                                  f"past_key_values.{g.index}.value"}


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2])
def test_under_mpi_each_process_returns_the_in_process_run(devices):
    needs_mpiexec()
    report = check_stages(model_path("qwen2"), 2, optimum_feeds("qwen2", DECODE), devices=devices, mpi=True)
    assert report.status == MATCH, report.format()
    assert f"under MPI: {2 * devices} processes, each returning the outputs of the run in this process" in \
        report.summary


@pytest.mark.slow
def test_decode_through_two_stages_under_mpi():
    needs_mpiexec()
    report = check_decode(model_path("qwen2"), 4, optimum_feeds("qwen2", DECODE), stages=2, mpi=True)
    assert report.status == MATCH, report.format()
    assert "decode: 4/4 tokens equal to onnxruntime's (2 pipeline stages under MPI; 2 programs built" in \
        report.format()


def test_a_stage_that_keeps_the_next_waiting_is_the_one_named(tmp_path):
    """Stage 0's devices compute past --timeout after their all-reduces;
    stage 1's wait in their receives. The devices named are stage 0's,
    which did not send, not stage 1's, which have entered fewer
    collectives only because they wait."""
    needs_mpiexec()
    folder = tmp_path / "s"
    split_model(model_path("llama"), folder, stages=2, dims=DIMS, devices=2)
    convert(folder)
    for device in (0, 1):  # the last segment, after the all-reduces
        module = folder / "graph_ir_0" / "parallel" / f"dev{device}" / "segment_2.py"
        head = next(line for line in module.read_text().splitlines() if "def forward" in line) + "\n"
        module.write_text(module.read_text().replace(head, head + "        import time; time.sleep(300)\n", 1))
    with pytest.raises(ForgeOptError) as stopped:
        run_mpi(folder, optimum_feeds("llama", DECODE), 4, timeout=3)
    said = str(stopped.value)
    assert said.startswith("the MPI run was stopped: device 0 did not send message 1 to device 2 within --timeout "
                           "3 s, where device 2 waited; device 1 did not send message 1 to device 3"), said
    assert "device 2: last receive from device 0, 1 entered in all" in said


def test_device_memory_sizes_the_devices_of_each_stage_by_what_the_stage_stores(capsys):
    """Each of Llama's 2 stages stores half the weights: 2 devices a stage
    fit 40,000 bytes, where the whole model would need 4."""
    args = [str(model_path("llama")), "--stages", "2", "--dim", "batch_size=1", "--dim", "sequence_length=4",
            "--dim", "past_sequence_length=3"]
    with pytest.raises(SystemExit) as done:
        forge_check.main([*args, "--device-memory", "40000"])
    said = capsys.readouterr()
    assert done.value.code == MATCH, said.err
    text = said.out + said.err
    assert "stage 0:\ndevices      parameters     kv cache     per device  fits 40,000 bytes\n" in text
    assert "\nstage 1:\n" in text and "\ndevices: 2 a stage\n" in text
    assert "each stage tensor-parallel on 2 devices (2 x 2 = 4 devices)" in text
    rows = [line.split() for line in text.splitlines() if line.startswith("2 ")]
    assert len(rows) == 2 and all(int(r[2].replace(",", "")) == 448 for r in rows)  # one layer's cache, halved
    with pytest.raises(SystemExit) as done:
        forge_check.main([*args, "--device-memory", "1000", "--max-devices", "2"])
    assert done.value.code == NOT_COMPILED
    assert "--stages 2, stage 0: no device count up to 2 fits the model in 1,000 bytes per device" in \
        capsys.readouterr().err


def test_device_memory_sizes_a_decodes_stages_with_their_static_cache(capsys):
    with pytest.raises(SystemExit) as done:
        forge_check.main([str(model_path("llama")), "--stages", "2", "--decode", "4", "--device-memory", "40000",
                          "--dim", "batch_size=1", "--dim", "sequence_length=4", "--dim", "past_sequence_length=3"])
    said = capsys.readouterr()
    assert done.value.code == MATCH, said.err
    # each stage's one layer: K and V of 2 heads x 15 positions x 8, float32
    rows = [r for r in map(str.split, (said.out + said.err).splitlines()) if r[:1] == ["1"] and r[-1] in ("yes", "no")]
    assert [r[2] for r in rows] == ["1,920", "1,920"]


def test_a_stage_output_off_by_one_unit_is_a_mismatch(monkeypatch):
    """The bit-for-bit comparison can fail: one unit in the last place of
    one logit, well inside the tolerance onnxruntime is judged by."""
    real = stage_check.run_split

    def nudged(folder, feeds, **how):
        out = real(folder, feeds, **how)
        logits = out["logits"].copy()
        logits.flat[0] = np.nextafter(logits.flat[0], np.float32(np.inf))
        return {**out, "logits": logits}

    monkeypatch.setattr(stage_check, "run_split", nudged)
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", DECODE))
    assert report.status == MISMATCH
    assert "the 2 stages' outputs differ from the one-stage program's (logits by up to" in report.error
    assert all(r.ok for r in report.outputs)  # onnxruntime's tolerance alone would have passed it


def test_a_node_off_the_device_is_named(tmp_path):
    with pytest.raises(ForgeOptError, match=r"--stages 2: every stage runs on a device, but node .* cannot"):
        split_model(model_path("llama"), tmp_path / "p", stages=2, dims=DIMS,
                    cpu_ops=("Softmax",))


def test_more_stages_than_places_to_cut_is_refused(tmp_path):
    with pytest.raises(ForgeOptError, match=r"--stages 500: the model has .* nodes to run, fewer than the stages"):
        split_model(model_path("gpt2"), tmp_path / "p", stages=500, dims=DIMS)


def test_stages_out_of_order_in_a_hand_edited_plan_are_refused(tmp_path):
    split_model(model_path("gpt2"), tmp_path / "p", stages=2, dims=DIMS)
    data = json.loads((tmp_path / "p" / "graph_infos.json").read_text())
    data["graphs"][0]["stage"], data["graphs"][1]["stage"] = 1, 0
    with pytest.raises(ForgeOptError, match=r"the graphs' stages are \[1, 0\]: a pipeline's graphs are its stages"):
        Plan.from_json(data, "p/graph_infos.json")


def test_the_schedule_counts_steps_and_the_bubble():
    cut = Cut([10, 20, 30], "where a layer starts", [StageInfo(10, f"{k}-{k}", 1000, 100) for k in range(4)])
    lines = schedule_report(cut, micro_batches=(1, 8)).splitlines()
    assert lines[-2].split() == ["1", "4", "75.0%"]  # one batch: each stage idles 3 of 4 steps
    assert lines[-1].split() == ["8", "11", "27.3%"]  # (S - 1) / (M + S - 1)


def test_forge_check_and_forge_split_take_stages(tmp_path, capsys):
    model = str(model_path("gpt2"))
    dims = [a for k, v in DIMS.items() for a in ("--dim", f"{k}={v}")]
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "2", *dims])
    assert done.value.code == MATCH
    out = capsys.readouterr()
    assert "match" in out.out and "pipeline: 2 stages" in out.err
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "1", *dims])
    assert done.value.code == NOT_COMPILED
    assert "--stages 1: a pipeline has 2 stages or more" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        forge_split.main([model, "-o", str(tmp_path / "s"), "--stages", "2", *dims])
    assert done.value.code == 0
    assert "pipeline: 2 stages" in capsys.readouterr().out
    infos = json.loads((tmp_path / "s" / "graph_infos.json").read_text())
    assert [g["stage"] for g in infos["graphs"]] == [0, 1]


def test_forge_check_annotates_a_pipeline_and_cuts_from_the_annotations(tmp_path, capsys):
    model, out = str(model_path("gpt2")), tmp_path / "gpt2_s2.onnx"
    dims = [a for k, v in DIMS.items() for a in ("--dim", f"{k}={v}")]
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "2", *dims, "--annotate", str(out)])
    assert done.value.code == MATCH
    assert f"annotated: {out} (configuration n300-s2, " in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        forge_check.main([str(out), "--stages", "2", *dims, "--plan-from-onnx"])
    said = capsys.readouterr()
    assert done.value.code == MATCH, said.out
    assert "pipeline: 2 stages, cut as the annotations place them" in said.err


def test_annotated_stages_against_the_graphs_order_are_named(tmp_path):
    from forge_opt.plan.onnx_annotations import annotate_stages, stage_pins
    from forge_opt.split.stages import stage_of_nodes

    chosen, _ = split_model(model_path("gpt2"), tmp_path / "s", stages=2, dims=DIMS)
    stage_of = stage_of_nodes(chosen.graphs)
    last = chosen.graphs[1].nodes[-1].name
    stage_of[last] = 0  # the head back on the first stage, after the second stage's nodes
    annotated = annotate_stages(onnx.load(str(model_path("gpt2"))), stage_of, 2).model
    with pytest.raises(ForgeOptError, match=f"the annotations put node {last} at stage 0, after a node at stage 1"):
        split_model(model_path("gpt2"), tmp_path / "back", stages=2, dims=DIMS, stage_of=stage_pins(annotated))


def test_weights_read_through_a_folded_transpose_count_for_their_stage(tmp_path):
    """BERT's exporter transposes each weight before its MatMul; the import
    folds the Transpose, and its weight still counts for the stage that
    runs the MatMul: one layer a stage, not the embeddings alone."""
    bert = model_path("gpt2").parent / "bert_opset17.onnx"
    partition, _ = split_model(bert, tmp_path / "p", stages=2)
    assert partition.cut is not None and [s.layers for s in partition.cut.stages] == ["0-0", "1-1"]


def test_three_stages_of_a_two_layer_decoder_take_both_layer_starts(tmp_path):
    """The first cut leaves the second a layer start to take."""
    partition, _ = split_model(model_path("llama"), tmp_path / "p", stages=3, dims=DIMS)
    assert partition.cut is not None and partition.cut.how == "where a layer starts"
    assert [s.layers for s in partition.cut.stages] == ["", "0-0", "1-1"]


@pytest.mark.parametrize("name, key", [
    ("/model/layers.3/self_attn/q_proj/MatMul", (3,)),  # Optimum
    ("/transformer/h.11/attn/MatMul_output_0", (11,)),  # GPT-2
    ("/bert/encoder/layer.2/attention/self/MatMul", (2,)),  # BERT
    ("/layer2/layer2.1/conv1/Conv", (2, 1)),  # torchvision's ResNet: stage 2, block 1
    ("/layer2/layer2.1/downsample/downsample.0/Conv", (2, 1)),  # a numbered part inside a block
    ("/stages/stages.1/blocks/blocks.0/conv_dw/Conv", (1, 0)),  # timm's ConvNeXt
    ("/stages/stages.1/downsample/downsample.1/Conv", (1,)),  # the stage's own, before its blocks
    ("/features/features.3/features.3.0/block/Conv", (3, 0)),  # the same block named again, deeper
    ("/blocks/blocks.2/blocks.2.1/conv_pw/Conv", (2, 1)),  # timm's EfficientNet
    ("/conv1/Conv", None), ("/layer1/Add", None), ("model.layers.3.mlp.weight", None),
])
def test_a_layer_is_read_from_the_exporters_numbered_blocks(name, key):
    assert layer_key(name) == key


def test_a_cnn_pipeline_is_cut_where_its_blocks_start(tmp_path):
    """torchvision's ResNet names its blocks `layerS.B`: the cuts fall where
    a block starts, and each stage says its blocks."""
    resnet = model_path("gpt2").parent / "cnn_resnet18.onnx"
    partition, _ = split_model(resnet, tmp_path / "p", stages=3)
    assert partition.cut is not None and partition.cut.how == "where a layer starts"
    assert [s.layers for s in partition.cut.stages] == ["", "1.0-4.0", "4.1-4.1"]


class _Recorder:
    """One process of an MPI job, noting what it sends and receives."""

    def __init__(self, rank: int, size: int, inbox: dict):
        self.rank, self.size, self.inbox, self.log = rank, size, inbox, []

    def send(self, value, to):
        self.log.append(("send", to))
        self.inbox.setdefault((self.rank, to), []).append(value)

    def receive(self, source):
        self.log.append(("receive", source))
        return self.inbox[(source, self.rank)].pop(0)


def test_each_stage_sends_what_a_later_stage_reads_to_the_same_device_of_it(monkeypatch, tmp_path):
    """3 stages of 2 devices: stage 0 makes a (read by stage 1) and b (read
    by stage 2), stage 1 makes c (read by stage 2). Device d of a stage
    sends to device d of each reader and to no one else; the processes
    run in rank order, so every receive finds its send."""
    from forge_opt.plan.folder import SplitGraph
    from forge_opt.plan.graph_infos import Graph, TensorInfo, pipeline_sends
    from forge_opt.split import runner

    graphs = [Graph(["x"], ["a", "b"], "tt", "g0.onnx", stage=0), Graph(["a"], ["c"], "tt", "g1.onnx", stage=1),
              Graph(["b", "c"], ["y"], "tt", "g2.onnx", stage=2)]
    tensors = {x: TensorInfo([1], "float32", "input" if x == "x" else "intermediate") for x in "xabcy"}
    plan = Plan(graphs, tensors, parallel=2)
    plan.sends = pipeline_sends(graphs)
    made = {"a": 10.0, "b": 20.0, "c": 30.0, "y": 40.0}
    monkeypatch.setattr(runner, "_device_outputs", lambda g, *_: [np.float32(made[x]) for x in g.outputs])
    inbox: dict = {}
    held = {}
    for rank in range(6):
        member, values = _Recorder(rank, 6, inbox), {"x": np.float32(1)}
        how = runner._How("device", member=member)  # type: ignore[arg-type]
        for n, g in enumerate(graphs):
            runner._pipeline_stage(SplitGraph(n, g, tmp_path), plan, None, values, how, how)  # type: ignore[arg-type]
        held[rank] = member.log, sorted(values)
    assert held[1] == ([("send", 3), ("send", 5)], ["a", "b", "x"])
    assert held[3] == ([("receive", 1), ("send", 5)], ["a", "c", "x"])
    assert held[4] == ([("receive", 0), ("receive", 2)], ["b", "c", "x", "y"])
    assert not any(inbox.values())  # every message sent was received


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_the_pipeline_in_the_ir_is_cut_as_forge_split_cuts_it_and_runs_as_the_model(name, tmp_path):
    """`partition-for-forge{stages=2}`: each stage function holds the nodes
    of forge-split's stage, each activation the plan sends crosses on a
    shard.send/shard.recv pair, and the module computes on the interpreters
    what the model computes."""
    from xdsl.context import Context
    from xdsl.dialects.func import FuncOp

    from forge_opt.diagnostics import node_name
    from forge_opt.dialects import shard
    from forge_opt.frontends.onnx import import_onnx
    from forge_opt.interpreters.run import run_module
    from forge_opt.transforms.partition_for_forge import STAGE_ATTR, PartitionForForgePass

    partition, plan = split_model(model_path(name), tmp_path / "p", stages=2, dims=DIMS)
    module = import_onnx(model_path(name), dims=DIMS)
    main = next(f for f in module.ops if isinstance(f, FuncOp))
    feeds = optimum_feeds(name, DIMS)
    args = [feeds[i.name] for i in onnx.load(model_path(name)).graph.input]
    want = run_module(module, args)
    PartitionForForgePass(stages=2).apply(Context(), module)
    module.verify()
    stages = [f for f in module.ops if isinstance(f, FuncOp) and STAGE_ATTR in f.attributes]
    for func, sub in zip(stages, partition.graphs, strict=True):
        in_ir = {node_name(o) for o in func.body.block.ops} - {None}
        assert {n.name for n in sub.nodes} <= in_ir  # and the constants the stage copies
    sends = [o for o in main.body.block.ops if isinstance(o, shard.SendOp)]
    assert len(sends) == sum(len(s.to) for s in plan.sends) > 0
    got = run_module(module, args)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_stages_on_xla_equal_the_one_stage_program_on_xla_bit_for_bit():
    """XLA as the second executor: each stage's StableHLO form run on XLA
    CPU, and the one-stage program too, which it must equal exactly."""
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", DECODE), executor="xla")
    assert report.status == MATCH, report.format()
    text = report.format()
    assert "executed by XLA CPU" in text and "each stage, and the one-stage program" in text
    assert "every output of the 2 stages equals the one-stage program's, bit for bit" in text


def test_forge_check_runs_the_stages_on_xla_and_refuses_several_devices_a_stage(capsys):
    model = str(model_path("llama"))
    dims = [x for k, v in DIMS.items() for x in ("--dim", f"{k}={v}")]
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "2", "--executor", "xla", *dims])
    assert done.value.code == MATCH
    assert "each stage, and the one-stage program" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "2", "--devices", "2", "--executor", "xla", *dims])
    assert done.value.code == NOT_COMPILED
    assert "--stages --executor xla runs each stage on one XLA device" in capsys.readouterr().err


def test_the_first_stage_tt_mlir_refuses_is_named(monkeypatch):
    """tt-mlir compiles each stage's program; a refusal names the stage
    and what tt-mlir said (its compiler replaced here by one that refuses
    the second program it is given)."""
    from forge_opt.execution import tt_mlir

    given = []

    def refuse_the_second(text, folder):
        given.append(text)
        return tt_mlir.TTMLIRResult(len(given) < 2, "" if len(given) < 2 else "error: no rule for it")

    monkeypatch.setattr(tt_mlir, "compile_stablehlo", refuse_the_second)
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", DECODE), tt_mlir=True)
    assert report.status == MATCH  # a compile check says what tt-mlir did; the verdict is the outputs'
    assert "mock Blackhole p150): stage 1 did not compile: error: no rule for it" in report.format()
    assert len(given) == 2 and all("stablehlo" in text for text in given)


@pytest.mark.slow
def test_each_stage_on_a_mesh_compiles_with_tt_mlir():
    from forge_opt.execution import tt_mlir

    if not tt_mlir.available():
        pytest.skip("jax-tt-plugin (the tenstorrent extra) is not installed")
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", DECODE), mesh="2x2", tt_mlir=True)
    assert report.status == MATCH, report.format()
    assert "tt-mlir (jax-tt-plugin 0.1.3, mock Blackhole p150 2x2 mesh): each of the 2 stages compiled to TTNN" in \
        report.format()
