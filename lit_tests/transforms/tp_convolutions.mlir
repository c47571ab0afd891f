// RUN: forge-opt %s -p 'tensor-parallel{devices=2}' --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'tensor-parallel{devices=2},tp-partition' --split-input-file | filecheck %s --check-prefix=PART

// Megatron's pairing for convolutions: the first output-channel parallel
// (its weight split along O), the one after the per-channel op
// input-channel parallel (along I), its bias in device 0's partial sum
// (zeros on the others), all-reduced once.
// CHECK-LABEL: func.func @pair
// PART-LABEL:  func.func @pair
func.func @pair(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x4x3x3xf32>} : tensor<8x4x3x3xf32>
  %b1 = tir.constant {value = dense<0.5> : tensor<8xf32>} : tensor<8xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<4x8x1x1xf32>} : tensor<4x8x1x1xf32>
  %b2 = tir.constant {value = dense<0.25> : tensor<4xf32>} : tensor<4xf32>
  %h = tir.conv2d %x, %w1, %b1 {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  %r = tir.unary relu %h : tensor<1x8x8x8xf32> -> tensor<1x8x8x8xf32>
  %y = tir.conv2d %r, %w2, %b2 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x8x8xf32>, tensor<4x8x1x1xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}
// CHECK:      %[[O:.*]] = shard.sharding @tp split_axes = {{\[\[}}0], [], [], []] : !shard.sharding
// CHECK-NEXT: %[[W1:.*]] = shard.shard %w1 to %[[O]] : tensor<8x4x3x3xf32>
// CHECK-NEXT: %h = tir.conv2d %x, %[[W1]], %b1
// CHECK-NEXT: %r = tir.unary relu %h
// CHECK-NEXT: %[[I:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0], [], []] : !shard.sharding
// CHECK-NEXT: %[[W2:.*]] = shard.shard %w2 to %[[I]] : tensor<4x8x1x1xf32>
// CHECK-NEXT: %y = tir.conv2d %r, %[[W2]], %b2
// PART:      %[[W1:.*]] = shard.all_slice %w1 on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4x3x3xf32> -> tensor<4x4x3x3xf32>
// PART-NEXT: %[[B1:.*]] = shard.all_slice %b1 on @tp grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
// PART-NEXT: %h = tir.conv2d %x, %[[W1]], %[[B1]] {{{.*}}} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %r = tir.unary relu %h : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
// PART-NEXT: %[[W2:.*]] = shard.all_slice %w2 on @tp grid_axes = [0] slice_axis = 1 : tensor<4x8x1x1xf32> -> tensor<4x4x1x1xf32>
// PART-NEXT: %[[FLAGS:.*]] = tir.constant {value = dense<[true, false]> : tensor<2xi1>} : tensor<2xi1>
// PART-NEXT: %[[FIRST:.*]] = shard.all_slice %[[FLAGS]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi1> -> tensor<1xi1>
// PART-NEXT: %[[ZERO:.*]] = tir.full 0.000000e+00 : f32 : tensor<1xf32>
// PART-NEXT: %[[B2:.*]] = tir.where %[[FIRST]], %b2, %[[ZERO]] : tensor<1xi1>, tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
// PART-NEXT: %y = tir.conv2d %r, %[[W2]], %[[B2]] {{{.*}}} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>, tensor<4xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %[[SUM:.*]] = shard.all_reduce %y on @tp grid_axes = [0] : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
// PART-NEXT: func.return %[[SUM]]

// -----

