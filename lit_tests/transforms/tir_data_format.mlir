// RUN: forge-opt %s -p 'tir-data-format{format=bfloat16}' --split-input-file | filecheck %s

// Every float32 value becomes bfloat16: the signature, a weight, a constant, a fill and each result;
// an integer stays what it is.
// CHECK-LABEL: func.func @program
// CHECK-SAME: (%x: tensor<2x4xbf16>, %i: tensor<2xi64>) -> tensor<2x3xbf16>
func.func @program(%x: tensor<2x4xf32>, %i: tensor<2xi64>) -> tensor<2x3xf32> {
  %w = tir.constant {value = dense<1.5> : tensor<4x3xf32>, weight_name = "w"} : tensor<4x3xf32>
  %h = tir.matmul %x, %w : tensor<2x4xf32>, tensor<4x3xf32> -> tensor<2x3xf32>
  %c = tir.constant {value = dense<0.1> : tensor<f32>} : tensor<f32>
  %s = tir.binary mul %h, %c : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %f = tir.full 2.0 : f32 : tensor<2x3xf32>
  %y = tir.binary add %s, %f : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK-NEXT: %w = tir.constant {value = dense<1.500000e+00> : tensor<4x3xbf16>, weight_name = "w"} : tensor<4x3xbf16>
// CHECK-NEXT: %h = tir.matmul %x, %w : tensor<2x4xbf16>, tensor<4x3xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT: %c = tir.constant {value = dense<1.000980e-01> : tensor<bf16>} : tensor<bf16>
// CHECK-NEXT: %s = tir.binary mul %h, %c : tensor<2x3xbf16>, tensor<bf16> -> tensor<2x3xbf16>
// CHECK-NEXT: %f = tir.full 2.000000e+00 : bf16 : tensor<2x3xbf16>
// CHECK-NEXT: %y = tir.binary add %s, %f : tensor<2x3xbf16>, tensor<2x3xbf16> -> tensor<2x3xbf16>
// CHECK-NEXT: func.return %y : tensor<2x3xbf16>

// -----

// A constant beyond bfloat16's range (torch.finfo(float32).min, a mask's fill) is held at bfloat16's finite
// extreme, counted in the module; rounded, it would be an infinity that makes NaN of (1 - mask) * fill.
// A weight so held is named: the emitted module saturates it as it loads it.
// CHECK-LABEL: builtin.module attributes {forge.saturated_constants = 4 : i64, forge.saturated_weights = ["w"]}
// CHECK-LABEL: func.func @mask_fill
func.func @mask_fill(%m: tensor<4xf32>) -> tensor<4xf32> {
  %fill = tir.constant {value = dense<[-3.4028235e+38, 3.4028235e+38, 1.0, 2.5]> : tensor<4xf32>} : tensor<4xf32>
  %w = tir.constant {value = dense<-3.4028235e+38> : tensor<f32>, weight_name = "w"} : tensor<f32>
  %f = tir.full -3.4028235e+38 : f32 : tensor<4xf32>
  %a = tir.binary mul %m, %fill : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %b = tir.binary add %a, %w : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %y = tir.binary add %b, %f : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK-NEXT: %fill = tir.constant {value = dense<[-3.389530e+38, 3.389530e+38, 1.000000e+00, 2.500000e+00]> : tensor<4xbf16>} : tensor<4xbf16>
// CHECK-NEXT: %w = tir.constant {value = dense<-3.389530e+38> : tensor<bf16>, weight_name = "w"} : tensor<bf16>
// CHECK-NEXT: %f = tir.full -3.389530e+38 : bf16 : tensor<4xbf16>
