// RUN: forge-opt %s -p stack-experts --split-input-file | filecheck %s

// Two experts (an MLP each, weighted by its slice of the routing), summed by
// a chain of adds: one MLP batched over the experts, on their weights stacked,
// and one sum over the expert axis. The slices are their source reshaped; the
// add of zeros that began the chain goes.
// CHECK-LABEL: func.func @two_experts
func.func @two_experts(%x: tensor<2x3xf32>, %route: tensor<2x2x1xf32>) -> tensor<2x3xf32> {
  %zero = tir.constant {value = dense<0.0> : tensor<2x3xf32>} : tensor<2x3xf32>
  %u0 = tir.constant {value = dense<1.0> : tensor<3x4xf32>, weight_name = "u0"} : tensor<3x4xf32>
  %d0 = tir.constant {value = dense<2.0> : tensor<4x3xf32>, weight_name = "d0"} : tensor<4x3xf32>
  %u1 = tir.constant {value = dense<3.0> : tensor<3x4xf32>, weight_name = "u1"} : tensor<3x4xf32>
  %d1 = tir.constant {value = dense<4.0> : tensor<4x3xf32>, weight_name = "d1"} : tensor<4x3xf32>
  %h0 = tir.matmul %x, %u0 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32> loc("experts.0/up")
  %a0 = tir.unary relu %h0 : tensor<2x4xf32> -> tensor<2x4xf32>
  %y0 = tir.matmul %a0, %d0 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32> loc("experts.0/down")
  %r0 = tir.strided_slice %route axes [0] begin [0] end [1] strides [1] : tensor<2x2x1xf32> -> tensor<1x2x1xf32>
  %w0 = tir.reshape %r0 : tensor<1x2x1xf32> -> tensor<2x1xf32>
  %t0 = tir.binary mul %y0, %w0 : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %h1 = tir.matmul %x, %u1 : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32> loc("experts.1/up")
  %a1 = tir.unary relu %h1 : tensor<2x4xf32> -> tensor<2x4xf32>
  %y1 = tir.matmul %a1, %d1 : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32> loc("experts.1/down")
  %r1 = tir.strided_slice %route axes [0] begin [1] end [2] strides [1] : tensor<2x2x1xf32> -> tensor<1x2x1xf32>
  %w1 = tir.reshape %r1 : tensor<1x2x1xf32> -> tensor<2x1xf32>
  %t1 = tir.binary mul %y1, %w1 : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %s0 = tir.binary add %zero, %t0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s1 = tir.binary add %s0, %t1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %s1 : tensor<2x3xf32>
}
// CHECK-NEXT: %[[U:.*]] = tir.constant {value = dense<{{.*}}> : tensor<2x3x4xf32>, weight_name = "experts.*/up.weight"}
// CHECK-NEXT: %h = tir.matmul %x, %[[U]] : tensor<2x3xf32>, tensor<2x3x4xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %a = tir.unary relu %h : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[D:.*]] = tir.constant {value = dense<{{.*}}> : tensor<2x4x3xf32>, weight_name = "experts.*/down.weight"}
// CHECK-NEXT: %y = tir.matmul %a, %[[D]] : tensor<2x2x4xf32>, tensor<2x4x3xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT: %[[R:.*]] = tir.reshape %route : tensor<2x2x1xf32> -> tensor<2x1x2x1xf32>
// CHECK-NEXT: %w = tir.reshape %[[R]] : tensor<2x1x2x1xf32> -> tensor<2x2x1xf32>
// CHECK-NEXT: %t = tir.binary mul %y, %w : tensor<2x2x3xf32>, tensor<2x2x1xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT: %s1 = tir.reduce sum %t {axes = array<i64: 0>, keepdims = 0 : i64} : tensor<2x2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT: func.return %s1

// -----

// An expert's value read outside the sum: the copies stay as they are.
// CHECK-LABEL: func.func @read_elsewhere
func.func @read_elsewhere(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %u0 = tir.constant {value = dense<1.0> : tensor<3x3xf32>, weight_name = "u0"} : tensor<3x3xf32>
  %u1 = tir.constant {value = dense<3.0> : tensor<3x3xf32>, weight_name = "u1"} : tensor<3x3xf32>
  %h0 = tir.matmul %x, %u0 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %h1 = tir.matmul %x, %u1 : tensor<2x3xf32>, tensor<3x3xf32> -> tensor<2x3xf32>
  %s = tir.binary add %h0, %h1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %s, %h0 : tensor<2x3xf32>, tensor<2x3xf32>
}
// CHECK:      %h0 = tir.matmul %x, %u0
// CHECK-NEXT: %h1 = tir.matmul %x, %u1
// CHECK-NEXT: %s = tir.binary add %h0, %h1
// CHECK-NEXT: func.return %s, %h0

// -----

// A sum of like terms without weights of their own (no matmul on constants
// that differ) is not a mixture of experts: it stays.
// CHECK-LABEL: func.func @like_terms
func.func @like_terms(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %c0 = tir.constant {value = dense<1.0> : tensor<3xf32>} : tensor<3xf32>
  %c1 = tir.constant {value = dense<2.0> : tensor<3xf32>} : tensor<3xf32>
  %m0 = tir.binary mul %x, %c0 : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %m1 = tir.binary mul %x, %c1 : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %s = tir.binary add %m0, %m1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %s : tensor<2x3xf32>
}
// CHECK:      %s = tir.binary add %m0, %m1
// CHECK-NEXT: func.return %s
