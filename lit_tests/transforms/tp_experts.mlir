// RUN: forge-opt %s -p 'stack-experts,tensor-parallel{devices=2},tp-partition' | filecheck %s
// RUN: forge-opt %s -p 'stack-experts,tensor-parallel{devices=4},tp-partition' | filecheck %s --check-prefix=FOUR

// Expert parallelism: the experts' stacked weights split by experts, each
// device computing its expert whole on every token (the tokens replicated,
// the routing weights sliced at no cost); the sum over the experts is a
// partial sum on each device, all-reduced once. Two experts on four devices
// are each split as an MLP (FOUR): the up weights by columns, the down
// weights by rows, batched over the experts; the sum over them is a sum of
// partial sums, all-reduced once.
// CHECK-LABEL: func.func @two_experts
// FOUR-LABEL: func.func @two_experts
func.func @two_experts(%x: tensor<2x3xf32>, %route: tensor<2x2x1xf32>) -> tensor<2x3xf32> {
  %u0 = tir.constant {value = dense<1.0> : tensor<3x4xf32>, weight_name = "u0"} : tensor<3x4xf32>
  %d0 = tir.constant {value = dense<2.0> : tensor<4x3xf32>, weight_name = "d0"} : tensor<4x3xf32>
  %u1 = tir.constant {value = dense<3.0> : tensor<3x4xf32>, weight_name = "u1"} : tensor<3x4xf32>
  %d1 = tir.constant {value = dense<4.0> : tensor<4x3xf32>, weight_name = "d1"} : tensor<4x3xf32>
  %h0 = tir.matmul %x, %u0 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %a0 = tir.unary relu %h0 : tensor<2x4xf32> -> tensor<2x4xf32>
  %y0 = tir.matmul %a0, %d0 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %r0 = tir.strided_slice %route axes [0] begin [0] end [1] strides [1] : tensor<2x2x1xf32> -> tensor<1x2x1xf32>
  %w0 = tir.reshape %r0 : tensor<1x2x1xf32> -> tensor<2x1xf32>
  %t0 = tir.binary mul %y0, %w0 : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %h1 = tir.matmul %x, %u1 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %a1 = tir.unary relu %h1 : tensor<2x4xf32> -> tensor<2x4xf32>
  %y1 = tir.matmul %a1, %d1 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %r1 = tir.strided_slice %route axes [0] begin [1] end [2] strides [1] : tensor<2x2x1xf32> -> tensor<1x2x1xf32>
  %w1 = tir.reshape %r1 : tensor<1x2x1xf32> -> tensor<2x1xf32>
  %t1 = tir.binary mul %y1, %w1 : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %s = tir.binary add %t0, %t1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}
// CHECK-NEXT: %[[U:.*]] = tir.constant {value = dense<{{.*}}> : tensor<2x3x4xf32>, weight_name = "experts.weight"}
// CHECK-NEXT: %[[U1:.*]] = shard.all_slice %[[U]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2x3x4xf32> -> tensor<1x3x4xf32>
// CHECK-NEXT: %h = tir.matmul %x, %[[U1]] : tensor<2x3xf32>, tensor<1x3x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %a = tir.unary relu %h : tensor<1x2x4xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[D:.*]] = tir.constant {value = dense<{{.*}}> : tensor<2x4x3xf32>, weight_name = "experts.weight"}
// CHECK-NEXT: %[[D1:.*]] = shard.all_slice %[[D]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2x4x3xf32> -> tensor<1x4x3xf32>
// CHECK-NEXT: %y = tir.matmul %a, %[[D1]] : tensor<1x2x4xf32>, tensor<1x4x3xf32> -> tensor<1x2x3xf32>
// CHECK-NEXT: %[[R:.*]] = tir.reshape %route : tensor<2x2x1xf32> -> tensor<2x1x2x1xf32>
// CHECK-NEXT: %w = tir.reshape %[[R]] : tensor<2x1x2x1xf32> -> tensor<2x2x1xf32>
// CHECK-NEXT: %[[W:.*]] = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<2x2x1xf32> -> tensor<1x2x1xf32>
// CHECK-NEXT: %t = tir.binary mul %y, %[[W]] : tensor<1x2x3xf32>, tensor<1x2x1xf32> -> tensor<1x2x3xf32>
// CHECK-NEXT: %s = tir.reduce sum %t {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<1x2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_reduce %s on @tp grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: func.return %[[S]]
// FOUR:      %[[U:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 2 : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
// FOUR-NEXT: %h = tir.matmul %x, %[[U]] : tensor<2x3xf32>, tensor<2x3x1xf32> -> tensor<2x2x1xf32>
// FOUR-NEXT: %a = tir.unary relu %h : tensor<2x2x1xf32> -> tensor<2x2x1xf32>
// FOUR-NEXT: %{{.*}} = tir.constant
// FOUR-NEXT: %[[D:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<2x4x3xf32> -> tensor<2x1x3xf32>
// FOUR-NEXT: %y = tir.matmul %a, %[[D]] : tensor<2x2x1xf32>, tensor<2x1x3xf32> -> tensor<2x2x3xf32>
// FOUR:      %t = tir.binary mul %y, %w : tensor<2x2x3xf32>, tensor<2x2x1xf32> -> tensor<2x2x3xf32>
// FOUR-NEXT: %s = tir.reduce sum %t {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<2x2x3xf32> -> tensor<2x3xf32>
// FOUR-NEXT: %[[S:.*]] = shard.all_reduce %s on @tp grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
// FOUR-NEXT: func.return %[[S]]

// A batched matmul on a table the compiler computed (no weight_name: SAM's
// relative positions, gathered from a model weight) is not a mixture's
// experts: computed whole on every device, no collective.
// CHECK-LABEL: func.func @computed_table
// FOUR-LABEL: func.func @computed_table
func.func @computed_table(%q: tensor<4x6x8xf32>) -> tensor<4x6x4xf32> {
  %t = tir.constant {value = dense<0.5> : tensor<4x8x4xf32>} : tensor<4x8x4xf32>
  %r = tir.matmul %q, %t : tensor<4x6x8xf32>, tensor<4x8x4xf32> -> tensor<4x6x4xf32>
  func.return %r : tensor<4x6x4xf32>
}
// CHECK-NEXT: %t = tir.constant {value = dense<5.000000e-01> : tensor<4x8x4xf32>} : tensor<4x8x4xf32>
// CHECK-NEXT: %r = tir.matmul %q, %t : tensor<4x6x8xf32>, tensor<4x8x4xf32> -> tensor<4x6x4xf32>
// CHECK-NEXT: func.return %r : tensor<4x6x4xf32>
// FOUR-NEXT: %t = tir.constant {value = dense<5.000000e-01> : tensor<4x8x4xf32>} : tensor<4x8x4xf32>
// FOUR-NEXT: %r = tir.matmul %q, %t : tensor<4x6x8xf32>, tensor<4x8x4xf32> -> tensor<4x6x4xf32>
// FOUR-NEXT: func.return %r : tensor<4x6x4xf32>
