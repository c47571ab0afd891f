// RUN: not forge-opt %s -p tir-to-forge 2>&1 | filecheck %s
// A tir op with no Forge form names the pass that would decompose it.

func.func @split_left(%x: tensor<10x4xf32>) -> (tensor<5x4xf32>, tensor<5x4xf32>) {
  %a, %b = tir.split %x axis 0 sections [5, 5] : tensor<10x4xf32> -> tensor<5x4xf32>, tensor<5x4xf32>
  func.return %a, %b : tensor<5x4xf32>, tensor<5x4xf32>
}
// CHECK: forge-opt: error: 'tir.split': cannot be lowered to Forge: run 'lower-split' before 'tir-to-forge'
