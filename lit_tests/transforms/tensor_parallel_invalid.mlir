// RUN: not forge-opt %s -p 'tensor-parallel{devices=3}' 2>&1 | filecheck %s

// A Linear whose split dimension the devices do not divide names it, the
// dimension and the device count.
func.func @odd(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %y = tir.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32> loc("fc")
  func.return %y : tensor<4x16xf32>
}
// CHECK: forge-opt: error: node 'fc' (tir.matmul): a column-parallel Linear needs its output columns (16) to divide by the 3 devices
