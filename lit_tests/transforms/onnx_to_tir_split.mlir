// RUN: forge-opt %s -p onnx-to-tir --split-input-file | filecheck %s

// Explicit sections from a constant `split` operand.
// CHECK-LABEL: func.func @constant_sections
func.func @constant_sections(%x: tensor<10x4xf32>) -> (tensor<2x4xf32>, tensor<8x4xf32>) {
  %s = onnx.Constant() {value = dense<[2, 8]> : tensor<2xi64>} : () -> tensor<2xi64>
  %a, %b = onnx.Split(%x, %s) : (tensor<10x4xf32>, tensor<2xi64>) -> (tensor<2x4xf32>, tensor<8x4xf32>)
  func.return %a, %b : tensor<2x4xf32>, tensor<8x4xf32>
}
// CHECK-NEXT: %a, %b = tir.split %x axis 0 sections [2, 8] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<8x4xf32>
// CHECK-NEXT: func.return %a, %b

// -----

// Equal parts when there is neither `split` nor `num_outputs`; the axis is normalised.
// CHECK-LABEL: func.func @equal_parts
func.func @equal_parts(%x: tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
  %a, %b, %c = onnx.Split(%x) {axis = -1 : i64} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>)
  func.return %a, %b, %c : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}
// CHECK-NEXT: %a, %b, %c = tir.split %x axis 1 sections [2, 2, 2] : tensor<4x6xf32> -> tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>

// -----

// `num_outputs` (opset 18): parts of ceil(7 / 3) = 3, the last one smaller.
// CHECK-LABEL: func.func @num_outputs
func.func @num_outputs(%x: tensor<7xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<1xf32>) {
  %a, %b, %c = onnx.Split(%x) {num_outputs = 3 : i64} : (tensor<7xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<1xf32>)
  func.return %a, %b, %c : tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
}
// CHECK-NEXT: %a, %b, %c = tir.split %x axis 0 sections [3, 3, 1] : tensor<7xf32> -> tensor<3xf32>, tensor<3xf32>, tensor<1xf32>
