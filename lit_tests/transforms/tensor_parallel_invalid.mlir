// RUN: not forge-opt %s -p 'tensor-parallel{devices=3 require-sharded=true}' 2>&1 | filecheck %s

// A Linear whose split dimension the devices do not divide stays replicated;
// with require-sharded that is an error naming it, the dimension and the
// device count.
func.func @odd(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %y = tir.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32> loc("fc")
  func.return %y : tensor<4x16xf32>
}
// CHECK: forge-opt: error: 1 layer of at least min-size 0 weight elements would stay replicated on every device (--require-sharded): node 'fc' (tir.matmul): its output columns (16) do not divide by 3 devices