// A depthwise convolution of split channels takes its devices' groups
// (half of them each); pooling and a spatial mean stay split by channels.
// PART-LABEL: func.func @depthwise
func.func @depthwise(%x: tensor<1x4x8x8xf32>) -> tensor<1x8x1x1xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x4x1x1xf32>} : tensor<8x4x1x1xf32>
  %wd = tir.constant {value = dense<0.5> : tensor<8x1x3x3xf32>} : tensor<8x1x3x3xf32>
  %h = tir.conv2d %x, %w1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x8x8x8xf32>
  %d = tir.conv2d %h, %wd {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 8 : i64} : (tensor<1x8x8x8xf32>, tensor<8x1x3x3xf32>) -> tensor<1x8x8x8xf32>
  %p = tir.pool2d max %d {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : tensor<1x8x8x8xf32> -> tensor<1x8x4x4xf32>
  %m = tir.reduce mean %p {axes = array<i64: 2, 3>, keepdims = 1 : i64} : tensor<1x8x4x4xf32> -> tensor<1x8x1x1xf32>
  func.return %m : tensor<1x8x1x1xf32>
}
// PART:      %h = tir.conv2d %x, %{{.*}} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %[[WD:.*]] = shard.all_slice %wd on @tp grid_axes = [0] slice_axis = 0 : tensor<8x1x3x3xf32> -> tensor<4x1x3x3xf32>
// PART-NEXT: %d = tir.conv2d %h, %[[WD]] {{{.*}}groups = 4 : i64} : (tensor<1x4x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %p = tir.pool2d max %d {{{.*}}} : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
// PART-NEXT: %m = tir.reduce mean %p {{{.*}}} : tensor<1x4x4x4xf32> -> tensor<1x4x1x1xf32>
// PART-NEXT: %{{.*}} = shard.all_gather %m on @tp grid_axes = [0] gather_axis = 1 : tensor<1x4x1x1xf32> -> tensor<1x8x1x1xf32>

// -----

// Transposed convolutions hold (Cin, Cout/groups) weights: output channels
// are axis 1 of theirs, input channels axis 0.
// PART-LABEL: func.func @transposed
func.func @transposed(%x: tensor<1x4x4x4xf32>) -> tensor<1x4x8x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<4x8x2x2xf32>} : tensor<4x8x2x2xf32>
  %w2 = tir.constant {value = dense<1.0> : tensor<8x4x1x1xf32>} : tensor<8x4x1x1xf32>
  %u = tir.conv_transpose2d %x, %w1 {strides = array<i64: 2, 2>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<4x8x2x2xf32>) -> tensor<1x8x8x8xf32>
  %y = tir.conv_transpose2d %u, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>, output_padding = array<i64: 0, 0>, groups = 1 : i64} : (tensor<1x8x8x8xf32>, tensor<8x4x1x1xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}
// PART:      %[[W1:.*]] = shard.all_slice %w1 on @tp grid_axes = [0] slice_axis = 1 : tensor<4x8x2x2xf32> -> tensor<4x4x2x2xf32>
// PART-NEXT: %u = tir.conv_transpose2d %x, %[[W1]] {{{.*}}} : (tensor<1x4x4x4xf32>, tensor<4x4x2x2xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %[[W2:.*]] = shard.all_slice %w2 on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4x1x1xf32> -> tensor<4x4x1x1xf32>
// PART-NEXT: %y = tir.conv_transpose2d %u, %[[W2]] {{{.*}}} : (tensor<1x4x8x8xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x8x8xf32>
// PART-NEXT: %{{.*}} = shard.all_reduce %y on @tp grid_axes = [0]

// -----

// Groups the devices do not divide: the convolution stays replicated, and
// the layer's record says why.
// CHECK: tensor_parallel.layers = [{node = "tir.conv2d", kind = "conv", case = "replicated", {{.*}}reason = "its groups (3) do not divide by 2 devices", unshared = true}]
// CHECK-LABEL: func.func @three_groups
func.func @three_groups(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<3x1x3x3xf32>} : tensor<3x1x3x3xf32>
  %y = tir.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 3 : i64} : (tensor<1x3x4x4xf32>, tensor<3x1x3x3xf32>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}
// CHECK-NEXT: %w = tir.constant
// CHECK-NEXT: %y = tir.conv2d %x, %w

// -----

// Channels taken apart and joined again (YOLOv8's C2f): the convolution
// before the Split has its output channels permuted so each device holds
// its block of both parts, the Split takes each device's block apart, the
// Concat joins each device's blocks, and the convolution after it reads
// its input channels in that order: one all-reduce, no all-gather.
// CHECK-LABEL: func.func @channel_parts
// PART-LABEL:  func.func @channel_parts
func.func @channel_parts(%x: tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x4x1x1xf32>} : tensor<8x4x1x1xf32>
  %b1 = tir.constant {value = dense<0.5> : tensor<8xf32>} : tensor<8xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<4x8x1x1xf32>} : tensor<4x8x1x1xf32>
  %h = tir.conv2d %x, %w1, %b1 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x1x1xf32>, tensor<8xf32>) -> tensor<1x8x8x8xf32>
  %s = tir.unary sigmoid %h : tensor<1x8x8x8xf32> -> tensor<1x8x8x8xf32>
  %a = tir.binary mul %h, %s : tensor<1x8x8x8xf32>, tensor<1x8x8x8xf32> -> tensor<1x8x8x8xf32>
  %p, %q = tir.split %a axis 1 sections [4, 4] : tensor<1x8x8x8xf32> -> tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32>
  %c = tir.concat %q, %p axis 1 : tensor<1x4x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<1x8x8x8xf32>
  %y = tir.conv2d %c, %w2 {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x8x8x8xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}
