// RUN: not forge-opt %s -p 'partition-for-forge{stages=2 cpu-ops=Relu}' 2>&1 | filecheck %s
// RUN: not forge-opt %s -p 'partition-for-forge{stages=5}' 2>&1 | filecheck %s --check-prefix=FEW

// Every stage of a pipeline runs on a device: a node pinned to the CPU is
// named, with why; and a model has at least one node a stage.
func.func @two_layers(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w = onnx.Constant() {value = dense<1.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %a = onnx.MatMul(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/layers.0/MatMul")
  %r = onnx.Relu(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/layers.0/Relu")
  %y = onnx.MatMul(%r, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/layers.1/MatMul")
  func.return %y : tensor<2x4xf32>
}
// CHECK: forge-opt: error: partition-for-forge{stages=2}: every stage runs on a device, but node /layers.0/Relu (onnx.Relu) cannot: pinned to the CPU
// FEW: forge-opt: error: partition-for-forge{stages=5}: the model has 3 nodes to run, fewer than the stages
