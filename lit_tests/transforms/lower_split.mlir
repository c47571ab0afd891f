// RUN: forge-opt %s -p lower-split --split-input-file | filecheck %s

// A slice per piece, on the split axis only.
// CHECK-LABEL: func.func @sections
func.func @sections(%x: tensor<10x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>, tensor<5x4xf32>) {
  %a, %b, %c = tir.split %x axis 0 sections [2, 3, 5] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<3x4xf32>, tensor<5x4xf32>
  func.return %a, %b, %c : tensor<2x4xf32>, tensor<3x4xf32>, tensor<5x4xf32>
}
// CHECK-NEXT: %a = tir.strided_slice %x axes [0] begin [0] end [2] strides [1] : tensor<10x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %b = tir.strided_slice %x axes [0] begin [2] end [5] strides [1] : tensor<10x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %c = tir.strided_slice %x axes [0] begin [5] end [10] strides [1] : tensor<10x4xf32> -> tensor<5x4xf32>
// CHECK-NEXT: func.return %a, %b, %c

// -----

// A piece that covers the whole axis is the input itself; zero-size pieces stay slices.
// CHECK-LABEL: func.func @whole_axis
func.func @whole_axis(%x: tensor<4x6xf32>) -> (tensor<4x0xf32>, tensor<4x6xf32>) {
  %a, %b = tir.split %x axis 1 sections [0, 6] : tensor<4x6xf32> -> tensor<4x0xf32>, tensor<4x6xf32>
  func.return %a, %b : tensor<4x0xf32>, tensor<4x6xf32>
}
// CHECK-NEXT: %a = tir.strided_slice %x axes [1] begin [0] end [0] strides [1] : tensor<4x6xf32> -> tensor<4x0xf32>
// CHECK-NEXT: func.return %a, %x

// -----

// Equal parts on the last axis.
// CHECK-LABEL: func.func @last_axis
func.func @last_axis(%x: tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %a, %b = tir.split %x axis 1 sections [3, 3] : tensor<2x6xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  func.return %a, %b : tensor<2x3xf32>, tensor<2x3xf32>
}
// CHECK-NEXT: %a = tir.strided_slice %x axes [1] begin [0] end [3] strides [1] : tensor<2x6xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %b = tir.strided_slice %x axes [1] begin [3] end [6] strides [1] : tensor<2x6xf32> -> tensor<2x3xf32>
