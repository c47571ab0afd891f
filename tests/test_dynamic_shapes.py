"""Models as exported: symbolic input dims made static by the user's sizes,
shapes that are static only after folding, and If/Loop/sequence ops
resolved at compile time (issue #16)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_helpers import assert_matches, make_model
from model_helpers import value_info as _vi
from onnx import TensorProto, helper, numpy_helper

from forge_opt import check_model, compile_onnx, import_onnx
from forge_opt.check import NOT_COMPILED
from forge_opt.diagnostics import ForgeOptError
from forge_opt.frontends.onnx.shapes import InputShapes
from forge_opt.frontends.onnx.unroll import MAX_UNROLLED_NODES

MODELS = Path(__file__).parent / "data" / "models"


def _i64(name, values):
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


# -- symbolic input dims ------------------------------------------------------------


def _embedding(opset=18):
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    return make_model(
        [helper.make_node("Gather", ["table", "ids"], ["e"], name="emb"),
         helper.make_node("Add", ["e", "x"], ["y"], name="add")],
        [_vi("ids", ["batch", "sequence"], TensorProto.INT64), _vi("x", ["batch", None, 4])],
        [_vi("y", ["batch", "sequence", 4])],
        [table],
    )


def test_unknown_dims_print_as_mlir_question_marks_with_their_symbols():
    text = str(import_onnx(_embedding()))
    assert "%ids: tensor<?x?xi64> {onnx.name = \"ids\", onnx.dims = [\"batch\", \"sequence\"]}" in text
    assert "tensor<?x?x4xf32>" in text
    assert "-1" not in text


def test_the_diagnostic_lists_every_symbolic_input_dim_and_the_flags():
    with pytest.raises(ForgeOptError) as e:
        compile_onnx(_embedding())
    message = str(e.value)
    assert "'ids' [batch, sequence]; 'x' [batch, ?, 4]" in message
    assert "--dim batch=N --dim sequence=N --shape x=D0,D1,..." in message


def test_dims_and_shapes_make_the_model_static():
    module = compile_onnx(_embedding(), dims={"batch": 2, "sequence": 3}, shapes={"x": (2, 3, 4)})
    assert "?" not in str(module)
    assert_matches(_embedding(), dims={"batch": 2, "sequence": 3}, shapes={"x": (2, 3, 4)})


def test_given_inputs_fix_the_shapes():
    rng = np.random.default_rng(0)
    inputs = {"ids": rng.integers(0, 10, (2, 5)), "x": rng.standard_normal((2, 5, 4)).astype(np.float32)}
    assert_matches(_embedding(), inputs=inputs)


@pytest.mark.parametrize(
    ("shapes", "dims", "message"),
    [
        ({"z": (1,)}, {}, "the graph has no input 'z' (its inputs: ids, x)"),
        ({"x": (2, 3)}, {}, "the input has rank 3, not 2"),
        ({"x": (2, 3, 5)}, {}, "dim 2 of the input is 4, not 5"),
        ({}, {"bat": 2}, "no input dimension is named 'bat' (the symbols: batch, sequence)"),
    ],
)
def test_sizes_that_do_not_fit_are_named(shapes, dims, message):
    with pytest.raises(ForgeOptError, match=message.replace("(", r"\(").replace(")", r"\)")):
        import_onnx(_embedding(), shapes=shapes, dims=dims)


@pytest.mark.parametrize(
    ("shapes", "dims", "message"),
    [
        (["x"], [], "--shape x: expected NAME=D0,D1,..."),
        (["x=1,a"], [], "'a' is not a size"),
        ([], ["batch=-1"], "a size cannot be negative"),
        ([], ["=3"], "expected SYMBOL=N"),
    ],
)
def test_flag_texts_that_do_not_parse_are_named(shapes, dims, message):
    with pytest.raises(ForgeOptError, match=message):
        InputShapes.parse(shapes, dims)


def test_symbolic_value_infos_take_the_chosen_sizes():
    model = _embedding()
    model.graph.value_info.append(_vi("e", ["batch", "sequence", 4]))
    module = import_onnx(model, dims={"batch": 1, "sequence": 2}, shapes={"x": (1, 2, 4)})
    assert "tensor<1x2x4xf32>" in str(module) and "?" not in str(module)


@pytest.mark.parametrize("name", ["gpt2", "bert", "vit"])
def test_exported_transformers_with_symbolic_dims(name):
    path = MODELS / f"{name}_dynamic_opset17.onnx"
    report = check_model(path)
    assert report.status == NOT_COMPILED and "--dim batch=N" in report.error
    # GPT-2's exporter bakes the traced sequence length into its position ids.
    dims = {"batch": 2} if name == "vit" else {"batch": 2, "sequence": 16}
    assert_matches(path, dims=dims)


def test_exported_bert_with_inputs_alone():
    ids = np.random.default_rng(1).integers(0, 128, (3, 7))
    assert_matches(MODELS / "bert_dynamic_opset17.onnx", inputs={"input_ids": ids})


# -- shapes known after folding --------------------------------------------------------


def _window_partition(h=5, w=7, c=3, window=4) -> onnx.ModelProto:
    """Swin's window partition: pad H and W up to a multiple of the window,
    the padding computed from Shape (Mod/Sub), then Reshape/Transpose."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "one"], ["h"], axis=0),
        n("Gather", ["s", "two"], ["w"], axis=0),
        *(n(op, ins, [out]) for op, ins, out in [
            ("Mod", ["h", "win"], "hm"), ("Sub", ["win", "hm"], "hs"), ("Mod", ["hs", "win"], "hp"),
            ("Mod", ["w", "win"], "wm"), ("Sub", ["win", "wm"], "ws"), ("Mod", ["ws", "win"], "wp"),
        ]),
        n("Concat", ["zero", "zero", "zero", "zero", "zero", "hp", "wp", "zero"], ["pads"], axis=0),
        n("Pad", ["x", "pads"], ["p"], name="pad"),
        n("Shape", ["p"], ["ps"]),
        n("Gather", ["ps", "one"], ["ph"], axis=0),
        n("Gather", ["ps", "two"], ["pw"], axis=0),
        n("Div", ["ph", "win"], ["nh"]),
        n("Div", ["pw", "win"], ["nw"]),
        n("Concat", ["one", "nh", "win", "nw", "win", "c"], ["rshape"], axis=0),
        n("Reshape", ["p", "rshape"], ["r"]),
        n("Transpose", ["r"], ["t"], perm=[0, 1, 3, 2, 4, 5]),
        n("Reshape", ["t", "flat"], ["y"]),
    ]
    consts = [_i64("win", [window]), _i64("zero", [0]), _i64("one", [1]), _i64("two", [2]), _i64("c", [c]),
              _i64("flat", [-1, window * window, c])]
    return make_model(nodes, [_vi("x", [1, h, w, c])], [_vi("y", None)], consts)


