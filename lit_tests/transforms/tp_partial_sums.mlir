// RUN: forge-opt %s -p 'tensor-parallel{devices=2},tp-partition' --split-input-file | filecheck %s

// A parallel block (GPT-J, GPT-NeoX, Phi-2): attention and MLP read one
// input and their outputs are summed with the residual. Each row-parallel
// sum stays partial through the adds: the bias and the residual are added on
// device 0 only (zeros on the others), so the block costs one all-reduce.
// CHECK-LABEL: func.func @parallel_block
func.func @parallel_block(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %b2 = tir.constant {value = dense<0.5> : tensor<8xf32>} : tensor<8xf32>
  %w3 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w4 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %h = tir.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %m = tir.matmul %h, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %mb = tir.binary add %m, %b2 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %g = tir.matmul %x, %w3 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %a = tir.matmul %g, %w4 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %s = tir.binary add %a, %mb : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %y = tir.binary add %s, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// CHECK:      %m = tir.matmul %h, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[FLAGS:.*]] = tir.constant {value = dense<[true, false]> : tensor<2xi1>} : tensor<2xi1>
// CHECK-NEXT: %[[FIRST:.*]] = shard.all_slice %[[FLAGS]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi1> -> tensor<1xi1>
// CHECK-NEXT: %[[ZERO:.*]] = tir.full 0.000000e+00 : f32 : tensor<1xf32>
// CHECK-NEXT: %[[B2:.*]] = tir.where %[[FIRST]], %b2, %[[ZERO]] : tensor<1xi1>, tensor<8xf32>, tensor<1xf32> -> tensor<8xf32>
// CHECK-NEXT: %mb = tir.binary add %m, %[[B2]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK:      %a = tir.matmul %g, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %s = tir.binary add %a, %mb : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[ZERO2:.*]] = tir.full 0.000000e+00 : f32 : tensor<1xf32>
// CHECK-NEXT: %[[X:.*]] = tir.where %[[FIRST]], %x, %[[ZERO2]] : tensor<1xi1>, tensor<4x8xf32>, tensor<1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %y = tir.binary add %s, %[[X]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = shard.all_reduce %y on @tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: func.return %[[Y]]

// -----

// A partial sum that something else reads whole is all-reduced before the
// add (deferring would cost a second all-reduce).
// CHECK-LABEL: func.func @read_twice
func.func @read_twice(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %h = tir.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %m = tir.matmul %h, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %y = tir.binary add %m, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y, %m : tensor<4x8xf32>, tensor<4x8xf32>
}
// CHECK:      %m = tir.matmul %h, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[M:.*]] = shard.all_reduce %m on @tp grid_axes = [0] : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %y = tir.binary add %[[M]], %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: func.return %y, %[[M]]

// -----

// A partial sum added to a split value that nothing else reads: reduce-
// scattered to the split (each device sums only its block: half the bytes
// of an all-reduce), and the result stays split, as a ResNet block's
// downsample path meets its main path.
// CHECK-LABEL: func.func @reduce_scatter
func.func @reduce_scatter(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %w3 = tir.constant {value = dense<3.0> : tensor<8x8xf32>} : tensor<8x8xf32>
  %h = tir.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %p = tir.matmul %h, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %b = tir.matmul %x, %w3 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %y = tir.binary add %p, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// CHECK:      %b = tir.matmul %x, %{{.*}} : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[P:.*]] = shard.reduce_scatter %p on @tp grid_axes = [0] scatter_axis = 1 : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %y = tir.binary add %[[P]], %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %{{.*}} = shard.all_gather %y on @tp grid_axes = [0] gather_axis = 1 : tensor<4x4xf32> -> tensor<4x8xf32>
