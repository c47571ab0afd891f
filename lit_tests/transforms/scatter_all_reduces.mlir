// RUN: forge-opt %s -p scatter-all-reduces --split-input-file | filecheck %s

// A gated MLP on a mesh's columns as tp-partition leaves it (Galaxy's
// layout): the gate's partial sum all-reduced, SiLU of it times the up
// projection's summand, that product all-reduced for W2. The gate's and
// the up projection's sums are reduce-scattered over the columns instead,
// SiLU·mul runs on each column's 16 of 32 hidden units, and one all-gather
// feeds W2: 3 ring passes for 4.
// CHECK-LABEL: func.func @gated_mlp
// CHECK-NEXT:  %g = tir.matmul %x, %w1
// CHECK-NEXT:  %g_1 = shard.reduce_scatter %g on @tp grid_axes = [1] scatter_axis = 2 : tensor<1x4x32xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT:  %s = tir.unary sigmoid %g_1 : tensor<1x4x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT:  %silu = tir.binary mul %g_1, %s : tensor<1x4x16xf32>, tensor<1x4x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT:  %u = tir.matmul %x, %w3
// CHECK-NEXT:  %u_1 = shard.reduce_scatter %u on @tp grid_axes = [1] scatter_axis = 2 : tensor<1x4x32xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT:  %h = tir.binary mul %silu, %u_1 : tensor<1x4x16xf32>, tensor<1x4x16xf32> -> tensor<1x4x16xf32>
// CHECK-NEXT:  %[[H:.*]] = shard.all_gather %h on @tp grid_axes = [1] gather_axis = 2 : tensor<1x4x16xf32> -> tensor<1x4x32xf32>
// CHECK-NEXT:  %y = tir.matmul %[[H]], %w2
// CHECK-NEXT:  func.return %y
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @gated_mlp(%x: tensor<1x4x8xf32>, %w1: tensor<8x32xf32>, %w3: tensor<8x32xf32>,
                       %w2: tensor<32x8xf32>) -> tensor<1x4x8xf32> {
    %g = tir.matmul %x, %w1 : tensor<1x4x8xf32>, tensor<8x32xf32> -> tensor<1x4x32xf32>
    %ga = shard.all_reduce %g on @tp grid_axes = [1] : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
    %s = tir.unary sigmoid %ga : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
    %silu = tir.binary mul %ga, %s : tensor<1x4x32xf32>, tensor<1x4x32xf32> -> tensor<1x4x32xf32>
    %u = tir.matmul %x, %w3 : tensor<1x4x8xf32>, tensor<8x32xf32> -> tensor<1x4x32xf32>
    %h = tir.binary mul %silu, %u : tensor<1x4x32xf32>, tensor<1x4x32xf32> -> tensor<1x4x32xf32>
    %ha = shard.all_reduce %h on @tp grid_axes = [1] : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
    %y = tir.matmul %ha, %w2 : tensor<1x4x32xf32>, tensor<32x8xf32> -> tensor<1x4x8xf32>
    func.return %y : tensor<1x4x8xf32>
  }
}

// -----

// Two sums joined by an add and a constant scale: both reduce-scattered,
// the scale (a constant scalar) read as it is, one all-gather.
// CHECK-LABEL: func.func @two_sums
// CHECK-NEXT:  %half = tir.constant
// CHECK-NEXT:  %a_1 = shard.reduce_scatter %a on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x6xf32> -> tensor<2x3xf32>
// CHECK-NEXT:  %b_1 = shard.reduce_scatter %b on @tp grid_axes = [0] scatter_axis = 1 : tensor<2x6xf32> -> tensor<2x3xf32>
// CHECK-NEXT:  %sum = tir.binary add %a_1, %b_1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:  %scaled = tir.binary mul %sum, %half : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// CHECK-NEXT:  %[[S:.*]] = shard.all_gather %scaled on @tp grid_axes = [0] gather_axis = 1 : tensor<2x3xf32> -> tensor<2x6xf32>
// CHECK-NEXT:  func.return %[[S]]
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @two_sums(%a: tensor<2x6xf32>, %b: tensor<2x6xf32>) -> tensor<2x6xf32> {
    %half = tir.constant {value = dense<5.000000e-01> : tensor<f32>} : tensor<f32>
    %ra = shard.all_reduce %a on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %rb = shard.all_reduce %b on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %sum = tir.binary add %ra, %rb : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x6xf32>
    %scaled = tir.binary mul %sum, %half : tensor<2x6xf32>, tensor<f32> -> tensor<2x6xf32>
    func.return %scaled : tensor<2x6xf32>
  }
}

