// RUN: forge-opt %s -p fuse-patterns --split-input-file | filecheck %s

// GELU's tanh form, as GPT-2's exporter writes it: one gelu_tanh, its constants gone.
// CHECK-LABEL: func.func @gelu_tanh
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = tir.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %three = tir.constant {value = dense<3.0> : tensor<f32>} : tensor<f32>
  %k = tir.constant {value = dense<0.044715> : tensor<f32>} : tensor<f32>
  %c = tir.constant {value = dense<0.797884583> : tensor<f32>} : tensor<f32>
  %one = tir.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = tir.binary mul %x, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %p = tir.binary pow %x, %three : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %pk = tir.binary mul %p, %k : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s = tir.binary add %x, %pk : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sc = tir.binary mul %s, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %t = tir.unary tanh %sc : tensor<4x8xf32> -> tensor<4x8xf32>
  %t1 = tir.binary add %t, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %y = tir.binary mul %a, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// CHECK-NEXT: %y = tir.unary gelu_tanh %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: func.return %y

// -----

// The same with another cubic coefficient is not GELU: it stays.
// CHECK-LABEL: func.func @not_gelu
func.func @not_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %half = tir.constant {value = dense<0.5> : tensor<f32>} : tensor<f32>
  %three = tir.constant {value = dense<3.0> : tensor<f32>} : tensor<f32>
  %k = tir.constant {value = dense<0.05> : tensor<f32>} : tensor<f32>
  %c = tir.constant {value = dense<0.797884583> : tensor<f32>} : tensor<f32>
  %one = tir.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %a = tir.binary mul %x, %half : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %p = tir.binary pow %x, %three : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %pk = tir.binary mul %p, %k : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %s = tir.binary add %x, %pk : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sc = tir.binary mul %s, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %t = tir.unary tanh %sc : tensor<4x8xf32> -> tensor<4x8xf32>
  %t1 = tir.binary add %t, %one : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %y = tir.binary mul %a, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// CHECK:      tir.unary tanh
// CHECK:      %y = tir.binary mul %a, %t1

// -----

