// RUN: not forge-opt %s 2>&1 | filecheck %s

// A function kind outside tir_functions' enum does not parse, and the error lists the kinds.
func.func @unknown_function(%a: tensor<4xf32>) -> tensor<4xf32> {
  %y = tir.unary cube %a : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK:      tir_unknown_function.mlir:5:18
// CHECK-NEXT:   %y = tir.unary cube %a : tensor<4xf32> -> tensor<4xf32>
// CHECK:      Expected `abs`, `atan`, `cos`, `erf`, `exp`, `gelu`, `gelu_tanh`, `log`, `neg`, `not`, `reciprocal`, `relu`, `sigmoid`, `sin`, `sqrt`, or `tanh`.
