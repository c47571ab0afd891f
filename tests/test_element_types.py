"""Element types numpy lacks, held by ml_dtypes: a bfloat16 model compiles
to Float16_b parameters and matches at bfloat16's resolution; float8 and
int4 values, which Forge has no DataFormat for, get a diagnostic naming the
type and run on the CPU through the split path."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from model_helpers import make_model, value_info
from onnx import TensorProto, helper, numpy_helper

from forge_opt import check_model
from forge_opt.check.compare import compare_output
from forge_opt.check.report import MATCH, NOT_COMPILED
from forge_opt.check.split import check_fallback
from forge_opt.interpreters.forge_standin import load_forge_module, standin_modules

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(0)


def bf16_block():
    """A transformer-style MLP block in bfloat16 throughout: weights,
    activations and the constants of its GELU."""
    w1 = (RNG.standard_normal((16, 32)) * 0.25).astype(BF16)
    w2 = (RNG.standard_normal((32, 16)) * 0.25).astype(BF16)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Div", ["hb", "sqrt2"], ["s"]),
        helper.make_node("Erf", ["s"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["hb", "e1"], ["g2"]),
        helper.make_node("Mul", ["g2", "half"], ["g"]),
        helper.make_node("MatMul", ["g", "w2"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    inits = [
        numpy_helper.from_array(w1, "w1"),
        numpy_helper.from_array(w2, "w2"),
        numpy_helper.from_array(RNG.standard_normal(32).astype(BF16), "b1"),
        numpy_helper.from_array(np.ones(16, BF16), "gamma"),
        numpy_helper.from_array(np.zeros(16, BF16), "beta"),
        numpy_helper.from_array(np.array(np.sqrt(2.0), BF16), "sqrt2"),
        numpy_helper.from_array(np.array(1.0, BF16), "one"),
        numpy_helper.from_array(np.array(0.5, BF16), "half"),
    ]
    return make_model(
        nodes, [value_info("x", [4, 16], TensorProto.BFLOAT16)], [value_info("y", [4, 16], TensorProto.BFLOAT16)],
        inits,
    )


def test_a_bfloat16_model_matches_with_float16_b_parameters():
    x = RNG.standard_normal((4, 16)).astype(BF16)
    report = check_model(bf16_block(), {"x": x})
    assert report.status == MATCH, report.format()
    assert report.forge_python.count("dev_data_format=forge.DataFormat.Float16_b") == 5  # w1, w2, b1, gamma, beta
    assert "Float32" not in report.forge_python


def test_bfloat16_weights_reach_torch_as_torch_reads_them():
    """torch.from_numpy cannot read ml_dtypes' arrays (the stand-in's
    refuses them as torch does): the module loads them through float32."""
    with standin_modules():
        import sys

        torch = sys.modules["torch"]  # the stand-in's
        with pytest.raises(TypeError, match=r"numpy\.void"):
            torch.from_numpy(np.zeros(2, BF16))
    source = check_model(bf16_block()).forge_python
    assert ".astype(np.float32)).to(torch.bfloat16)" in source
    load_forge_module(source)  # it runs against the stand-in as written


def test_bfloat16_outputs_compare_at_bfloat16_resolution():
    want = np.array([1.0, 2.0, 3.0], BF16)
    one_ulp = np.array([1.0078125, 2.0, 3.0], BF16)
    assert compare_output("y", want, one_ulp, rtol=1e-4, atol=1e-4).ok
    far = np.array([1.0625, 2.0, 3.0], BF16)  # 8 units in the last place
    assert not compare_output("y", want, far, rtol=1e-4, atol=1e-4).ok
    # float32 keeps the tolerances it is given
    assert not compare_output("y", want.astype(np.float32), one_ulp.astype(np.float32), rtol=1e-4, atol=1e-4).ok


@pytest.mark.parametrize(
    ("elem", "name"), [(TensorProto.FLOAT8E4M3FN, "float8_e4m3fn"), (TensorProto.INT4, "int4")]
)
def test_types_forge_cannot_hold_are_named_and_run_on_the_cpu(elem, name):
    model = make_model(
        [helper.make_node("Cast", ["x"], ["q"], to=elem), helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT)],
        [value_info("x", [2, 3])],
        [value_info("y", [2, 3])],
        opset=21,  # Cast to float8 from opset 19, to int4 from 21: at an older opset the model is invalid
    )
    x = np.array([[0.5, -1.0, 2.0], [3.0, -4.0, 7.0]], np.float32)
    report = check_model(model, {"x": x})
    assert report.status == NOT_COMPILED
    assert name in report.error and "Forge" in report.error
    fallback = check_fallback(model, {"x": x})
    assert fallback.status == MATCH, fallback.format()


def test_computed_bfloat16_constants_travel_as_float32():
    """A constant the compiler computes (here c + c) is saved as float32,
    numpy's files having no bfloat16, and held as bfloat16 in Forge."""
    c = RNG.standard_normal((4, 3)).astype(BF16)
    model = make_model(
        [helper.make_node("Add", ["c", "c"], ["cc"]), helper.make_node("Mul", ["x", "cc"], ["y"])],
        [value_info("x", [4, 3], TensorProto.BFLOAT16)],
        [value_info("y", [4, 3], TensorProto.BFLOAT16)],
        [numpy_helper.from_array(c, "c")],
    )
    report = check_model(model, {"x": RNG.standard_normal((4, 3)).astype(BF16)})
    assert report.status == MATCH, report.format()
    assert "NARROW = {" in report.forge_python and ": torch.bfloat16}" in report.forge_python
