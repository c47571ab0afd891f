// RUN: forge-opt %s -p 'tensor-parallel{devices=2},tp-partition' | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=2},tp-partition' | forge-opt | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=2},tp-partition' | xdsl-opt | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=2}' | xdsl-opt -p tp-partition | filecheck %s

// Grouped-query attention with a KV cache, as Optimum's LLaMA export lowers
// to tir: 4 query heads over 2 KV heads (head size 2), the past joined to the
// new keys, each KV head repeated for its 2 query heads by Expand (broadcast)
// and Reshape, the keys also read as values. On 2 devices each holds 2
// query heads and the KV head they read: its blocks of the projections, its
// head of the past (arriving split, shard.split_axis) and of the present
// (returned split), and one all-reduce, after the output projection.
// CHECK-LABEL: func.func @gqa
// CHECK-SAME:    %past: tensor<1x1x1x2xf32> {shard.split_axis = 1 : i64}
// CHECK-SAME:    -> (tensor<1x2x8xf32>, tensor<1x1x3x2xf32> {shard.split_axis = 1 : i64})
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
// CHECK:      %q0 = tir.matmul %x, %{{.*}} : tensor<1x2x8xf32>, tensor<8x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %q1 = tir.reshape %q0 : tensor<1x2x4xf32> -> tensor<1x2x2x2xf32>
// CHECK-NEXT: %q = tir.transpose %q1 perm [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
// CHECK:      %k0 = tir.matmul %x, %{{.*}} : tensor<1x2x8xf32>, tensor<8x2xf32> -> tensor<1x2x2xf32>
// CHECK-NEXT: %k1 = tir.reshape %k0 : tensor<1x2x2xf32> -> tensor<1x2x1x2xf32>
// CHECK-NEXT: %k = tir.transpose %k1 perm [0, 2, 1, 3] : tensor<1x2x1x2xf32> -> tensor<1x1x2x2xf32>
// CHECK-NEXT: %present = tir.concat %past, %k axis 2 : tensor<1x1x1x2xf32>, tensor<1x1x2x2xf32> -> tensor<1x1x3x2xf32>
// CHECK-NEXT: %r0 = tir.reshape %present : tensor<1x1x3x2xf32> -> tensor<1x1x1x3x2xf32>
// CHECK-NEXT: %r1 = tir.broadcast %r0 : tensor<1x1x1x3x2xf32> -> tensor<1x1x2x3x2xf32>
// CHECK-NEXT: %kv = tir.reshape %r1 : tensor<1x1x2x3x2xf32> -> tensor<1x2x3x2xf32>
// CHECK-NEXT: %kt = tir.transpose %kv perm [0, 1, 3, 2] : tensor<1x2x3x2xf32> -> tensor<1x2x2x3xf32>
// CHECK-NEXT: %s = tir.matmul %q, %kt : tensor<1x2x2x2xf32>, tensor<1x2x2x3xf32> -> tensor<1x2x2x3xf32>
// CHECK-NEXT: %p = tir.softmax %s
// CHECK-NEXT: %a = tir.matmul %p, %kv : tensor<1x2x2x3xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x2x2xf32>
// CHECK-NEXT: %a1 = tir.transpose %a perm [0, 2, 1, 3] : tensor<1x2x2x2xf32> -> tensor<1x2x2x2xf32>
// CHECK-NEXT: %a2 = tir.reshape %a1 : tensor<1x2x2x2xf32> -> tensor<1x2x4xf32>
// CHECK:      %y = tir.matmul %a2, %{{.*}} : tensor<1x2x4xf32>, tensor<4x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: %[[SUM:.*]] = shard.all_reduce %y on @tp grid_axes = [0] : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT: func.return %[[SUM]], %present : tensor<1x2x8xf32>, tensor<1x1x3x2xf32>

