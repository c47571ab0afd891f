// RUN: forge-opt %s -p 'tensor-parallel{devices=4 mesh="2x2"},tp-partition' | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=4 mesh="2x2"},tp-partition' | xdsl-opt | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=4 mesh="2x2"},tp-partition,collectives-on-mesh{mesh="2x2"}' \
// RUN:   | filecheck %s --check-prefix=MESH
// RUN: forge-opt %s -p 'tensor-parallel{devices=4 mesh="2x2"},tp-partition,collectives-on-mesh{mesh="2x2"},lower-split,tir-to-forge' \
// RUN:   -t stablehlo | filecheck %s --check-prefix=HLO

// Grouped-query attention (tp_gqa_attention.mlir's program: 4 query heads
// over 2 KV heads) on a 2x2 mesh. The 4 devices do not divide the 2 KV
// heads, but the 2 rows do: the K projection's weight is split over the
// grid's axis 0 alone (each row its KV head, whole along the row), so is
// the cache (shard.split_blocks: 2 blocks, device r*2+c holding block r),
// and where the repeated heads meet the query heads, split over every
// device, each device slices its column's head out of its row's (an
// all_slice along axis 1: no communication).
// CHECK:      shard.grid @tp(shape = 2x2)
// CHECK-LABEL: func.func @gqa
// CHECK-SAME:    %past: tensor<1x1x1x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64}
// CHECK-SAME:    -> (tensor<1x2x8xf32>, tensor<1x1x3x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64})
func.func @gqa(%x: tensor<1x2x8xf32>, %past: tensor<1x2x1x2xf32>) -> (tensor<1x2x8xf32>, tensor<1x2x3x2xf32>) {
  %wq = tir.constant {value = dense<1.0> : tensor<8x8xf32>} : tensor<8x8xf32>
  %wk = tir.constant {value = dense<1.0> : tensor<8x4xf32>} : tensor<8x4xf32>
  %wo = tir.constant {value = dense<1.0> : tensor<8x8xf32>} : tensor<8x8xf32>
  %q0 = tir.matmul %x, %wq : tensor<1x2x8xf32>, tensor<8x8xf32> -> tensor<1x2x8xf32>
  %q1 = tir.reshape %q0 : tensor<1x2x8xf32> -> tensor<1x2x4x2xf32>
  %q = tir.transpose %q1 perm [0, 2, 1, 3] : tensor<1x2x4x2xf32> -> tensor<1x4x2x2xf32>
  %k0 = tir.matmul %x, %wk : tensor<1x2x8xf32>, tensor<8x4xf32> -> tensor<1x2x4xf32>
  %k1 = tir.reshape %k0 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32>
  %k = tir.transpose %k1 perm [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
  %present = tir.concat %past, %k axis 2 : tensor<1x2x1x2xf32>, tensor<1x2x2x2xf32> -> tensor<1x2x3x2xf32>
  %r0 = tir.reshape %present : tensor<1x2x3x2xf32> -> tensor<1x2x1x3x2xf32>
  %r1 = tir.broadcast %r0 : tensor<1x2x1x3x2xf32> -> tensor<1x2x2x3x2xf32>
  %kv = tir.reshape %r1 : tensor<1x2x2x3x2xf32> -> tensor<1x4x3x2xf32>
  %kt = tir.transpose %kv perm [0, 1, 3, 2] : tensor<1x4x3x2xf32> -> tensor<1x4x2x3xf32>
  %s = tir.matmul %q, %kt : tensor<1x4x2x2xf32>, tensor<1x4x2x3xf32> -> tensor<1x4x2x3xf32>
  %p = tir.softmax %s {axis = 3 : i64} : tensor<1x4x2x3xf32> -> tensor<1x4x2x3xf32>
  %a = tir.matmul %p, %kv : tensor<1x4x2x3xf32>, tensor<1x4x3x2xf32> -> tensor<1x4x2x2xf32>
  %a1 = tir.transpose %a perm [0, 2, 1, 3] : tensor<1x4x2x2xf32> -> tensor<1x2x4x2xf32>
  %a2 = tir.reshape %a1 : tensor<1x2x4x2xf32> -> tensor<1x2x8xf32>
  %y = tir.matmul %a2, %wo : tensor<1x2x8xf32>, tensor<8x8xf32> -> tensor<1x2x8xf32>
  func.return %y, %present : tensor<1x2x8xf32>, tensor<1x2x3x2xf32>
}
// CHECK:      %{{.*}} = shard.all_slice %wq on @tp grid_axes = [0, 1] slice_axis = 1 : tensor<8x8xf32> -> tensor<8x2xf32>
// CHECK:      %[[WK:.*]] = shard.all_slice %wk on @tp grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %k0 = tir.matmul %x, %[[WK]] : tensor<1x2x8xf32>, tensor<8x2xf32> -> tensor<1x2x2xf32>
// CHECK-NEXT: %k1 = tir.reshape %k0 : tensor<1x2x2xf32> -> tensor<1x2x1x2xf32>
// CHECK-NEXT: %k = tir.transpose %k1 perm [0, 2, 1, 3] : tensor<1x2x1x2xf32> -> tensor<1x1x2x2xf32>
// CHECK-NEXT: %present = tir.concat %past, %k axis 2 : tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x3x2xf32>
// CHECK-NEXT: %r0 = tir.reshape %present : tensor<1x1x3x2xf32> -> tensor<1x1x1x3x2xf32>
// CHECK-NEXT: %r1 = tir.broadcast %r0 : tensor<1x1x1x3x2xf32> -> tensor<1x1x2x3x2xf32>
// CHECK-NEXT: %kv = tir.reshape %r1 : tensor<1x1x2x3x2xf32> -> tensor<1x2x3x2xf32>
// CHECK-NEXT: %kt = tir.transpose %kv perm [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
// CHECK-NEXT: %[[KT:.*]] = shard.all_slice %kt on @tp grid_axes = [1] slice_axis = 1 : tensor<1x2x2x3xf32> -> tensor<1x1x2x3xf32>
// CHECK-NEXT: %s = tir.matmul %q, %[[KT]] : tensor<1x1x2x2xf32>, tensor<1x1x2x3xf32> -> tensor<1x1x2x3xf32>
// CHECK-NEXT: %p = tir.softmax %s
// CHECK-NEXT: %[[V:.*]] = shard.all_slice %kv on @tp grid_axes = [1] slice_axis = 1 : tensor<1x2x3x2xf32> -> tensor<1x1x3x2xf32>
// CHECK-NEXT: %a = tir.matmul %p, %[[V]] : tensor<1x1x2x3xf32>, tensor<1x1x3x2xf32> -> tensor<1x1x2x2xf32>
// CHECK:      %[[SUM:.*]] = shard.all_reduce %y on @tp grid_axes = [0, 1] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: func.return %[[SUM]], %present : tensor<1x2x8xf32>, tensor<1x1x3x2xf32>

// On the mesh, the all-reduce over every device runs an axis at a time;
// the slices over one axis stay as they are.
// MESH:      shard.all_slice %wk on @tp grid_axes = [0] slice_axis = 1
// MESH:      shard.all_slice %kt on @tp grid_axes = [1] slice_axis = 1
// MESH:      %[[RS:.*]] = shard.reduce_scatter %y on @tp grid_axes = [1] scatter_axis = 2 {shard.line = 0 : i64} : tensor<1x2x8xf32> -> tensor<1x2x4xf32>
// MESH-NEXT: %[[AR:.*]] = shard.all_reduce %[[RS]] on @tp grid_axes = [0] {shard.line = 0 : i64} : tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// MESH-NEXT: %[[AG:.*]] = shard.all_gather %[[AR]] on @tp grid_axes = [1] gather_axis = 2 {shard.line = 0 : i64} : tensor<1x2x4xf32> -> tensor<1x2x8xf32>
// MESH-NEXT: func.return %[[AG]], %present

// As StableHLO, the cache split by rows makes the Shardy mesh two axes and
// its sharding the rows'; a slice over one grid axis starts at the
// device's row (partition id / C) or column (partition id mod C).
// HLO:      sdy.mesh @mesh = <["r"=2, "c"=2]>
// HLO:      sdy.manual_computation(%x, %past) in_shardings=[<@mesh, [{}, {}, {}]>, <@mesh, [{}, {"r"}, {}, {}]>]
// HLO-SAME:   out_shardings=[<@mesh, [{}, {}, {}]>, <@mesh, [{}, {"r"}, {}, {}]>] manual_axes={"r", "c"}
// HLO:      "stablehlo.divide"(%[[ID:[0-9]+]], %{{[0-9]+}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// HLO:      "stablehlo.dynamic_slice"(%wk,
// HLO:      "stablehlo.remainder"(%[[ID]], %{{[0-9]+}}) : (tensor<i64>, tensor<i64>) -> tensor<i64>
// HLO:      "stablehlo.dynamic_slice"(%kt,
