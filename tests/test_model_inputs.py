"""What a model's inputs are, as exporters write them: Paddle's `-1` for an
unknown size, an input also listed in `value_info`, symbolic sizes a split
must be told, and integer inputs that index small tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import make_model, value_info
from onnx import TensorProto, helper, numpy_helper

from forge_opt.check import MATCH, check_model
from forge_opt.diagnostics import ForgeOptError
from forge_opt.split.api import split_model

MODELS = Path(__file__).parent / "data" / "models"


def _paddle_style():
    """A Relu and a MatMul whose input's batch size is written `dim_value: -1`."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32), "w")
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["y"])]
    model = make_model(nodes, [value_info("x", [-1, 3])], [value_info("y", [-1, 4])], [w])
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -1
    return model


def test_a_size_of_minus_one_is_unknown_and_the_users_to_choose(tmp_path, capsys):
    from forge_opt.tools.forge_check import main

    model = _paddle_style()
    assert check_model(model, shapes={"x": (2, 3)}).status == MATCH
    x = np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32)
    assert check_model(model, {"x": x}).status == MATCH
    report = check_model(model)
    assert "'x' [?, 3]" in report.error and "--shape x=D0,D1,..." in report.error
    path = tmp_path / "paddle.onnx"
    onnx.save(model, path)
    with pytest.raises(SystemExit) as done:
        main([str(path), "--shape", "x=1,3"])
    assert done.value.code == 0 and capsys.readouterr().out.strip().endswith("match")


def test_an_input_listed_in_value_info_takes_the_users_sizes():
    """Some exporters list graph inputs in value_info too, with their
    symbolic sizes: the user's --shape and --inputs decide all the same."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [value_info("x", ["n", 3])],
                       [value_info("y", ["n", 3])])
    model.graph.value_info.append(value_info("x", ["n", 3]))
    assert check_model(model, shapes={"x": (2, 3)}).status == MATCH
    assert check_model(model, dims={"n": 4}).status == MATCH
    x = np.ones((6, 3), np.float32)
    assert check_model(model, {"x": x}).status == MATCH


def test_a_split_of_unknown_sizes_asks_for_them(tmp_path):
    """Without --dim a split would place every MatMul on the CPU and still
    run: it is refused with the flags that fix the sizes, as forge-opt does."""
    with pytest.raises(ForgeOptError, match=r"'input_ids' \[batch, sequence\]; choose them with --dim batch=N"):
        split_model(MODELS / "gpt2_dynamic_opset17.onnx", tmp_path / "split")
    _, plan = split_model(MODELS / "gpt2_dynamic_opset17.onnx", tmp_path / "split",
                           dims={"batch": 1, "sequence": 16})
    assert [g.device for g in plan.graphs] == ["tt"]
    with pytest.raises(ForgeOptError, match=r"'x' \[\?, 3\]"):
        split_model(_paddle_style(), tmp_path / "paddle")
    _, plan = split_model(_paddle_style(), tmp_path / "paddle", shapes={"x": (2, 3)})
    assert plan.tensors["x"].shape == [2, 3]


def _with_token_types():
    """BERT's embeddings: words from a 30-row table, token types from a 2-row one."""
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"]),
        helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.INT64),
        helper.make_node("Gather", ["type_table", "types"], ["t"]),
        helper.make_node("Add", ["w", "t"], ["y"]),
    ]
    tables = [numpy_helper.from_array(rng.standard_normal((30, 4)).astype(np.float32), "words"),
              numpy_helper.from_array(rng.standard_normal((2, 4)).astype(np.float32), "type_table")]
    return make_model(nodes, [value_info("input_ids", [1, 6], TensorProto.INT64),
                              value_info("token_type_ids", [1, 6], TensorProto.INT32)],
                      [value_info("y", [1, 6, 4])], tables)


@pytest.mark.parametrize("fallback", [False, True])
def test_random_indices_stay_inside_the_tables_they_index(fallback):
    from forge_opt.check.split import check_fallback

    report = (check_fallback if fallback else check_model)(_with_token_types())
    assert report.status == MATCH, report.format() + report.error
    assert "integer inputs that index a table stay inside it (token_type_ids < 2)" in report.format()


def test_indices_outside_their_table_are_named_not_raised(tmp_path, capsys):
    """The user's own out-of-range indices: forge-check (whole or through the
    split) reports what the oracle says, and forge-split run names the
    sub-model whose module failed; never a raw IndexError."""
    from forge_opt.check.split import check_fallback
    from forge_opt.tools.forge_split import main

    model = _with_token_types()
    bad = {"input_ids": np.zeros((1, 6), np.int64), "token_type_ids": np.full((1, 6), 5, np.int32)}
    for check in (check_model, check_fallback):
        report = check(model, bad)
        assert report.status == 2 and "indices element out of data bounds, idx=5" in report.error
    path, inputs = tmp_path / "m.onnx", tmp_path / "bad.npz"
    onnx.save(model, path)
    np.savez(inputs, **bad)
    for argv in ([str(path), "-o", str(tmp_path / "split"), "--convert"],
                 ["run", str(tmp_path / "split"), "--inputs", str(inputs)]):
        with pytest.raises(SystemExit) as done:
            main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "graph_0 (tt): its Forge module failed on its inputs: IndexError" in err and "Traceback" not in err