// CHECK:      %[[ORDER:.*]] = tir.constant {value = dense<[0, 1, 4, 5, 2, 3, 6, 7]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %[[W1:.*]] = tir.gather %w1, %[[ORDER]] {axis = 0 : i64}
// CHECK:      %a = tir.binary mul %h, %s
// CHECK-NEXT: %[[BLOCKS:.*]] = tir.reshape %a : tensor<1x8x8x8xf32> -> tensor<1x2x4x8x8xf32>
// CHECK-NEXT: %[[P:.*]], %[[Q:.*]] = tir.split %[[BLOCKS]] axis 2 sections [2, 2]
// CHECK-NEXT: %p = tir.reshape %[[P]] : tensor<1x2x2x8x8xf32> -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %q = tir.reshape %[[Q]] : tensor<1x2x2x8x8xf32> -> tensor<1x4x8x8xf32>
// CHECK-NEXT: %[[QB:.*]] = tir.reshape %q : tensor<1x4x8x8xf32> -> tensor<1x2x2x8x8xf32>
// CHECK-NEXT: %[[PB:.*]] = tir.reshape %p : tensor<1x4x8x8xf32> -> tensor<1x2x2x8x8xf32>
// CHECK-NEXT: %[[JOINED:.*]] = tir.concat %[[QB]], %[[PB]] axis 2 : tensor<1x2x2x8x8xf32>, tensor<1x2x2x8x8xf32> -> tensor<1x2x4x8x8xf32>
// CHECK-NEXT: %c = tir.reshape %[[JOINED]] : tensor<1x2x4x8x8xf32> -> tensor<1x8x8x8xf32>
// CHECK-NEXT: %[[ORDER2:.*]] = tir.constant {value = dense<[0, 1, 4, 5, 2, 3, 6, 7]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %{{.*}} = tir.gather %w2, %[[ORDER2]] {axis = 1 : i64}
// PART-NOT:   shard.all_gather
// PART:       shard.all_reduce
// PART-NOT:   shard.all_gather

// -----

// A matmul of a replicated image by a constant the compiler made (a bilinear
// Resize's interpolation matrix) stays replicated: split by its columns, the
// image would be split by pixels. A model's weight on an image whose
// channels are last (ConvNeXt's Linear) is column-parallel as any Linear.
// CHECK-LABEL: func.func @image_matmuls
// PART-LABEL:  func.func @image_matmuls
func.func @image_matmuls(%x: tensor<1x4x8x8xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x8x8x16xf32>) {
  %m = tir.constant {value = dense<0.5> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w = tir.constant {value = dense<1.0> : tensor<4x16xf32>, weight_name = "pwconv"} : tensor<4x16xf32>
  %up = tir.matmul %x, %m : tensor<1x4x8x8xf32>, tensor<8x16xf32> -> tensor<1x4x8x16xf32>
  %last = tir.transpose %x perm [0, 2, 3, 1] : tensor<1x4x8x8xf32> -> tensor<1x8x8x4xf32>
  %y = tir.matmul %last, %w : tensor<1x8x8x4xf32>, tensor<4x16xf32> -> tensor<1x8x8x16xf32>
  func.return %up, %y : tensor<1x4x8x16xf32>, tensor<1x8x8x16xf32>
}
// CHECK:      %up = tir.matmul %x, %m : tensor<1x4x8x8xf32>, tensor<8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT: %last = tir.transpose %x
// CHECK-NEXT: %[[C:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[W:.*]] = shard.shard %w to %[[C]] : tensor<4x16xf32>
// CHECK-NEXT: %y = tir.matmul %last, %[[W]]
