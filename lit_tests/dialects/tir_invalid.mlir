// RUN: forge-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @sections_do_not_sum(%x: tensor<10x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>) {
  %a, %b = tir.split %x axis 0 sections [2, 3] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<3x4xf32>
  func.return %a, %b : tensor<2x4xf32>, tensor<3x4xf32>
}
// CHECK: sections [2, 3] sum to 5, but dimension 0 has size 10

// -----

func.func @axis_out_of_range(%x: tensor<10x4xf32>) -> (tensor<10x4xf32>) {
  %a = tir.split %x axis 2 sections [4] : tensor<10x4xf32> -> tensor<10x4xf32>
  func.return %a : tensor<10x4xf32>
}
// CHECK: axis 2 is out of range for an input of rank 2

// -----

func.func @wrong_result_shape(%x: tensor<10x4xf32>) -> (tensor<5x4xf32>, tensor<5x3xf32>) {
  %a, %b = tir.split %x axis 0 sections [5, 5] : tensor<10x4xf32> -> tensor<5x4xf32>, tensor<5x3xf32>
  func.return %a, %b : tensor<5x4xf32>, tensor<5x3xf32>
}
// CHECK: result 1 has shape [5, 3], expected [5, 4]

// -----

func.func @slice_beyond(%x: tensor<10x4xf32>) -> tensor<4x4xf32> {
  %y = tir.strided_slice %x axes [0] begin [8] end [12] strides [1] : tensor<10x4xf32> -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK: slice 8:12 on axis 0 is outside 0..10 or reversed