def test_a_model_with_external_data_checks_from_any_folder(tmp_path, monkeypatch):
    """The Forge module loads its parameters from the model as `onnx.load`
    gives it, external weights read in: not from a file named relative to
    the current folder (torch's dynamo exporter writes `model.onnx.data`)."""
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [value_info("x", [2, 8])],
                       [value_info("y", [2, 8])], [numpy_helper.from_array(w, "w")])
    onnx.save(model, str(tmp_path / "m.onnx"), save_as_external_data=True, location="m.onnx.data",
              size_threshold=0)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert check_model(tmp_path / "m.onnx").status == MATCH


def _external(tmp_path, nodes, inputs, initializers) -> Path:
    model = make_model(nodes, inputs, [value_info("y", [1, 8])], initializers)
    tmp_path.mkdir()
    onnx.save(model, str(tmp_path / "model.onnx"), save_as_external_data=True, location="model.onnx_data",
              size_threshold=0)
    return tmp_path / "model.onnx"


def test_the_oracle_reads_external_data_it_was_not_handed(tmp_path, monkeypatch):
    """Issue 51, item 2: an export's external initializers that onnxruntime
    drops (one no node reads) or that a subgraph holds were handed over by
    name or not at all: onnxruntime then refused the model ("Failed to
    find existing initializer", or a data path relative to the working
    folder) and the check fell back to onnx.reference, or stopped. It now
    reads the data from the model's folder, from any working folder."""
    from forge_opt.check.split import check_fallback

    rng = np.random.default_rng(0)
    w, unused, inner = (numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), n)
                        for n in ("w", "unused", "inner"))
    plain = _external(tmp_path / "a", [helper.make_node("MatMul", ["x", "w"], ["y"])], [value_info("x", [1, 8])],
                      [w, unused])
    then = helper.make_graph([helper.make_node("MatMul", ["x", "inner"], ["t"])], "then", [],
                             [value_info("t", [1, 8])], [inner])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["e"])], "else", [], [value_info("e", [1, 8])])
    branched = _external(tmp_path / "b", [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                         [value_info("x", [1, 8]), value_info("c", [], TensorProto.BOOL)], [w])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    report = check_model(plain)
    assert report.status == MATCH and report.oracle == "onnxruntime", report.format()
    x = rng.standard_normal((1, 8)).astype(np.float32)
    report = check_fallback(str(branched), {"x": x, "c": np.array(True)})
    assert report.status == MATCH and report.oracle == "onnxruntime", report.error or report.format()


def _ppocr_classifier():
    """PP-OCR's text-direction classifier's input as paddle2onnx writes it,
    `x [-1, 3, ?, ?]`: `?` names no symbol, each is an unknown of its own."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]), helper.make_node("MatMul", ["f", "fc"], ["l"]),
             helper.make_node("Softmax", ["l"], ["y"], axis=-1)]
    weights = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((8, 2)).astype(np.float32), "fc")]
    return make_model(nodes, [value_info("x", [-1, 3, "?", "?"])], [value_info("y", [-1, 2])], weights, opset=11)


def test_an_unnamed_size_written_as_a_question_mark_is_its_own():
    """Issue 51, item 5: 'inputs 'x' and 'x' of the model give ? two sizes,
    48 and 192' for the 48x192 images onnxruntime runs."""
    x = np.random.default_rng(1).standard_normal((1, 3, 48, 192)).astype(np.float32)
    report = check_model(_ppocr_classifier(), {"x": x})
    assert report.status == MATCH, report.error or report.format()
    assert not any("takes more than one size" in n for n in report.notes)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["t5_decoder_merged", "whisper_decoder_merged"])
def test_a_merged_decoders_first_call_checks_with_an_empty_encoder_past(name):
    """Issue 51, item 5: Optimum's first call of a merged seq2seq decoder
    gives `encoder_sequence_length` 8 in the encoder's states (and mask) and
    0 in the empty past; onnxruntime runs it, and the report says so."""
    from forge_opt.check.split import check_fallback

    model = onnx.load(str(MODELS / f"{name}.onnx"), load_external_data=False)
    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        shape = [d.dim_value or (0 if i.name.startswith("past") and "sequence" in d.dim_param else
                                 8 if d.dim_param == "encoder_sequence_length" else 1)
                 for d in i.type.tensor_type.shape.dim]
        kind = i.type.tensor_type.elem_type
        feeds[i.name] = (np.zeros(shape, bool) if kind == TensorProto.BOOL else np.ones(shape, np.int64)
                         if kind == TensorProto.INT64 else rng.standard_normal(shape).astype(np.float32))
    report = check_fallback(str(MODELS / f"{name}.onnx"), feeds)
    assert report.status == MATCH, report.error or report.format()
    assert any("the symbol 'encoder_sequence_length' takes more than one size" in n for n in report.notes)
