// RUN: not forge-opt %s -p 'static-kv-cache{length=4}' 2>&1 | filecheck %s

// A cache read other than by its Concat cannot be made static: the error names the op.
func.func @peeking(%past: tensor<1x2x4x8xf32> {onnx.name = "past_key_values.0.key"}, %new: tensor<1x2x1x8xf32> {onnx.name = "k"}) -> (tensor<1x2x4x8xf32> {onnx.name = "peek"}, tensor<1x2x5x8xf32> {onnx.name = "present.0.key"}) {
  %present = tir.concat %past, %new axis 2 : tensor<1x2x4x8xf32>, tensor<1x2x1x8xf32> -> tensor<1x2x5x8xf32>
  %peek = tir.unary exp %past : tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  func.return %peek, %present : tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>
}
// CHECK: forge-opt: error: 'tir.unary': reads the KV cache 'past_key_values.0.key' other than as the Concat with the step's new entries that makes 'present.0.key': its cache cannot be made static
