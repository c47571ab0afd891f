// RUN: forge-opt %s --split-input-file | filecheck %s
// RUN: FORGE_ROUNDTRIP

// Absent optional operands print as `none` before a present one and are left out at the end.
// CHECK-LABEL: func.func @optional_operands
func.func @optional_operands(%x: tensor<3xf32>, %m: tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>) {
  // CHECK-NEXT: %a = onnx.Clip(%x, none, %m) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %a = onnx.Clip(%x, none, %m) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  // CHECK-NEXT: %b = onnx.Clip(%x, %m) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  %b = onnx.Clip(%x, %m) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  func.return %a, %b : tensor<3xf32>, tensor<3xf32>
}

// -----

// Attributes equal to the schema default are not printed; sequence types have a syntax.
// CHECK-LABEL: func.func @defaults_and_types
func.func @defaults_and_types(%x: tensor<4x6xf32>, %s: !onnx.seq<tensor<2xf32>>) -> tensor<4x6xf32> {
  // CHECK-NEXT: %y = onnx.Softmax(%x) : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %y = onnx.Softmax(%x) {axis = -1 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  // CHECK-NEXT: %z = onnx.Softmax(%y) {axis = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %z = onnx.Softmax(%y) {axis = 0 : i64} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  func.return %z : tensor<4x6xf32>
}
