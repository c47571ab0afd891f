// RUN: forge-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @stop_beyond_dim(%x: tensor<10x4xf32>) -> tensor<4x4xf32> {
  %y = forge.index %x {dim = -2 : i64, start = 8 : i64, stop = 12 : i64} : (tensor<10x4xf32>) -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK: stop 12 must be in 8..10 (dim -2 has size 10)

// -----

func.func @start_at_size(%x: tensor<10x4xf32>) -> tensor<10x0xf32> {
  %y = forge.index %x {dim = -1 : i64, start = 4 : i64, stop = 4 : i64} : (tensor<10x4xf32>) -> tensor<10x0xf32>
  func.return %y : tensor<10x0xf32>
}
// CHECK: start 4 must be in 0..3 (dim -1 has size 4)

// -----

func.func @positive_dim(%x: tensor<10x4xf32>) -> tensor<2x4xf32> {
  %y = forge.index %x {dim = 0 : i64, start = 0 : i64, stop = 2 : i64} : (tensor<10x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK: dim 0 must be negative and within rank 2

// -----

func.func @zero_stride(%x: tensor<10x4xf32>) -> tensor<2x4xf32> {
  %y = forge.index %x {dim = -2 : i64, start = 0 : i64, stop = 2 : i64, stride = 0 : i64} : (tensor<10x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK: stride 0 must be positive
