// RUN: forge-opt %s -p fold-weight-layouts --split-input-file | filecheck %s

// A Gemm's transB=1: the weight's Transpose becomes a load-time step of its parameter.
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>} : tensor<3x4xf32>
  %wt = forge.transpose %w {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = forge.matmul %x, %wt : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-NEXT: %w = forge.parameter "w" {value = dense<1.000000e+00> : tensor<3x4xf32>, layout = [{transpose = array<i64: 1, 0>}]} : tensor<4x3xf32>
// CHECK-NEXT: %y = forge.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: func.return %y

// -----

// A chain (a Conv weight unsqueezed, then transposed) becomes the steps in order.
// CHECK-LABEL: func.func @chain
func.func @chain() -> tensor<8x1x4xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
  %u = forge.unsqueeze %w {dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<4x1x8xf32>
  %t = forge.transpose %u {dim0 = 0 : i64, dim1 = 2 : i64} : (tensor<4x1x8xf32>) -> tensor<8x1x4xf32>
  func.return %t : tensor<8x1x4xf32>
}
// CHECK-NEXT: %w = forge.parameter "w" {value = dense<1.000000e+00> : tensor<4x8xf32>, layout = [{reshape = array<i64: 4, 1, 8>}, {transpose = array<i64: 2, 1, 0>}]} : tensor<8x1x4xf32>
// CHECK-NEXT: func.return %w

// -----

// A weight read twice (an LM head tied to the embedding) keeps its Transpose: one
// parameter has one layout.
// CHECK-LABEL: func.func @tied
func.func @tied(%x: tensor<2x4xf32>, %ids: tensor<2xi32>) -> (tensor<2x3xf32>, tensor<2x4xf32>) {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>} : tensor<3x4xf32>
  %e = forge.embedding %ids, %w : (tensor<2xi32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %wt = forge.transpose %w {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %y = forge.matmul %x, %wt : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  func.return %y, %e : tensor<2x3xf32>, tensor<2x4xf32>
}
// CHECK-NEXT: %w = forge.parameter "w" {value = dense<1.000000e+00> : tensor<3x4xf32>} : tensor<3x4xf32>
// CHECK-NEXT: %e = forge.embedding %ids, %w
// CHECK-NEXT: %wt = forge.transpose %w

// -----

// A constant the compiler made is laid out at compile time: a repeated value keeps its
// fill, a computed one is transposed.
// CHECK-LABEL: func.func @compiler_constants
func.func @compiler_constants() -> (tensor<4x3xf32>, tensor<3x2xf32>) {
  %f = forge.constant "f" {fill = 2.0 : f32} : tensor<3x4xf32>
  %ft = forge.transpose %f {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<3x4xf32>) -> tensor<4x3xf32>
  %c = forge.constant "c" {value = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>} : tensor<2x3xf32>
  %ct = forge.transpose %c {dim0 = 0 : i64, dim1 = 1 : i64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %ft, %ct : tensor<4x3xf32>, tensor<3x2xf32>
}
// CHECK-NEXT: %f = forge.constant "f" {fill = 2.000000e+00 : f32} : tensor<4x3xf32>
// CHECK-NEXT: %c = forge.constant "c" {value = dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>} : tensor<3x2xf32>
// CHECK-NEXT: func.return %f, %c