def test_padding_computed_from_shape_folds_to_static_code():
    model = _window_partition()
    module = compile_onnx(model)
    assert "?" not in str(module) and "*x" not in str(module)
    assert_matches(model)


def test_the_window_partition_with_a_symbolic_feature_map():
    model = _window_partition()
    model.graph.input[0].CopyFrom(_vi("x", [1, "height", "width", 3]))
    assert_matches(model, dims={"height": 9, "width": 6})


def test_a_range_of_sizes_folds_whole_and_its_nonzero_with_it():
    """torch's repeat_interleave by a size (SAM's mask decoder): Range over
    a size read from a shape, Less, NonZero, GatherND. Range's body (a Loop
    written for opset 11) is not expanded at opset 17; its inputs known,
    it folds whole, and with it the NonZero that would give run-time sizes."""
    n = helper.make_node
    nodes = [
        n("Shape", ["x"], ["s"]), n("Gather", ["s", "zero"], ["rows"], axis=0),
        n("Range", ["zero", "rows", "one"], ["r"], name="range"), n("Less", ["r", "one"], ["first"]),
        n("NonZero", ["first"], ["nz"], name="nz"), n("Transpose", ["nz"], ["at"], perm=[1, 0]),
        n("GatherND", ["x", "at"], ["y"], name="take"),
    ]
    consts = [numpy_helper.from_array(np.array(v, np.int64), name) for name, v in (("zero", 0), ("one", 1))]
    model = make_model(nodes, [_vi("x", [2, 3])], [_vi("y", None)], consts, opset=17)
    assert "onnx.Range" not in str(import_onnx(model))
    assert_matches(model)


