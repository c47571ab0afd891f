// RUN: forge-opt %s -p 'static-kv-cache{length=4}' | filecheck %s
// RUN: not forge-opt %s -p 'static-kv-cache{length=3}' 2>&1 | filecheck %s --check-prefix=SHORT

// A growing cache (present = Concat(past, new) on axis 2) as one of 4 positions: a new input,
// cache_position, says where the step writes; a one-hot [4, 1] matrix places the new entry and a
// Where keeps the other positions. Attention still reads the Concat, as the model does.
// CHECK: builtin.module attributes {forge.static_cache = {length = dense<4> : tensor<i64>, position = "cache_position"}}
// CHECK-LABEL: func.func @decoder
// CHECK-SAME: (%past: tensor<1x2x4x8xf32> {onnx.name = "past_key_values.0.key"}, %new: tensor<1x2x1x8xf32> {onnx.name = "k"}, %cache_position: tensor<1xi64> {onnx.name = "cache_position"})
// CHECK-SAME: -> (tensor<1x2x5x8xf32> {onnx.name = "attention"}, tensor<1x2x4x8xf32> {onnx.name = "present.0.key"})
func.func @decoder(%past: tensor<1x2x4x8xf32> {onnx.name = "past_key_values.0.key"}, %new: tensor<1x2x1x8xf32> {onnx.name = "k"}) -> (tensor<1x2x5x8xf32> {onnx.name = "attention"}, tensor<1x2x5x8xf32> {onnx.name = "present.0.key"}) {
  %present = tir.concat %past, %new axis 2 : tensor<1x2x4x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x5x8xf32>
  %read = tir.unary exp %present : tensor<1x2x5x8xf32> -> tensor<1x2x5x8xf32>
  func.return %read, %present : tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>
}
// CHECK-NEXT: %present = tir.concat %past, %new axis 2 : tensor<1x2x4x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x5x8xf32>
// CHECK-NEXT: %read = tir.unary exp %present
// CHECK-NEXT: %0 = tir.constant {value = dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>} : tensor<4x1xi64>
// CHECK-NEXT: %1 = tir.constant {value = dense<0> : tensor<1x1xi64>} : tensor<1x1xi64>
// CHECK-NEXT: %2 = tir.binary add %cache_position, %1 : tensor<1xi64>, tensor<1x1xi64> -> tensor<1x1xi64>
// CHECK-NEXT: %3 = tir.binary eq %0, %2 : tensor<4x1xi64>, tensor<1x1xi64> -> tensor<4x1xi1>
// CHECK-NEXT: %4 = tir.constant {value = dense<1> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NEXT: %5 = tir.binary add %cache_position, %4 : tensor<1xi64>, tensor<1xi64> -> tensor<1xi64>
// CHECK-NEXT: %6 = tir.binary ge %0, %cache_position : tensor<4x1xi64>, tensor<1xi64> -> tensor<4x1xi1>
// CHECK-NEXT: %7 = tir.binary lt %0, %5 : tensor<4x1xi64>, tensor<1xi64> -> tensor<4x1xi1>
// CHECK-NEXT: %8 = tir.binary and %6, %7 : tensor<4x1xi1>, tensor<4x1xi1> -> tensor<4x1xi1>
// CHECK-NEXT: %9 = tir.cast %3 : tensor<4x1xi1> -> tensor<4x1xf32>
// CHECK-NEXT: %10 = tir.reshape %9 : tensor<4x1xf32> -> tensor<1x1x4x1xf32>
// CHECK-NEXT: %11 = tir.matmul %10, %new : tensor<1x1x4x1xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: %present_0_key = tir.where %8, %11, %past : tensor<4x1xi1>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %read, %present_0_key : tensor<1x2x5x8xf32>, tensor<1x2x4x8xf32>

// SHORT: forge-opt: error: static-kv-cache: 'past_key_values.0.key' holds 4 positions, not 3: import the model with its past length set to 3 (--dim past_sequence_length=3)
