// RUN: forge-opt %s -p tir-to-forge --split-input-file | filecheck %s
// Forge's rules: pooling padding as [left, right, top, bottom] and symmetric,
// with no ceil_mode (other padding becomes an explicit Pad with the pool's
// identity), one pair of dims per Transpose, one dim per Reduce and Broadcast.

func.func @max_pool_asymmetric(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %y = tir.pool2d max %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// CHECK-LABEL: func.func @max_pool_asymmetric(
// CHECK-NEXT:    %y = forge.pad %x {pad = array<i64: 0, 1, 0, 1>, mode = "constant", value = 0xfff0000000000000 : f64} : (tensor<1x2x5x5xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT:    %y_1 = forge.max_pool2d %y {kernel_size = 2 : i64, stride = 2 : i64, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false} : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    func.return %y_1 : tensor<1x2x3x3xf32>

// -----

func.func @avg_pool_asymmetric(%x: tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32> {
  %y = tir.pool2d avg %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 1 : i64} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  func.return %y : tensor<1x2x3x3xf32>
}

// CHECK-LABEL: func.func @avg_pool_asymmetric(
// CHECK-NEXT:    %y = forge.pad %x {pad = array<i64: 0, 1, 0, 1>, mode = "constant", value = 0.000000e+00 : f64} : (tensor<1x2x5x5xf32>) -> tensor<1x2x6x6xf32>
// CHECK-NEXT:    %y_1 = forge.avg_pool2d %y {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : (tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    func.return %y_1 : tensor<1x2x3x3xf32>

// -----

func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %y = tir.transpose %x perm [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  func.return %y : tensor<4x2x3xf32>
}

// CHECK-LABEL: func.func @transpose_chain(
// CHECK-NEXT:    %y = forge.transpose %x {dim0 = -3 : i64, dim1 = -1 : i64} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK-NEXT:    %y_1 = forge.transpose %y {dim0 = -2 : i64, dim1 = -1 : i64} : (tensor<4x3x2xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    func.return %y_1 : tensor<4x2x3xf32>

// -----

func.func @reduce_chain(%x: tensor<2x3x4xf32>) -> tensor<3xf32> {
  %y = tir.reduce mean %x {axes = array<i64: 0, 2>, keepdims = 0 : i64} : tensor<2x3x4xf32> -> tensor<3xf32>
  func.return %y : tensor<3xf32>
}

// CHECK-LABEL: func.func @reduce_chain(
// CHECK-NEXT:    %y = forge.reduce_avg %x {dim = -3 : i64, keep_dim = true} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
// CHECK-NEXT:    %y_1 = forge.reduce_avg %y {dim = -1 : i64, keep_dim = true} : (tensor<1x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT:    %y_2 = forge.reshape %y_1 {shape = array<i64: 3>} : (tensor<1x3x1xf32>) -> tensor<3xf32>
// CHECK-NEXT:    func.return %y_2 : tensor<3xf32>

// -----

func.func @broadcast_chain(%x: tensor<3x1xf32>) -> tensor<2x3x4xf32> {
  %y = tir.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}

// CHECK-LABEL: func.func @broadcast_chain(
// CHECK-NEXT:    %y = forge.reshape %x {shape = array<i64: 1, 3, 1>} : (tensor<3x1xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT:    %y_1 = forge.broadcast %y {dim = -3 : i64, shape = 2 : i64} : (tensor<1x3x1xf32>) -> tensor<2x3x1xf32>
// CHECK-NEXT:    %y_2 = forge.broadcast %y_1 {dim = -1 : i64, shape = 4 : i64} : (tensor<2x3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    func.return %y_2 : tensor<2x3x4xf32>