def test_a_shape_only_a_run_gives_names_its_origin():
    model = make_model(
        [helper.make_node("NonZero", ["x"], ["n"], name="nz"), helper.make_node("Relu", ["n"], ["y"], name="relu")],
        [_vi("x", [2, 3])], [_vi("y", None, TensorProto.INT64)],
    )
    with pytest.raises(ForgeOptError, match=r"tensor<2x\?xi64>: dim 1 unknown.*come from node 'nz' \(onnx.NonZero\)"):
        compile_onnx(model)


def test_a_fill_larger_than_any_device_is_refused():
    model = make_model(
        [helper.make_node("ConstantOfShape", ["s"], ["y"], name="fill")],
        [_vi("x", [1])], [_vi("y", None)], [_i64("s", [1_000_000, 1_000_000, 1000])],
    )
    with pytest.raises(ForgeOptError, match=r"node 'fill' .*4,000,000,000,000,000 bytes"):
        compile_onnx(model)


@pytest.mark.parametrize("where", ["input", "output"])
def test_string_graph_values_are_named(where):
    if where == "input":  # strings in, their shape out
        model = make_model([helper.make_node("Shape", ["s"], ["y"])], [_vi("s", [2], TensorProto.STRING)],
                       [_vi("y", [1], TensorProto.INT64)])
    else:
        model = make_model([helper.make_node("Identity", ["s"], ["y"])], [_vi("s", [2], TensorProto.STRING)],
                       [_vi("y", [2], TensorProto.STRING)])
    with pytest.raises(ForgeOptError, match=f"graph {where} '{'s' if where == 'input' else 'y'}' holds strings"):
        compile_onnx(model)


# -- control flow and sequences ---------------------------------------------------------


def _branch(name, op, value):
    return helper.make_graph(
        [helper.make_node(op, ["x", "k"], [f"{name}_out"])], name, [], [_vi(f"{name}_out", [2, 3])],
        [numpy_helper.from_array(np.array(value, np.float32), "k")],
    )


@pytest.mark.parametrize("take", [True, False])
def test_if_with_a_known_condition_is_its_taken_branch(take):
    model = make_model(
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(take))),
         helper.make_node("If", ["c"], ["y"], name="choose",
                          then_branch=_branch("then", "Add", 1.0), else_branch=_branch("else", "Mul", 3.0))],
        [_vi("x", [2, 3])], [_vi("y", [2, 3])],
    )
    text = str(import_onnx(model))
    assert "onnx.If" not in text and ("onnx.Add" in text) == take
    assert_matches(model)


