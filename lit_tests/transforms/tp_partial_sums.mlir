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

// -----

// Two experts (an MoE layer at a fixed size): each expert's output times its
// routing weight, computed at run time, rows moved by a reshape, and the two
// summed: every step is linear in the partial sum nothing else reads, so the
// layer costs one all-reduce. The router's scores feed a softmax across all
// its columns: it stays whole (no all-gather of its output).
// CHECK-LABEL: func.func @experts
func.func @experts(%x: tensor<4x8xf32>) -> tensor<32xf32> {
  %router = tir.constant {value = dense<0.5> : tensor<8x2xf32>} : tensor<8x2xf32>
  %up0 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %down0 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %up1 = tir.constant {value = dense<3.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %down1 = tir.constant {value = dense<4.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %scores = tir.matmul %x, %router : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %p = tir.softmax %scores {axis = 1 : i64} : tensor<4x2xf32> -> tensor<4x2xf32>
  %p0 = tir.strided_slice %p axes [1] begin [0] end [1] strides [1] : tensor<4x2xf32> -> tensor<4x1xf32>
  %p1 = tir.strided_slice %p axes [1] begin [1] end [2] strides [1] : tensor<4x2xf32> -> tensor<4x1xf32>
  %h0 = tir.matmul %x, %up0 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %e0 = tir.matmul %h0, %down0 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %w0 = tir.binary mul %e0, %p0 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %r0 = tir.reshape %w0 : tensor<4x8xf32> -> tensor<32xf32>
  %h1 = tir.matmul %x, %up1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %e1 = tir.matmul %h1, %down1 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  %w1 = tir.binary mul %e1, %p1 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %r1 = tir.reshape %w1 : tensor<4x8xf32> -> tensor<32xf32>
  %y = tir.binary add %r0, %r1 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
// CHECK:      %scores = tir.matmul %x, %router : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %p = tir.softmax %scores {axis = 1 : i64} : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK:      %e0 = tir.matmul %h0, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %w0 = tir.binary mul %e0, %p0 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %r0 = tir.reshape %w0 : tensor<4x8xf32> -> tensor<32xf32>
// CHECK:      %e1 = tir.matmul %h1, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %w1 = tir.binary mul %e1, %p1 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %r1 = tir.reshape %w1 : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT: %y = tir.binary add %r0, %r1 : tensor<32xf32>, tensor<32xf32> -> tensor<32xf32>
// CHECK-NEXT: %[[Y:.*]] = shard.all_reduce %y on @tp grid_axes = [0] : tensor<32xf32> -> tensor<32xf32>
// CHECK-NEXT: func.return %[[Y]]

// -----

// A maximum over the split axis (DynamicQuantizeLinear's range of a column
// layer's output) is each device's maximum of its block, all-reduced by the
// maximum: a scalar crosses, not the activations.
// CHECK-LABEL: func.func @range_of_a_split_value
// CHECK:      %h = tir.matmul %x, %{{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %top = tir.reduce max %h {axes = array<i64: 0, 1>, keepdims = 0 : i64} : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT: %[[TOP:.*]] = shard.all_reduce %top on @tp grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
// CHECK-NEXT: func.return %[[TOP]]
func.func @range_of_a_split_value(%x: tensor<4x8xf32>) -> tensor<f32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %h = tir.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %top = tir.reduce max %h {axes = array<i64: 0, 1>, keepdims = 0 : i64} : tensor<4x16xf32> -> tensor<f32>
  func.return %top : tensor<f32>
}
