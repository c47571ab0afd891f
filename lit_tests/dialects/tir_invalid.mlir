// RUN: forge-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s

func.func @sections_do_not_sum(%x: tensor<10x4xf32>) -> (tensor<2x4xf32>, tensor<3x4xf32>) {
  %a, %b = tir.split %x axis 0 sections [2, 3] : tensor<10x4xf32> -> tensor<2x4xf32>, tensor<3x4xf32>
  func.return %a, %b : tensor<2x4xf32>, tensor<3x4xf32>
}
// CHECK: sections [2, 3] sum to 5, but dimension 0 has size 10

// -----

func.func @axis_out_of_range(%x: tensor<10x4xf32>) -> (tensor<10x4xf32>) {
  %a = tir.split %x axis 2 sections [4] : tensor<10x4xf32> -> tensor<10x4xf32>
  func.return %a : tensor<10x4xf32>
}
// CHECK: axis 2 is out of range for rank 2

// -----

func.func @wrong_result_shape(%x: tensor<10x4xf32>) -> (tensor<5x4xf32>, tensor<5x3xf32>) {
  %a, %b = tir.split %x axis 0 sections [5, 5] : tensor<10x4xf32> -> tensor<5x4xf32>, tensor<5x3xf32>
  func.return %a, %b : tensor<5x4xf32>, tensor<5x3xf32>
}
// CHECK: result 1 has type tensor<5x3xf32>, expected tensor<5x4xf32>

// -----

func.func @slice_beyond(%x: tensor<10x4xf32>) -> tensor<4x4xf32> {
  %y = tir.strided_slice %x axes [0] begin [8] end [12] strides [1] : tensor<10x4xf32> -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK: slice 8:12 on axis 0 is outside 0..10 or reversed

// -----

func.func @matmul_shapes_disagree(%a: tensor<2x3xf32>, %b: tensor<5x7xf32>) -> tensor<9x9xf32> {
  %y = tir.matmul %a, %b : tensor<2x3xf32>, tensor<5x7xf32> -> tensor<9x9xf32>
  func.return %y : tensor<9x9xf32>
}
// CHECK: matmul shapes [2, 3] and [5, 7] do not agree

// -----

func.func @matmul_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3x7xf32>) -> tensor<9x9xf32> {
  %y = tir.matmul %a, %b : tensor<2x3xf32>, tensor<3x7xf32> -> tensor<9x9xf32>
  func.return %y : tensor<9x9xf32>
}
// CHECK: result 0 has type tensor<9x9xf32>, expected tensor<2x7xf32>

// -----

func.func @comparison_gives_bool(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %y = tir.binary lt %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: result 0 has type tensor<4xf32>, expected tensor<4xi1>

// -----

func.func @no_broadcast(%a: tensor<4xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %y = tir.binary add %a, %b : tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: shapes [4] and [3] do not broadcast

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %y = tir.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return %y : tensor<1x4x6x6xf32>
}
// CHECK: input channels 3 and weight [4, 2, 3, 3] do not agree for 1 groups

// -----

func.func @pool_windows(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  %y = tir.pool2d max %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  %z = tir.pool2d max %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64, count_include_pad = 0 : i64} : tensor<1x3x8x8xf32> -> tensor<1x3x4x4xf32>
  func.return %z : tensor<1x3x4x4xf32>
}
// CHECK: result 0 has type tensor<1x3x4x4xf32>, expected tensor<1x3x3x3xf32>

// -----

func.func @reduce_axes(%x: tensor<2x3xf32>) -> tensor<2xf32> {
  %y = tir.reduce sum %x {axes = array<i64: 1, 1>, keepdims = 0 : i64} : tensor<2x3xf32> -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
// CHECK: axes [1, 1] repeat

// -----

func.func @transpose_perm(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %y = tir.transpose %x perm [1, 1] : tensor<2x3xf32> -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}
// CHECK: perm [1, 1] is not a permutation of the 2 dims

// -----

func.func @gather_float_indices(%x: tensor<5x3xf32>, %i: tensor<2xf32>) -> tensor<2x3xf32> {
  %y = tir.gather %x, %i {axis = 0 : i64} : tensor<5x3xf32>, tensor<2xf32> -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK: indices must be integers


// -----

func.func @bias_widens_the_product(%x: tensor<3x8xf32>, %w: tensor<8x5xf32>, %b: tensor<2x3x5xf32>) -> tensor<3x5xf32> {
  %y = tir.matmul %x, %w bias %b : tensor<3x8xf32>, tensor<8x5xf32>, tensor<2x3x5xf32> -> tensor<3x5xf32>
  func.return %y : tensor<3x5xf32>
}
// CHECK: a bias of shape [2, 3, 5] does not broadcast to the product's [3, 5]

// -----

// Element types are part of an op's contract, as its shapes are.
func.func @binary_of_two_element_types(%x: tensor<4xf32>, %y: tensor<4xi64>) -> tensor<4xf32> {
  %z = tir.binary add %x, %y : tensor<4xf32>, tensor<4xi64> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// CHECK: tir.binary add of f32 and i64: the operands' element types must be equal (only pow's exponent may differ)

// -----

func.func @where_of_two_element_types(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) -> tensor<4xf32> {
  %z = tir.where %c, %x, %y : tensor<4xi1>, tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  func.return %z : tensor<4xf32>
}
// CHECK: tir.where of f32 and f16: the two branches' element types differ

// -----

func.func @matmul_of_two_element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) -> tensor<2x4xf32> {
  %y = tir.matmul %a, %b : tensor<2x3xf32>, tensor<3x4xf16> -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK: attribute f32 expected from variable 'T', but got f16

// -----

func.func @concat_of_two_element_types(%a: tensor<2xf32>, %b: tensor<3xi64>) -> tensor<5xf32> {
  %y = tir.concat %a, %b axis 0 : tensor<2xf32>, tensor<3xi64> -> tensor<5xf32>
  func.return %y : tensor<5xf32>
}
// CHECK: attribute f32 expected from variable 'T', but got i64

// -----

func.func @conv2d_of_two_element_types(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x1x1xbf16>) -> tensor<1x3x4x4xf32> {
  %y = tir.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xbf16>) -> tensor<1x3x4x4xf32>
  func.return %y : tensor<1x3x4x4xf32>
}
// CHECK: attribute f32 expected from variable 'T', but got bf16

// -----

func.func @layernorm_of_two_element_types(%x: tensor<2x8xf32>, %s: tensor<8xf16>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  %y = tir.layernorm %x, %s, %b {epsilon = 1.0e-05 : f32} : (tensor<2x8xf32>, tensor<8xf16>, tensor<8xf32>) -> tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}
// CHECK: attribute f32 expected from variable 'T', but got f16

// -----

func.func @batchnorm_result_of_another_element_type(%x: tensor<1x2x3x3xf32>, %p: tensor<2xf32>) -> tensor<1x2x3x3xf16> {
  %y = tir.batchnorm %x, %p, %p, %p, %p {epsilon = 1.0e-05 : f32} : (tensor<1x2x3x3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<1x2x3x3xf16>
  func.return %y : tensor<1x2x3x3xf16>
}
// CHECK: attribute f32 expected from variable 'T', but got f16
