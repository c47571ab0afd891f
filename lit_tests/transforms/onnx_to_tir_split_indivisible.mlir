// RUN: not forge-opt %s -p onnx-to-tir 2>&1 | filecheck %s

func.func @indivisible(%x: tensor<10xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a, %b, %c = onnx.Split(%x) : (tensor<10xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) loc("s")
  func.return %a, %b, %c : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
// CHECK: forge-opt: error: node 's' (onnx.Split): dimension 10 does not divide into 3 equal parts
