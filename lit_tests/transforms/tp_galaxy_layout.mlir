// RUN: forge-opt %s -p 'tensor-parallel{devices=2 mesh="2x2" axis=1},tp-partition{axis=1},tensor-parallel{devices=2 mesh="2x2" axis=0},tp-partition{axis=0}' --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=2 mesh="2x2" axis=1},tp-partition{axis=1},tensor-parallel{devices=2 mesh="2x2" axis=0},tp-partition{axis=0}' --split-input-file | xdsl-opt | filecheck %s

// An embedding, an RMSNorm and a gated MLP in llama3_70b_galaxy's layout on a
// 2x2 mesh (`mesh-layout=galaxy`): annotated and partitioned over the
// columns (grid axis 1), then over the rows (axis 0), each weight a block
// over both. Over the columns the table is split by hidden, so the residual
// stream is too; the norm's mean over that split hidden is each column's
// mean times 1/2, and only that statistic is all-reduced over the columns.
// W1 and W3 read the split stream: [8/2, 16/2] blocks (rows of the columns',
// columns of the rows'); their partial sums over the columns are all-reduced
// there. W2 is the transpose, [16/2, 8/2]; its partial sum over the rows
// joins the residual (itself the rows' vocab-parallel partial lookup) and
// the two are all-reduced over the rows once, after the all-gather along the
// columns that returns the whole stream.
// CHECK:      shard.grid @tp(shape = 2x2)
// CHECK-LABEL: func.func @layer
// CHECK:      %[[TC:.*]] = shard.all_slice %table on @tp grid_axes = [1] slice_axis = 1 : tensor<16x8xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %{{.*}} = shard.all_slice %[[TC]] on @tp grid_axes = [0] slice_axis = 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK:      %[[X:.*]] = shard.all_reduce %x on @tp grid_axes = [0] : tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %sq = tir.binary mul %[[X]], %[[X]] : tensor<1x2x4xf32>, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %ms = tir.reduce mean %sq {axes = array<i64: 2>, keepdims = 1 : i64} : tensor<1x2x4xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT: %[[HALF:.*]] = tir.full 5.000000e-01 : f32 : tensor<1xf32>
// CHECK-NEXT: %ms_1 = tir.binary mul %ms, %[[HALF]] : tensor<1x2x1xf32>, tensor<1xf32> -> tensor<1x2x1xf32>
// CHECK:      %v = tir.binary add %ms_1, %{{.*}} : tensor<1x2x1xf32>, tensor<1xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT: %[[V:.*]] = shard.all_reduce %v on @tp grid_axes = [1] : tensor<1x2x1xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT: %r = tir.unary sqrt %[[V]] : tensor<1x2x1xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT: %n = tir.binary div %[[X]], %r : tensor<1x2x4xf32>, tensor<1x2x1xf32> -> tensor<1x2x4xf32>
// CHECK:      %[[W1C:.*]] = shard.all_slice %w1 on @tp grid_axes = [1] slice_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[W1:.*]] = shard.all_slice %[[W1C]] on @tp grid_axes = [0] slice_axis = 1 : tensor<4x16xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %h1 = tir.matmul %n, %[[W1]] : tensor<1x2x4xf32>, tensor<4x8xf32> -> tensor<1x2x8xf32>
// CHECK:      %h3 = tir.matmul %n, %{{.*}} : tensor<1x2x4xf32>, tensor<4x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[H1:.*]] = shard.all_reduce %h1 on @tp grid_axes = [1] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %s = tir.unary sigmoid %[[H1]] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %g = tir.binary mul %s, %h3 : tensor<1x2x8xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK:      %[[W2C:.*]] = shard.all_slice %w2 on @tp grid_axes = [1] slice_axis = 1 : tensor<16x8xf32> -> tensor<16x4xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_reduce %g on @tp grid_axes = [1] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[W2:.*]] = shard.all_slice %[[W2C]] on @tp grid_axes = [0] slice_axis = 0 : tensor<16x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %y = tir.matmul %[[G]], %[[W2]] : tensor<1x2x8xf32>, tensor<8x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %out = tir.binary add %x, %y : tensor<1x2x4xf32>, tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[ALONG:.*]] = shard.all_gather %out on @tp grid_axes = [1] gather_axis = 2 : tensor<1x2x4xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[OUT:.*]] = shard.all_reduce %[[ALONG]] on @tp grid_axes = [0] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: func.return %[[OUT]] : tensor<1x2x8xf32>
func.func @layer(%ids: tensor<1x2xi64>) -> tensor<1x2x8xf32> {
  %table = tir.constant {value = dense<1.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %x = tir.gather %table, %ids {axis = 0 : i64} : tensor<16x8xf32>, tensor<1x2xi64> -> tensor<1x2x8xf32>
  %sq = tir.binary mul %x, %x : tensor<1x2x8xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  %ms = tir.reduce mean %sq {axes = array<i64: 2>, keepdims = 1 : i64} : tensor<1x2x8xf32> -> tensor<1x2x1xf32>
  %eps = tir.constant {value = dense<1.0e-6> : tensor<1xf32>} : tensor<1xf32>
  %v = tir.binary add %ms, %eps : tensor<1x2x1xf32>, tensor<1xf32> -> tensor<1x2x1xf32>
  %r = tir.unary sqrt %v : tensor<1x2x1xf32> -> tensor<1x2x1xf32>
  %n = tir.binary div %x, %r : tensor<1x2x8xf32>, tensor<1x2x1xf32> -> tensor<1x2x8xf32>
  %w1 = tir.constant {value = dense<0.5> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w3 = tir.constant {value = dense<0.25> : tensor<8x16xf32>} : tensor<8x16xf32>
  %h1 = tir.matmul %n, %w1 : tensor<1x2x8xf32>, tensor<8x16xf32> -> tensor<1x2x16xf32>
  %h3 = tir.matmul %n, %w3 : tensor<1x2x8xf32>, tensor<8x16xf32> -> tensor<1x2x16xf32>
  %s = tir.unary sigmoid %h1 : tensor<1x2x16xf32> -> tensor<1x2x16xf32>
  %g = tir.binary mul %s, %h3 : tensor<1x2x16xf32>, tensor<1x2x16xf32> -> tensor<1x2x16xf32>
  %w2 = tir.constant {value = dense<0.125> : tensor<16x8xf32>} : tensor<16x8xf32>
  %y = tir.matmul %g, %w2 : tensor<1x2x16xf32>, tensor<16x8xf32> -> tensor<1x2x8xf32>
  %out = tir.binary add %x, %y : tensor<1x2x8xf32>, tensor<1x2x8xf32> -> tensor<1x2x8xf32>
  func.return %out : tensor<1x2x8xf32>
}

// -----

// RUN: not forge-opt %s -p 'tp-partition{axis=2}' --split-input-file 2>&1 | filecheck %s --check-prefix=AXIS
// AXIS: forge-opt: error: tp-partition{axis=2}: the grid @tp [2, 2] has no such axis
builtin.module {
  shard.grid @tp(shape = 2x2)
}
