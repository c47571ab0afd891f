"""The generated `onnx` dialect: complete, current, and round-tripping."""

import io

import onnx.defs
from xdsl.parser import Parser
from xdsl.printer import Printer

from forge_opt.api import make_context
from forge_opt.dialects.onnx import OPS_BY_TYPE
from forge_opt.tools import gen_onnx_dialect


def test_generated_file_is_current():
    assert gen_onnx_dialect.main(["--check"]) == 0, "run python -m forge_opt.tools.gen_onnx_dialect"


def test_one_op_per_default_domain_operator():
    names = {s.name for s in onnx.defs.get_all_schemas() if s.domain == ""}
    assert names == set(OPS_BY_TYPE)
    split = OPS_BY_TYPE["Split"]
    assert onnx.defs.get_schema("Split").since_version == split.ONNX_SINCE_VERSION
    assert split.ONNX_INPUTS == (("input", "single"), ("split", "optional"))
    assert split.ONNX_ATTRIBUTES == {"axis": "int", "num_outputs": "int"}


TEXT = """
func.func @f(%x: tensor<10x4xf32>, %s: tensor<2xi64>, %m: tensor<f32>)
    -> (tensor<2x4xf32>, tensor<8x4xf32>, tensor<2x4xf32>) {
  %a, %b = onnx.Split(%x, %s) {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2xi64>) -> (tensor<2x4xf32>, tensor<8x4xf32>)
  %c = onnx.Clip(%a, none, %m) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %d, %e = onnx.Dropout(%c) : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xi1>)
  func.return %a, %b, %d : tensor<2x4xf32>, tensor<8x4xf32>, tensor<2x4xf32>
}
"""


def _print(module, generic: bool) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def test_custom_and_generic_round_trip():
    ctx = make_context()
    module = Parser(ctx, TEXT).parse_module()
    module.verify()
    custom = _print(module, False)
    assert "onnx.Clip(%a, none, %m)" in custom
    generic = _print(module, True)
    assert "operandSegmentSizes = array<i32: 1, 0, 1>" in generic
    from_generic = Parser(ctx, generic).parse_module()
    assert _print(from_generic, False) == custom
    assert from_generic.is_structurally_equivalent(module)
    assert _print(Parser(ctx, custom).parse_module(), False) == custom
