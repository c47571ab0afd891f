// RUN: forge-opt %s --split-input-file --verify-diagnostics | filecheck %s

func.func @count_does_not_divide(%x: tensor<10xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a, %b, %c = onnx.Split(%x) : (tensor<10xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  func.return %a, %b, %c : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
// CHECK: dimension 0 of size 10 does not divide into 3 equal parts

// -----

func.func @axis_out_of_range(%x: tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  %a, %b = onnx.Split(%x) {axis = 1 : i64} : (tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>)
  func.return %a, %b : tensor<5xf32>, tensor<5xf32>
}
// CHECK: axis 1 is out of range for an input of rank 1

// -----

func.func @num_outputs_mismatch(%x: tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>) {
  %a, %b = onnx.Split(%x) {num_outputs = 3 : i64} : (tensor<10xf32>) -> (tensor<5xf32>, tensor<5xf32>)
  func.return %a, %b : tensor<5xf32>, tensor<5xf32>
}
// CHECK: num_outputs is 3 but there are 2 results
