// RUN: forge-opt %s --split-input-file | filecheck %s
// RUN: FORGE_ROUNDTRIP

// CHECK-LABEL: func.func @split_sections
func.func @split_sections(%x: tensor<10x4xf32>) -> (tensor<2x4xf32>, tensor<0x4xf32>, tensor<8x4xf32>) {
  // CHECK-NEXT: %a, %b, %c = tir.split %x axis 0 sections [2, 0, 8] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<0x4xf32>, tensor<8x4xf32>
  %a, %b, %c = tir.split %x axis 0 sections [2, 0, 8] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<0x4xf32>, tensor<8x4xf32>
  func.return %a, %b, %c : tensor<2x4xf32>, tensor<0x4xf32>, tensor<8x4xf32>
}

// -----

// CHECK-LABEL: func.func @strided_slice
func.func @strided_slice(%x: tensor<10x4xf32>) -> tensor<3x2xf32> {
  // CHECK-NEXT: %y = tir.strided_slice %x axes [0, 1] begin [1, 0] end [7, 4] strides [2, 2] : tensor<10x4xf32> -> tensor<3x2xf32>
  %y = tir.strided_slice %x axes [0, 1] begin [1, 0] end [7, 4] strides [2, 2] : tensor<10x4xf32> -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @matmul_with_bias
func.func @matmul_with_bias(%x: tensor<2x3x8xf32>, %w: tensor<8x5xf32>, %b: tensor<5xf32>) -> tensor<2x3x5xf32> {
  // CHECK-NEXT: %y = tir.matmul %x, %w bias %b : tensor<2x3x8xf32>, tensor<8x5xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
  %y = tir.matmul %x, %w bias %b : tensor<2x3x8xf32>, tensor<8x5xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}