// Layer normalisation written out over the last axis (opset < 17 exports).
// CHECK-LABEL: func.func @layernorm
func.func @layernorm(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %two = tir.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %eps = tir.constant {value = dense<1.0e-05> : tensor<f32>} : tensor<f32>
  %g = tir.constant {value = dense<2.0> : tensor<8xf32>} : tensor<8xf32>
  %b = tir.constant {value = dense<0.5> : tensor<8xf32>} : tensor<8xf32>
  %m = tir.reduce mean %x {axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
  %d = tir.binary sub %x, %m : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %d2 = tir.binary pow %d, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %v = tir.reduce mean %d2 {axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x8xf32> -> tensor<2x1xf32>
  %ve = tir.binary add %v, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %sd = tir.unary sqrt %ve : tensor<2x1xf32> -> tensor<2x1xf32>
  %n = tir.binary div %d, %sd : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %ng = tir.binary mul %n, %g : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %y = tir.binary add %ng, %b : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}
// CHECK:      %[[G:.*]] = tir.constant {value = dense<2.000000e+00> : tensor<8xf32>} : tensor<8xf32>
// CHECK-NEXT: %[[B:.*]] = tir.constant {value = dense<5.000000e-01> : tensor<8xf32>} : tensor<8xf32>
// CHECK-NEXT: %[[Y:.*]] = tir.layernorm %x, %[[G]], %[[B]] {epsilon = 1.000000e-05 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: func.return %[[Y]]

// -----

// A BatchNormalization after a Conv: the Conv's weights scaled, its bias
// shifted, at compile time (s = 2 / sqrt(3 + 1) = 1; bias (0 - 1)·1 + 0.5).
// CHECK-LABEL: func.func @conv_bn
func.func @conv_bn(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<2x2x1x1xf32>} : tensor<2x2x1x1xf32>
  %s = tir.constant {value = dense<2.0> : tensor<2xf32>} : tensor<2xf32>
  %b = tir.constant {value = dense<0.5> : tensor<2xf32>} : tensor<2xf32>
  %m = tir.constant {value = dense<1.0> : tensor<2xf32>} : tensor<2xf32>
  %v = tir.constant {value = dense<3.0> : tensor<2xf32>} : tensor<2xf32>
  %c = tir.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  %y = tir.batchnorm %c, %s, %b, %m, %v {epsilon = 1.0 : f32} : (tensor<1x2x4x4xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  func.return %y : tensor<1x2x4x4xf32>
}
// CHECK:      %[[W:.*]] = tir.constant {value = dense<1.000000e+00> : tensor<2x2x1x1xf32>} : tensor<2x2x1x1xf32>
// CHECK-NEXT: %[[BIAS:.*]] = tir.constant {value = dense<-5.000000e-01> : tensor<2xf32>} : tensor<2xf32>
// CHECK-NEXT: %[[Y:.*]] = tir.conv2d %x, %[[W]], %[[BIAS]]
// CHECK-NEXT: func.return %[[Y]]

// -----

// The same after tp-partition, the weights and parameters a device's blocks
// (`shard.all_slice`), whose values the writer computes for each device:
// the fold is written as ops on them.
// CHECK-LABEL: func.func @conv_bn_blocks
shard.grid @tp(shape = 2)
func.func @conv_bn_blocks(%x: tensor<1x2x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<2x2x1x1xf32>, weight_name = "w"} : tensor<2x2x1x1xf32>
  %s = tir.constant {value = dense<2.0> : tensor<2xf32>, weight_name = "s"} : tensor<2xf32>
  %b = tir.constant {value = dense<0.5> : tensor<2xf32>, weight_name = "b"} : tensor<2xf32>
  %m = tir.constant {value = dense<1.0> : tensor<2xf32>, weight_name = "m"} : tensor<2xf32>
  %v = tir.constant {value = dense<3.0> : tensor<2xf32>, weight_name = "v"} : tensor<2xf32>
  %wd = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<2x2x1x1xf32> -> tensor<1x2x1x1xf32>
  %sd = shard.all_slice %s on @tp grid_axes = [0] slice_axis = 0 : tensor<2xf32> -> tensor<1xf32>
  %bd = shard.all_slice %b on @tp grid_axes = [0] slice_axis = 0 : tensor<2xf32> -> tensor<1xf32>
  %md = shard.all_slice %m on @tp grid_axes = [0] slice_axis = 0 : tensor<2xf32> -> tensor<1xf32>
  %vd = shard.all_slice %v on @tp grid_axes = [0] slice_axis = 0 : tensor<2xf32> -> tensor<1xf32>
  %c = tir.conv2d %x, %wd {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x1x1xf32>) -> tensor<1x1x4x4xf32>
  %y = tir.batchnorm %c, %sd, %bd, %md, %vd {epsilon = 1.0 : f32} : (tensor<1x1x4x4xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK:      %vd = shard.all_slice %v
// CHECK-NEXT: %[[EPS:.*]] = tir.constant {value = dense<1.000000e+00> : tensor<1xf32>} : tensor<1xf32>
// CHECK-NEXT: %[[VE:.*]] = tir.binary add %vd, %[[EPS]] : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[ROOT:.*]] = tir.unary sqrt %[[VE]] : tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[S:.*]] = tir.binary div %sd, %[[ROOT]] : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[MS:.*]] = tir.binary mul %md, %[[S]] : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[BIAS:.*]] = tir.binary sub %bd, %[[MS]] : tensor<1xf32>, tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT: %[[COL:.*]] = tir.reshape %[[S]] : tensor<1xf32> -> tensor<1x1x1x1xf32>
// CHECK-NEXT: %[[W:.*]] = tir.binary mul %wd, %[[COL]] : tensor<1x2x1x1xf32>, tensor<1x1x1x1xf32> -> tensor<1x2x1x1xf32>
// CHECK-NEXT: %[[Y:.*]] = tir.conv2d %x, %[[W]], %[[BIAS]]
// CHECK-NEXT: func.return %[[Y]]

// -----

// A Linear on flattened batch dims with its bias added after: one Matmul of
// the unflattened input with the bias.
// CHECK-LABEL: func.func @linear
func.func @linear(%x: tensor<2x3x8xf32>) -> tensor<2x3x5xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x5xf32>} : tensor<8x5xf32>
  %b = tir.constant {value = dense<0.5> : tensor<5xf32>} : tensor<5xf32>
  %f = tir.reshape %x : tensor<2x3x8xf32> -> tensor<6x8xf32>
  %m = tir.matmul %f, %w : tensor<6x8xf32>, tensor<8x5xf32> -> tensor<6x5xf32>
  %mb = tir.binary add %m, %b : tensor<6x5xf32>, tensor<5xf32> -> tensor<6x5xf32>
  %y = tir.reshape %mb : tensor<6x5xf32> -> tensor<2x3x5xf32>
  func.return %y : tensor<2x3x5xf32>
}
// CHECK:      %y = tir.matmul %x, %w bias %b : tensor<2x3x8xf32>, tensor<8x5xf32>, tensor<5xf32> -> tensor<2x3x5xf32>
// CHECK-NEXT: func.return %y

// -----

// A row-parallel Linear after tp-partition: its bias, added to device 0's
// partial sum alone (a Where of the device's block of [true, false]), is
// made of constants: the Matmul's bias still.
// CHECK-LABEL: func.func @row_parallel_linear
shard.grid @tp(shape = 2)
func.func @row_parallel_linear(%x: tensor<3x4xf32>) -> tensor<3x5xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x5xf32>, weight_name = "w"} : tensor<8x5xf32>
  %b = tir.constant {value = dense<0.5> : tensor<5xf32>, weight_name = "b"} : tensor<5xf32>
  %first = tir.constant {value = dense<[true, false]> : tensor<2xi1>} : tensor<2xi1>
  %zero = tir.constant {value = dense<0.0> : tensor<1xf32>} : tensor<1xf32>
  %wd = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<8x5xf32> -> tensor<4x5xf32>
  %mine = shard.all_slice %first on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi1> -> tensor<1xi1>
  %bd = tir.where %mine, %b, %zero : tensor<1xi1>, tensor<5xf32>, tensor<1xf32> -> tensor<5xf32>
  %m = tir.matmul %x, %wd : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  %y = tir.binary add %m, %bd : tensor<3x5xf32>, tensor<5xf32> -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}
