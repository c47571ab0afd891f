// RUN: forge-opt %s -p 'partition-for-forge{stages=3}' | filecheck %s
// RUN: forge-opt %s -p 'partition-for-forge{stages=3}' | xdsl-opt | filecheck %s

// Three layers on three stages, cut where each layer starts. Layer 0's
// output is read by layers 1 and 2: it crosses to each on its own
// send/receive pair, sent once to each stage that reads it. The model's
// input reaches every stage from the host, not through a send. Stock
// xdsl-opt reads the result back.

func.func @three_layers(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %w0 = onnx.Constant() {value = dense<1.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %w1 = onnx.Constant() {value = dense<2.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %w2 = onnx.Constant() {value = dense<3.0> : tensor<4x4xf32>} : () -> tensor<4x4xf32>
  %a = onnx.MatMul(%x, %w0) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/layers.0/MatMul")
  %r = onnx.Relu(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("/layers.0/Relu")
  %b = onnx.MatMul(%r, %w1) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/layers.1/MatMul")
  %c = onnx.Add(%b, %r) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("/layers.1/Add")
  %d = onnx.MatMul(%c, %w2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("/layers.2/MatMul")
  %y = onnx.Add(%d, %r) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("/layers.2/Add")
  %z = onnx.Add(%y, %x) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("/layers.2/Add_1")
  func.return %z : tensor<2x4xf32>
}

// CHECK:       shard.grid @pipeline(shape = 3)
// CHECK-LABEL: func.func @three_layers
// CHECK-NEXT:    %r = func.call @graph_0(%x)
// CHECK-NEXT:    %r_1 = shard.send %r on @pipeline grid_axes = [0] destination = [1]
// CHECK-NEXT:    %r_2 = shard.send %r on @pipeline grid_axes = [0] destination = [2]
// CHECK-NEXT:    %r_3 = shard.recv %r_1 on @pipeline grid_axes = [0] source = [0]
// CHECK-NEXT:    %c = func.call @graph_1(%r_3)
// CHECK-NEXT:    %c_1 = shard.send %c on @pipeline grid_axes = [0] destination = [2]
// CHECK-NEXT:    %r_4 = shard.recv %r_2 on @pipeline grid_axes = [0] source = [0]
// CHECK-NEXT:    %c_2 = shard.recv %c_1 on @pipeline grid_axes = [0] source = [1]
// CHECK-NEXT:    %z = func.call @graph_2(%c_2, %r_4, %x)
// CHECK-NEXT:    func.return %z
// CHECK:       func.func private @graph_0(%x: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-SAME:    attributes {forge.device = "tt", forge.stage = 0 : i64}
// CHECK:       func.func private @graph_1(%r: tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-SAME:    attributes {forge.device = "tt", forge.stage = 1 : i64}
// CHECK:       func.func private @graph_2(%c: tensor<2x4xf32>, %r: tensor<2x4xf32>, %x: tensor<2x4xf32>)
// CHECK-SAME:    attributes {forge.device = "tt", forge.stage = 2 : i64}
