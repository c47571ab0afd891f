// RUN: forge-opt %s -p tir-to-forge --split-input-file | filecheck %s

// A single-axis slice is one Index, with dim counted from the end.
// CHECK-LABEL: func.func @single_axis
func.func @single_axis(%x: tensor<10x4xf32>) -> tensor<3x4xf32> {
  %y = tir.strided_slice %x axes [0] begin [2] end [5] strides [1] : tensor<10x4xf32> -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
// CHECK-NEXT: %y = forge.index %x {dim = -2 : i64, start = 2 : i64, stop = 5 : i64, stride = 1 : i64} : (tensor<10x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: func.return %y

// -----

// A multi-axis slice is a chain of Index ops; an axis taken whole is skipped.
// CHECK-LABEL: func.func @multi_axis
func.func @multi_axis(%x: tensor<10x4x6xf32>) -> tensor<3x4x2xf32> {
  %y = tir.strided_slice %x axes [0, 1, 2] begin [1, 0, 0] end [7, 4, 4] strides [2, 1, 2] : tensor<10x4x6xf32> -> tensor<3x4x2xf32>
  func.return %y : tensor<3x4x2xf32>
}
// CHECK-NEXT: %[[A:.*]] = forge.index %x {dim = -3 : i64, start = 1 : i64, stop = 7 : i64, stride = 2 : i64} : (tensor<10x4x6xf32>) -> tensor<3x4x6xf32>
// CHECK-NEXT: %[[B:.*]] = forge.index %[[A]] {dim = -1 : i64, start = 0 : i64, stop = 4 : i64, stride = 2 : i64} : (tensor<3x4x6xf32>) -> tensor<3x4x2xf32>
// CHECK-NEXT: func.return %[[B]]

// -----

// An empty piece at the end of an axis is taken one element earlier: Forge asserts start < size.
// CHECK-LABEL: func.func @empty_at_end
func.func @empty_at_end(%x: tensor<4x6xf32>) -> tensor<4x0xf32> {
  %y = tir.strided_slice %x axes [1] begin [6] end [6] strides [1] : tensor<4x6xf32> -> tensor<4x0xf32>
  func.return %y : tensor<4x0xf32>
}
// CHECK-NEXT: %y = forge.index %x {dim = -1 : i64, start = 5 : i64, stop = 5 : i64, stride = 1 : i64} : (tensor<4x6xf32>) -> tensor<4x0xf32>
