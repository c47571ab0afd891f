"""Micro-batches through a pipeline (`--micro-batches M`): the stages
compiled for 1/M of the batch, the batch run through them in M parts along
axis 0 and the outputs joined; checked against onnxruntime on the whole
batch, bit for bit against the one-stage program on the same parts, and
under MPI, where the stages work on different parts at once."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from test_llm_decoders import model_path, optimum_feeds
from test_tensor_parallel import needs_mpiexec

from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.check.stages import check_stages
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.api import convert, run_split, split_model
from forge_opt.split.micro_batches import cut_inputs, join_outputs, micro_shapes
from forge_opt.tools import forge_check, forge_split

PART = {"batch_size": 2, "sequence_length": 4, "past_sequence_length": 3}
WHOLE = {**PART, "batch_size": 8}


@pytest.fixture(scope="module")
def two_stages(tmp_path_factory):
    """Llama in 2 stages for a batch of 2."""
    folder = tmp_path_factory.mktemp("micro") / "s"
    split_model(model_path("llama"), folder, stages=2, dims=PART)
    convert(folder)
    return folder


def test_four_parts_equal_the_four_runs_joined(two_stages):
    feeds = optimum_feeds("llama", WHOLE)
    got = run_split(two_stages, feeds, micro_batches=4)
    runs = [run_split(two_stages, {k: v[2 * i:2 * i + 2] for k, v in feeds.items()}) for i in range(4)]
    assert got.keys() == runs[0].keys()
    for name, value in got.items():
        assert value.shape[0] == 8
        assert np.array_equal(value, np.concatenate([r[name] for r in runs]))


@pytest.mark.parametrize("mpi", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_micro_batches_match_onnxruntime_and_the_one_stage_program_bit_for_bit(mpi):
    if mpi:
        needs_mpiexec()
    feeds = optimum_feeds("llama", {**PART, "batch_size": 4})
    report = check_stages(model_path("llama"), 2, feeds, micro_batches=2, mpi=mpi)
    assert report.status == MATCH, report.format()
    assert "2 micro-batches of 2 through the stages, their outputs joined (a batch of 4)" in report.summary
    assert "            2      3   33.3%" in report.summary  # the run's own row of the schedule
    assert "every output of the 2 stages equals the one-stage program's, bit for bit" in report.format()
    if mpi:
        assert "under MPI: 2 processes, each returning the outputs of the run in this process" in report.summary


def test_an_input_that_is_not_m_parts_of_the_splits_is_named(two_stages):
    feeds = optimum_feeds("llama", {**PART, "batch_size": 6})
    with pytest.raises(ForgeOptError, match=r"input 'input_ids' has shape \[6, 4\]: 4 micro-batches of the split's "
                                            r"\[2, 4\] take \[8, 4\] \(cut along axis 0\)"):
        run_split(two_stages, feeds, micro_batches=4)


def test_a_batch_the_parts_do_not_divide_is_refused():
    report = check_stages(model_path("llama"), 2, optimum_feeds("llama", {**PART, "batch_size": 3}), micro_batches=2)
    assert report.status == NOT_COMPILED
    assert "--micro-batches 2: input 'input_ids' of shape [3, 4] has no batch axis that 2 divides (axis 0)" in \
        report.format()


def test_a_model_whose_batch_is_fixed_is_refused(tmp_path):
    model = onnx.load(model_path("llama"))
    for v in model.graph.input:
        batch = v.type.tensor_type.shape.dim[0]
        if batch.dim_param == "batch_size":
            batch.Clear()
            batch.dim_value = 4
    onnx.save(model, tmp_path / "fixed.onnx")
    report = check_stages(tmp_path / "fixed.onnx", 2, optimum_feeds("llama", {**PART, "batch_size": 4}),
                          micro_batches=2)
    assert report.status == NOT_COMPILED
    assert "--micro-batches 2: the model's input 'input_ids' has a fixed batch of 4 (axis 0), and the stages are " \
           "compiled for 2: export it with a symbolic batch" in report.format()


def test_a_split_keeping_a_static_cache_and_a_tensor_parallel_plan_take_one_batch(tmp_path):
    split_model(model_path("llama"), tmp_path / "c", stages=2, dims={**PART, "past_sequence_length": 12},
                static_cache=12)
    with pytest.raises(ForgeOptError, match="a split that keeps a static KV cache runs one batch at a time"):
        run_split(tmp_path / "c", optimum_feeds("llama", WHOLE), micro_batches=4)


def test_parts_and_joins_along_axis_0():
    assert micro_shapes({"x": [8, 3]}, 4) == {"x": (2, 3)}
    parts = cut_inputs({"x": [2, 3]}, {"x": np.arange(24).reshape(8, 3), "unread": np.zeros(1)}, 4)
    assert [p["x"][0, 0] for p in parts] == [0, 6, 12, 18] and all(p.keys() == {"x"} for p in parts)
    assert join_outputs(parts)["x"].tolist() == np.arange(24).reshape(8, 3).tolist()
    with pytest.raises(ForgeOptError, match="output 'loss' is a scalar"):
        join_outputs([{"loss": np.array(1, np.float32)}])
    with pytest.raises(ForgeOptError, match=r"input 's' of shape \[\] has no batch axis"):
        micro_shapes({"s": []}, 2)


def test_forge_check_and_forge_split_run_take_micro_batches(two_stages, tmp_path, capsys):
    model = str(model_path("gpt2"))
    dims = [a for k, v in {**PART, "batch_size": 4}.items() for a in ("--dim", f"{k}={v}")]
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--stages", "2", "--micro-batches", "2", *dims])
    assert done.value.code == MATCH, capsys.readouterr()
    assert "2 micro-batches of 2 through the stages" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        forge_check.main([model, "--micro-batches", "2", *dims])
    assert done.value.code == NOT_COMPILED
    assert "--micro-batches does not combine with" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        forge_split.main(["run", str(two_stages), "--micro-batches", "4", "--check"])
    assert done.value.code == MATCH
    out = capsys.readouterr().out
    assert "logits" in out and "match" in out
    with pytest.raises(SystemExit) as done:
        forge_split.main(["run", str(two_stages), "--micro-batches", "0"])
    assert done.value.code == NOT_COMPILED
    assert "--micro-batches 0: give 1 or more" in capsys.readouterr().err