def _loop_body(scan=True):
    """y = y * 2 + i, scanning y each time: carried and scan outputs."""
    n = helper.make_node
    nodes = [
        n("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
        n("Mul", ["y_in", "two"], ["doubled"]),
        n("Add", ["doubled", "fi"], ["y_out"]),
        n("Identity", ["cond_in"], ["cond_out"]),
    ]
    outputs = [_vi("cond_out", [], TensorProto.BOOL), _vi("y_out", [2, 3])] + ([_vi("scan", [2, 3])] if scan else [])
    if scan:
        nodes.append(n("Identity", ["y_out"], ["scan"]))
    return helper.make_graph(
        nodes, "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("y_in", [2, 3])],
        outputs, [numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )


def test_a_loop_with_a_known_trip_count_is_unrolled():
    model = make_model(
        [helper.make_node("Loop", ["trips", "cond", "x"], ["y", "ys"], name="repeat", body=_loop_body())],
        [_vi("x", [2, 3])], [_vi("y", [2, 3]), _vi("ys", [4, 2, 3])],
        [_i64("trips", 4), numpy_helper.from_array(np.array(True), "cond")],
    )
    text = str(import_onnx(model))
    assert "onnx.Loop" not in text and text.count("onnx.Mul") == 4
    assert_matches(model)


def test_a_loop_that_stops_on_computed_values_stays_and_is_named():
    body = _loop_body(scan=False)
    body.node[3].CopyFrom(helper.make_node("ReduceMax", ["y_out"], ["cond_any"], keepdims=0))
    body.node.append(helper.make_node("Less", ["cond_any", "two"], ["cond_out"]))
    model = make_model(
        [helper.make_node("Loop", ["trips", "cond", "x"], ["y"], name="until", body=body)],
        [_vi("x", [2, 3])], [_vi("y", [2, 3])],
        [_i64("trips", 4), numpy_helper.from_array(np.array(True), "cond")],
    )
    with pytest.raises(ForgeOptError, match=r"node 'until' \(onnx.Loop\)"):
        compile_onnx(model)


def test_unrolling_past_the_limit_is_an_error_naming_the_loop():
    trips = MAX_UNROLLED_NODES // 4 + 1
    model = make_model(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], name="long", body=_loop_body(scan=False))],
        [_vi("x", [2, 3])], [_vi("y", [2, 3])], [_i64("trips", trips)],
    )
    with pytest.raises(ForgeOptError, match=f"node 'long' \\(Loop\\): unrolling {trips} iterations"):
        import_onnx(model)


@pytest.mark.parametrize(("axes", "reverse"), [((0, 0), (0, 0)), ((1, 0), (1, 0)), ((0, 1), (0, 1))])
def test_a_scan_over_a_known_length_is_unrolled(axes, reverse):
    """A running sum over x's rows (scan axis `axes[0]`, read backwards with
    `reverse[0]`), each step's sum scanned out on axis `axes[1]`."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "row"], ["sum_out"]),
         helper.make_node("Mul", ["sum_out", "row"], ["scanned"])],
        "body", [_vi("sum_in", [3]), _vi("row", [3])], [_vi("sum_out", [3]), _vi("scanned", [3])],
    )
    shape = [4, 3] if axes[0] == 0 else [3, 4]
    scan = helper.make_node(
        "Scan", ["init", "x"], ["total", "steps"], name="running", body=body, num_scan_inputs=1,
        scan_input_axes=[axes[0]], scan_input_directions=[reverse[0]],
        scan_output_axes=[axes[1]], scan_output_directions=[reverse[1]],
    )
    model = make_model([scan], [_vi("init", [3]), _vi("x", shape)], [_vi("total", [3]), _vi("steps", None)])
    assert "onnx.Scan" not in str(import_onnx(model))
    assert_matches(model)


def test_sequence_ops_of_known_length_become_their_tensors():
    n = helper.make_node
    model = make_model(
        [
            n("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
            n("SequenceErase", ["parts", "zero"], ["rest"]),
            n("SequenceInsert", ["rest", "x_head", "zero"], ["again"]),
            n("Slice", ["x", "zero1", "one1", "one1"], ["x_head"]),
            n("SequenceLength", ["again"], ["count"]),
            n("SequenceAt", ["again", "minus_one"], ["last"]),
            n("ConcatFromSequence", ["again"], ["joined"], axis=1),
            n("SequenceConstruct", ["last", "last"], ["pair"]),
            n("ConcatFromSequence", ["pair"], ["stacked"], axis=0, new_axis=1),
            n("Cast", ["count"], ["fcount"], to=TensorProto.FLOAT),
            n("Mul", ["joined", "fcount"], ["y"]),
        ],
        [_vi("x", [2, 6])], [_vi("y", None), _vi("stacked", None)],
        [_i64("sizes", [1, 2, 3]), _i64("zero", 0), _i64("zero1", [0]), _i64("one1", [1]), _i64("minus_one", -1)],
    )
    text = str(import_onnx(model))
    assert "onnx.Sequence" not in text and "onnx.SplitToSequence" not in text and "onnx.ConcatFrom" not in text
    assert_matches(model)


@pytest.mark.parametrize(("op", "position"), [*(("SequenceInsert", p) for p in (-3, -1, 0, 2, 3, None)),
                                              *(("SequenceErase", p) for p in (-3, -1, 0, 2, None))])
def test_sequence_positions_count_from_the_back_when_negative(op, position):
    n = helper.make_node
    given = [] if position is None else ["at"]
    edit = n(op, ["parts", "extra", *given] if op == "SequenceInsert" else ["parts", *given], ["edited"])
    model = make_model(
        [n("SplitToSequence", ["x", "sizes"], ["parts"], axis=1), n("Neg", ["x"], ["extra"]), edit,
         n("ConcatFromSequence", ["edited"], ["y"], axis=1)],
        [_vi("x", [2, 3])], [_vi("y", None)],
        [_i64("sizes", [1, 1, 1])] + ([] if position is None else [_i64("at", position)]),
    )
    assert "onnx.Sequence" not in str(import_onnx(model))
    assert_matches(model)


def test_a_sequence_graph_output_is_named():
    model = make_model(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["s"])],
        [_vi("x", [2])], [helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(ForgeOptError, match="graph output 's' is a sequence or optional"):
        compile_onnx(model)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("width", [9, 10])
def test_torchscript_tensor_split_chunk_unbind(opset, width):
    """The exporter's SplitToSequence/SequenceAt and Loop over SequenceInsert."""
    path = MODELS / f"splits_opset{opset}.onnx"
    ops = {node.op_type for node in onnx.load(path).graph.node}
    assert {"Loop", "SequenceInsert"} <= ops | {
        n.op_type for node in onnx.load(path).graph.node for a in node.attribute if a.g for n in a.g.node
    }
    assert_matches(path, dims={"width": width})


