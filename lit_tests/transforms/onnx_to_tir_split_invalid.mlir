// RUN: not forge-opt %s -p onnx-to-tir 2>&1 | filecheck %s
// A `split` operand that is not a constant cannot become static sections.

func.func @dynamic_sections(%x: tensor<10xf32>, %s: tensor<2xi64>) -> (tensor<5xf32>, tensor<5xf32>) {
  %a, %b = onnx.Split(%x, %s) : (tensor<10xf32>, tensor<2xi64>) -> (tensor<5xf32>, tensor<5xf32>) loc("split1")
  func.return %a, %b : tensor<5xf32>, tensor<5xf32>
}
// CHECK: forge-opt: error: node 'split1' (onnx.Split): the 'split' input must be a compile-time constant