// -----

// One sum read by one element-wise op: a reduce-scatter and an all-gather
// would send what the all-reduce sends, so it stays.
// CHECK-LABEL: func.func @one_sum
// CHECK-NEXT:  %r = shard.all_reduce %a on @tp grid_axes = [0]
// CHECK-NEXT:  %s = tir.unary sigmoid %r
// CHECK-NEXT:  func.return %s
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @one_sum(%a: tensor<2x6xf32>) -> tensor<2x6xf32> {
    %r = shard.all_reduce %a on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %s = tir.unary sigmoid %r : tensor<2x6xf32> -> tensor<2x6xf32>
    func.return %s : tensor<2x6xf32>
  }
}

// -----

// Two sums, each also read whole by a reduction: three values would leave
// the region (the sum and both operands), for two sums: they stay.
// CHECK-LABEL: func.func @read_whole
// CHECK-NEXT:  %ra = shard.all_reduce %a
// CHECK-NEXT:  %rb = shard.all_reduce %b
// CHECK-NEXT:  %sum = tir.binary add %ra, %rb
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @read_whole(%a: tensor<2x6xf32>, %b: tensor<2x6xf32>) -> (tensor<2x6xf32>, tensor<2x1xf32>, tensor<2x1xf32>) {
    %ra = shard.all_reduce %a on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %rb = shard.all_reduce %b on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %sum = tir.binary add %ra, %rb : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x6xf32>
    %ma = tir.reduce max %ra {axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x6xf32> -> tensor<2x1xf32>
    %mb = tir.reduce max %rb {axes = array<i64: 1>, keepdims = 1 : i64} : tensor<2x6xf32> -> tensor<2x1xf32>
    func.return %sum, %ma, %mb : tensor<2x6xf32>, tensor<2x1xf32>, tensor<2x1xf32>
  }
}

// -----

// Sums over different grid axes, a maximum, and an operand the region does
// not hold (a per-row scale, neither constant nor a sum alike) are not
// joined: each all-reduce stays.
// CHECK-LABEL: func.func @unlike
// CHECK-NEXT:  %ra = shard.all_reduce %a on @tp grid_axes = [0]
// CHECK-NEXT:  %rb = shard.all_reduce %b on @tp grid_axes = [1]
// CHECK-NEXT:  %rc = shard.all_reduce %c on @tp grid_axes = [0] reduction = max
// CHECK-NEXT:  %ab = tir.binary add %ra, %rb
// CHECK-NEXT:  %ac = tir.binary add %ra, %rc
// CHECK-NEXT:  %as = tir.binary mul %ra, %scale
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @unlike(%a: tensor<2x6xf32>, %b: tensor<2x6xf32>, %c: tensor<2x6xf32>, %scale: tensor<2x1xf32>)
      -> (tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>) {
    %ra = shard.all_reduce %a on @tp grid_axes = [0] : tensor<2x6xf32> -> tensor<2x6xf32>
    %rb = shard.all_reduce %b on @tp grid_axes = [1] : tensor<2x6xf32> -> tensor<2x6xf32>
    %rc = shard.all_reduce %c on @tp grid_axes = [0] reduction = max : tensor<2x6xf32> -> tensor<2x6xf32>
    %ab = tir.binary add %ra, %rb : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x6xf32>
    %ac = tir.binary add %ra, %rc : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x6xf32>
    %as = tir.binary mul %ra, %scale : tensor<2x6xf32>, tensor<2x1xf32> -> tensor<2x6xf32>
    func.return %ab, %ac, %as : tensor<2x6xf32>, tensor<2x6xf32>, tensor<2x6xf32>
  }
}

// -----

// No axis of the sum divides by the group's 2 devices: it stays.
// CHECK-LABEL: func.func @odd
// CHECK-NEXT:  %ra = shard.all_reduce %a
// CHECK-NEXT:  %rb = shard.all_reduce %b
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @odd(%a: tensor<3x5xf32>, %b: tensor<3x5xf32>) -> tensor<3x5xf32> {
    %ra = shard.all_reduce %a on @tp grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf32>
    %rb = shard.all_reduce %b on @tp grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf32>
    %sum = tir.binary add %ra, %rb : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
    func.return %sum : tensor<3x5xf32>
  }
}