// CHECK:      %bd = tir.where %mine, %b, %zero
// CHECK-NEXT: %y = tir.matmul %x, %wd bias %bd : tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32> -> tensor<3x5xf32>
// CHECK-NEXT: func.return %y

// -----

// Identity arithmetic by a constant the model computes goes (Optimum's RoPE scales cos by
// 1.0); by a model weight it stays, as does 1 / x and a sum that broadcasts x wider.
// CHECK-LABEL: func.func @identities
func.func @identities(%x: tensor<4x8xf32>, %v: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %one = tir.constant {value = dense<1.0> : tensor<f32>} : tensor<f32>
  %zero = tir.constant {value = dense<0.0> : tensor<f32>} : tensor<f32>
  %zeros = tir.full 0.0 : f32 : tensor<4x8xf32>
  %w = tir.constant {value = dense<1.0> : tensor<8xf32>, weight_name = "w"} : tensor<8xf32>
  %a = tir.binary mul %one, %x : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %b = tir.binary sub %a, %zero : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %c = tir.binary mul %b, %w : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %d = tir.binary div %one, %c : tensor<f32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %e = tir.binary add %v, %zeros : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %b, %c, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK:      %c = tir.binary mul %x, %w
// CHECK-NEXT: %d = tir.binary div %one, %c
// CHECK-NEXT: %e = tir.binary add %v, %zeros
// CHECK-NEXT: func.return %x, %c, %d, %e