def test_a_split_whose_output_folds_away(tmp_path):
    """A sum over an empty tensor folds away at import: the split still gives
    the output (made by a folded Constant in a CPU sub-model)."""
    from forge_opt.split.api import convert, run_split, split_model

    node = helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0, name="sum")
    model = make_model([node], [_vi("x", [0, 3])], [_vi("y", [3])], [_i64("axes", [0])])
    split_model(model, tmp_path / "split")
    convert(tmp_path / "split")
    got = run_split(tmp_path / "split", {"x": np.zeros((0, 3), np.float32)})
    np.testing.assert_array_equal(got["y"], [0, 0, 0])


def test_the_size_flags_as_a_user_runs_them(tmp_path, capsys):
    """forge-split and forge-check take --dim/--shape; a symbol the model
    lacks and a shape that contradicts it are errors, exit 2."""
    from forge_opt.tools.forge_check import main as forge_check
    from forge_opt.tools.forge_split import main as forge_split

    path = tmp_path / "embedding.onnx"
    onnx.save(_embedding(), path)

    def run(tool, *argv) -> int:
        with pytest.raises(SystemExit) as done:
            tool([str(a) for a in argv])
        return int(done.value.code or 0)

    sizes = ["--dim", "batch=2", "--dim", "sequence=3", "--shape", "x=2,3,4"]
    assert run(forge_check, path, *sizes) == 0
    assert capsys.readouterr().out.strip().endswith("match")
    assert run(forge_check, path) == 2
    assert "choose them with --dim batch=N --dim sequence=N --shape x=D0,D1,..." in capsys.readouterr().err
    assert run(forge_check, path, "--dim", "bat=2") == 2
    assert "--dim bat=…: no input dimension is named 'bat'" in capsys.readouterr().err
    assert run(forge_split, path, "-o", tmp_path / "split", *sizes) == 0
    infos = json.loads((tmp_path / "split" / "graph_infos.json").read_text())
    assert infos["tensors"]["ids"]["shape"] == [2, 3] and not infos["dynamic"]
    capsys.readouterr()
    assert run(forge_split, path, "-o", tmp_path / "other", "--shape", "x=2,3,5") == 2
    assert "--shape x=2,3,5: dim 2 of the input is 4, not 5" in capsys.readouterr().err
