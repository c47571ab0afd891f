// RUN: forge-opt %s -p tp-partition --split-input-file | filecheck %s
// RUN: forge-opt %s -p tp-partition --split-input-file | forge-opt --split-input-file | filecheck %s

// The column layer's output stays split through the element-wise op; the
// row layer's partial sums are all-reduced once, the bias in device 0's
// (zeros on the others: a per-device constant, computed when compiled).
// CHECK-LABEL: func.func @mlp
shard.grid @tp(shape = 2)
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %b2 = tir.constant {value = dense<3.0> : tensor<8xf32>} : tensor<8xf32>
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %w1s = shard.shard %w1 to %cols : tensor<8x16xf32>
  %h = tir.matmul %x, %w1s : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = tir.unary relu %h : tensor<4x16xf32> -> tensor<4x16xf32>
  %rows = shard.sharding @tp split_axes = [[0], []] : !shard.sharding
  %w2s = shard.shard %w2 to %rows : tensor<16x8xf32>
  %y = tir.matmul %r, %w2s : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %z = tir.binary add %y, %b2 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
// CHECK:      %[[W1:.*]] = shard.all_slice %w1 on @tp grid_axes = [0] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %h = tir.matmul %x, %[[W1]] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %r = tir.unary relu %h : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[W2:.*]] = shard.all_slice %w2 on @tp grid_axes = [0] slice_axis = 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT: %y = tir.matmul %r, %[[W2]] : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[FLAGS:.*]] = tir.constant {value = dense<[true, false]> : tensor<2xi1>} : tensor<2xi1>
// CHECK-NEXT: %[[FIRST:.*]] = shard.all_slice %[[FLAGS]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi1> -> tensor<1xi1>
// CHECK-NEXT: %[[ZERO:.*]] = tir.full 0.000000e+00 : f32 : tensor<1xf32>
// CHECK-NEXT: %[[B2:.*]] = tir.where %[[FIRST]], %b2, %[[ZERO]] : tensor<1xi1>, tensor<8xf32>, tensor<1xf32> -> tensor<8xf32>
// CHECK-NEXT: %z = tir.binary add %y, %[[B2]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %z on @tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: func.return %[[SUM]]

// -----

// Paddle's vocab-parallel lookup: device k's rows [4k, 4k+4); an index
// outside them reads row 0 and its result is zeroed; the results are summed.
// CHECK-LABEL: func.func @vocab
shard.grid @tp(shape = 2)
func.func @vocab(%idx: tensor<5xi64>) -> tensor<5x4xf32> {
  %t = tir.constant {value = dense<1.0> : tensor<8x4xf32>} : tensor<8x4xf32>
  %rows = shard.sharding @tp split_axes = [[0], []] : !shard.sharding
  %ts = shard.shard %t to %rows : tensor<8x4xf32>
  %e = tir.gather %ts, %idx {axis = 0 : i64} : tensor<8x4xf32>, tensor<5xi64> -> tensor<5x4xf32>
  func.return %e : tensor<5x4xf32>
}
// CHECK:      %[[T:.*]] = shard.all_slice %t on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK:      %[[IDX:.*]] = tir.where
// CHECK-NEXT: %[[FIRSTS:.*]] = tir.constant {value = dense<[0, 4]> : tensor<2xi64>} : tensor<2xi64>
// CHECK-NEXT: %[[FIRST:.*]] = shard.all_slice %[[FIRSTS]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi64> -> tensor<1xi64>
// CHECK-NEXT: %[[LOCAL:.*]] = tir.binary sub %[[IDX]], %[[FIRST]]
// CHECK-NEXT: %[[ZERO:.*]] = tir.constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NEXT: %[[GE:.*]] = tir.binary ge %[[LOCAL]], %[[ZERO]]
// CHECK-NEXT: %[[ROWS:.*]] = tir.constant {value = dense<4> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NEXT: %[[LT:.*]] = tir.binary lt %[[LOCAL]], %[[ROWS]]
// CHECK-NEXT: %[[IN:.*]] = tir.binary and %[[GE]], %[[LT]]
// CHECK-NEXT: %[[ROW:.*]] = tir.where %[[IN]], %[[LOCAL]], %[[ZERO]] : tensor<5xi1>, tensor<5xi64>, tensor<1xi64> -> tensor<5xi64>
// CHECK-NEXT: %[[ROWS_READ:.*]] = tir.gather %[[T]], %[[ROW]] {axis = 0 : i64} : tensor<4x4xf32>, tensor<5xi64> -> tensor<5x4xf32>
// CHECK-NEXT: %[[KEPT:.*]] = tir.reshape %[[IN]] : tensor<5xi1> -> tensor<5x1xi1>
// CHECK-NEXT: %[[NONE:.*]] = tir.full 0.000000e+00 : f32 : tensor<1xf32>
// CHECK-NEXT: %e = tir.where %[[KEPT]], %[[ROWS_READ]], %[[NONE]] : tensor<5x1xi1>, tensor<5x4xf32>, tensor<1xf32> -> tensor<5x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %e on @tp grid_axes = [0] : tensor<5x4xf32> -> tensor<5x4xf32>
// CHECK-NEXT: func.return %[[SUM]]

// -----

// Heads split: a reshape and a transpose carry the split to the head axis;
// a split result is gathered where the function returns it.
// CHECK-LABEL: func.func @heads
shard.grid @tp(shape = 2)
func.func @heads(%x: tensor<2x4xf32>) -> tensor<2x2x2xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<4x4xf32>} : tensor<4x4xf32>
  %cols = shard.sharding @tp split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %cols : tensor<4x4xf32>
  %y = tir.matmul %x, %ws : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %h = tir.reshape %y : tensor<2x4xf32> -> tensor<2x2x2xf32>
  %t = tir.transpose %h perm [1, 0, 2] : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
  func.return %t : tensor<2x2x2xf32>
}
// CHECK:      %y = tir.matmul %x, %{{.*}} : tensor<2x4xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %h = tir.reshape %y : tensor<2x2xf32> -> tensor<2x1x2xf32>
// CHECK-NEXT: %t = tir.transpose %h perm [1, 0, 2] : tensor<2x1x2xf32> -> tensor<1x2x2xf32>
// CHECK-NEXT: %[[ALL:.*]] = shard.all_gather %t on @tp grid_axes = [0] gather_axis = 0 : tensor<1x2x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: func.return %[[ALL]]

// -----

// A row layer alone takes its block of the replicated input (Paddle's
// `_c_split`, no communication) and all-reduces.
// CHECK-LABEL: func.func @row_alone
shard.grid @tp(shape = 2)
func.func @row_alone(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x4xf32>} : tensor<8x4xf32>
  %rows = shard.sharding @tp split_axes = [[0], []] : !shard.sharding
  %ws = shard.shard %w to %rows : tensor<8x4xf32>
  %y = tir.matmul %x, %ws : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK:      %[[W:.*]] = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[X:.*]] = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %y = tir.matmul %[[X]], %[[W]] : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %y on @tp grid_axes = [0] : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: func.return %[[SUM]]
