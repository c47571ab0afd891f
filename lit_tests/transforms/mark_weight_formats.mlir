// RUN: forge-opt %s -p 'mark-weight-formats{format=bfp8_b}' --split-input-file | filecheck %s

// A Linear's weight, laid out [in, out] as it loads, is the B operand of its matmul: tt-mlir stores it
// as bfp8_b; its bias is no matmul weight, and neither is the activation of the second matmul.
// CHECK: builtin.module attributes {forge.weight_format = #forge<data_format bfp8_b>}
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>, layout = [{transpose = array<i64: 1, 0>}]} : tensor<4x3xf32>
  %b = forge.parameter "b" {value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %h = forge.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %ht = forge.transpose %h {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %y = forge.matmul %h, %ht : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  func.return %y : tensor<2x2xf32>
}
// CHECK-NEXT: %w = forge.parameter "w" {value = dense<1.000000e+00> : tensor<3x4xf32>, layout = [{transpose = array<i64: 1, 0>}], weight_format = #forge<data_format bfp8_b>} : tensor<4x3xf32>
// CHECK-NEXT: %b = forge.parameter "b" {value = dense<1.000000e+00> : tensor<3xf32>} : tensor<3xf32>

// -----

// A B operand computed from weights alone (a tied table's transpose, which stays a call) marks the
// weights it is computed from.
// CHECK-LABEL: func.func @tied_head
func.func @tied_head(%x: tensor<2x4xf32>, %ids: tensor<2xi32>) -> (tensor<2x4xf32>, tensor<2x8xf32>) {
  %table = forge.parameter "table" {value = dense<1.0> : tensor<8x4xf32>} : tensor<8x4xf32>
  %e = forge.embedding %ids, %table : (tensor<2xi32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %t = forge.transpose %table {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %y = forge.matmul %x, %t : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  func.return %e, %y : tensor<2x4xf32>, tensor<2x8xf32>
}
// CHECK-NEXT: %table = forge.parameter "table" {value = dense<1.000000e+00> : tensor<8x4xf32>, weight_format = #forge<data_format bfp8_b>} : tensor<8x4xf32>
