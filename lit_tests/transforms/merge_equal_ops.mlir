// RUN: forge-opt %s -p merge-equal-ops --split-input-file | filecheck %s

// Two branches reading one input through equal constants compute one value.
// CHECK-LABEL: func.func @twice
func.func @twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = tir.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %b = tir.constant {value = dense<2.0> : tensor<f32>} : tensor<f32>
  %p = tir.binary mul %x, %a : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %q = tir.binary mul %x, %b : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %r = tir.unary relu %p : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = tir.unary relu %q : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %r, %s : tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK-NEXT: %a = tir.constant {value = dense<2.000000e+00> : tensor<f32>} : tensor<f32>
// CHECK-NEXT: %p = tir.binary mul %x, %a
// CHECK-NEXT: %r = tir.unary relu %p
// CHECK-NEXT: func.return %r, %r

// -----

// Model weights are never compared, even when equal: they stay two, as do the ops
// reading them; so do ops that differ in a property.
// CHECK-LABEL: func.func @weights
func.func @weights(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %u = tir.constant {value = dense<1.0> : tensor<8xf32>, weight_name = "u"} : tensor<8xf32>
  %v = tir.constant {value = dense<1.0> : tensor<8xf32>, weight_name = "v"} : tensor<8xf32>
  %p = tir.binary add %x, %u : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %q = tir.binary add %x, %v : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %s = tir.binary sub %x, %u : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  func.return %p, %q, %s : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK-NEXT: %u = tir.constant
// CHECK-NEXT: %v = tir.constant
// CHECK-NEXT: %p = tir.binary add %x, %u
// CHECK-NEXT: %q = tir.binary add %x, %v
// CHECK-NEXT: %s = tir.binary sub %x, %u
// CHECK-NEXT: func.return %p, %q, %s

// -----

// Two readers' slices of one weight (an unrolled recurrence's, once a step)
// are one block a device; a slice along another axis stays its own.
// CHECK-LABEL: func.func @one_block
shard.grid @tp(shape = 2)
func.func @one_block(%h: tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<4x16xf32>) {
  %w = tir.constant {value = dense<1.0> : tensor<8x16xf32>, weight_name = "w"} : tensor<8x16xf32>
  %a = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  %p = tir.matmul %h, %a : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  %b = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 1 : tensor<8x16xf32> -> tensor<8x8xf32>
  %q = tir.matmul %p, %b : tensor<1x8xf32>, tensor<8x8xf32> -> tensor<1x8xf32>
  %c = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<8x16xf32> -> tensor<4x16xf32>
  func.return %p, %q, %c : tensor<1x8xf32>, tensor<1x8xf32>, tensor<4x16xf32>
}
// CHECK-NEXT: %w = tir.constant
// CHECK-NEXT: %a = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 1
// CHECK-NEXT: %p = tir.matmul %h, %a
// CHECK-NEXT: %q = tir.matmul %p, %a
// CHECK-NEXT: %c = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0
// CHECK-NEXT: func.return %p, %q, %c
