// RUN: forge-opt %s -p combine-all-reduces --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'combine-all-reduces{max-bytes=4}' --split-input-file | filecheck %s --check-prefix=SMALL

// A quantization's range: the maximum of the input's negation is all-reduced
// and read before the input's maximum is made. The maximum is made first
// (moved up), and both travel as one all-reduce of 2 elements, sliced back.
// CHECK-LABEL: func.func @range
// CHECK-NEXT:  %n = tir.unary neg %x
// CHECK-NEXT:  %lo = tir.reduce max %n
// CHECK-NEXT:  %hi = tir.reduce max %x
// CHECK-NEXT:  %[[A:.*]] = tir.reshape %lo : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT:  %[[B:.*]] = tir.reshape %hi : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT:  %[[J:.*]] = tir.concat %[[A]], %[[B]] axis 0 : tensor<1xf32>, tensor<1xf32> -> tensor<2xf32>
// CHECK-NEXT:  %[[R:.*]] = shard.all_reduce %[[J]] on @tp grid_axes = [0] reduction = max : tensor<2xf32> -> tensor<2xf32>
// CHECK-NEXT:  %[[S0:.*]] = tir.strided_slice %[[R]] axes [0] begin [0] end [1] strides [1] : tensor<2xf32> -> tensor<1xf32>
// CHECK-NEXT:  %[[LO:.*]] = tir.reshape %[[S0]] : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT:  %[[S1:.*]] = tir.strided_slice %[[R]] axes [0] begin [1] end [2] strides [1] : tensor<2xf32> -> tensor<1xf32>
// CHECK-NEXT:  %[[HI:.*]] = tir.reshape %[[S1]] : tensor<1xf32> -> tensor<f32>
// CHECK-NEXT:  %min = tir.unary neg %[[LO]]
// CHECK-NEXT:  func.return %min, %[[HI]]
// With a combined message of at most 4 bytes, each stays alone:
// SMALL-LABEL: func.func @range
// SMALL-COUNT-2: shard.all_reduce {{.*}} : tensor<f32> -> tensor<f32>
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @range(%x: tensor<4x8xf32>) -> (tensor<f32>, tensor<f32>) {
    %n = tir.unary neg %x : tensor<4x8xf32> -> tensor<4x8xf32>
    %lo = tir.reduce max %n {axes = array<i64: 0, 1>, keepdims = 0 : i64} : tensor<4x8xf32> -> tensor<f32>
    %a = shard.all_reduce %lo on @tp grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
    %min = tir.unary neg %a : tensor<f32> -> tensor<f32>
    %hi = tir.reduce max %x {axes = array<i64: 0, 1>, keepdims = 0 : i64} : tensor<4x8xf32> -> tensor<f32>
    %b = shard.all_reduce %hi on @tp grid_axes = [0] reduction = max : tensor<f32> -> tensor<f32>
    func.return %min, %b : tensor<f32>, tensor<f32>
  }
}

// -----

// Two sums, neither read before the other is made: one all-reduce, before
// the first read, of both flattened.
// CHECK-LABEL: func.func @sums
// CHECK-NEXT:  %[[A:.*]] = tir.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:  %[[B:.*]] = tir.reshape %y : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:  %[[J:.*]] = tir.concat %[[A]], %[[B]] axis 0 : tensor<6xf32>, tensor<4xf32> -> tensor<10xf32>
// CHECK-NEXT:  %[[R:.*]] = shard.all_reduce %[[J]] on @tp grid_axes = [0] : tensor<10xf32> -> tensor<10xf32>
// CHECK-NEXT:  %[[S0:.*]] = tir.strided_slice %[[R]] axes [0] begin [0] end [6] strides [1] : tensor<10xf32> -> tensor<6xf32>
// CHECK-NEXT:  %[[X:.*]] = tir.reshape %[[S0]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT:  %[[S1:.*]] = tir.strided_slice %[[R]] axes [0] begin [6] end [10] strides [1] : tensor<10xf32> -> tensor<4xf32>
// CHECK-NEXT:  %[[Y:.*]] = tir.reshape %[[S1]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:  func.return %[[X]], %[[Y]]
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @sums(%x: tensor<2x3xf32>, %y: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<4xf32>) {
    %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<2x3xf32> -> tensor<2x3xf32>
    %b = shard.all_reduce %y on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    func.return %a, %b : tensor<2x3xf32>, tensor<4xf32>
  }
}

// -----

// The second sum reads the first: two messages, in order.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:  %a = shard.all_reduce %x
// CHECK-NEXT:  %h = tir.unary neg %a
// CHECK-NEXT:  %b = shard.all_reduce %h
// CHECK-NEXT:  func.return %b
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %h = tir.unary neg %a : tensor<4xf32> -> tensor<4xf32>
    %b = shard.all_reduce %h on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    func.return %b : tensor<4xf32>
  }
}

// -----

// A sum and a maximum, and sums of two element types, do not travel together.
// CHECK-LABEL: func.func @unlike
// CHECK-NEXT:  %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<4xf32>
// CHECK-NEXT:  %b = shard.all_reduce %x on @tp grid_axes = [0] reduction = max : tensor<4xf32>
// CHECK-NEXT:  %c = shard.all_reduce %i on @tp grid_axes = [0] : tensor<4xi32>
// CHECK-NEXT:  func.return %a, %b, %c
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @unlike(%x: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>) {
    %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %b = shard.all_reduce %x on @tp grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
    %c = shard.all_reduce %i on @tp grid_axes = [0] : tensor<4xi32> -> tensor<4xi32>
    func.return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>
  }
}

// -----

// The second operand is made by more ops after the first read than are
// moved up for a message (8): two all-reduces, the program's order kept.
// CHECK-LABEL: func.func @far
// CHECK:       %a = shard.all_reduce %x
// CHECK-NEXT:  %r = tir.unary neg %a
// CHECK:       %b = shard.all_reduce %y8
builtin.module {
  shard.grid @tp(shape = 2)
  func.func @far(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    %r = tir.unary neg %a : tensor<4xf32> -> tensor<4xf32>
    %y0 = tir.unary neg %y : tensor<4xf32> -> tensor<4xf32>
    %y1 = tir.unary neg %y0 : tensor<4xf32> -> tensor<4xf32>
    %y2 = tir.unary neg %y1 : tensor<4xf32> -> tensor<4xf32>
    %y3 = tir.unary neg %y2 : tensor<4xf32> -> tensor<4xf32>
    %y4 = tir.unary neg %y3 : tensor<4xf32> -> tensor<4xf32>
    %y5 = tir.unary neg %y4 : tensor<4xf32> -> tensor<4xf32>
    %y6 = tir.unary neg %y5 : tensor<4xf32> -> tensor<4xf32>
    %y7 = tir.unary neg %y6 : tensor<4xf32> -> tensor<4xf32>
    %y8 = tir.unary neg %y7 : tensor<4xf32> -> tensor<4xf32>
    %b = shard.all_reduce %y8 on @tp grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    func.return %r, %b : tensor<4xf32>, tensor<4xf32>
  }
}
