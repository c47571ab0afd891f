// RUN: forge-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s
// Forge's own checks (the records of dialects/forge_functions/), enforced by the verifier.

func.func @stop_beyond_dim(%x: tensor<10x4xf32>) -> tensor<4x4xf32> {
  %y = forge.index %x {dim = -2 : i64, start = 8 : i64, stop = 12 : i64} : (tensor<10x4xf32>) -> tensor<4x4xf32>
  func.return %y : tensor<4x4xf32>
}
// CHECK: [index-stop] forge.op.Index: stop 12 must be <= 10

// -----

func.func @start_at_size(%x: tensor<10x4xf32>) -> tensor<10x0xf32> {
  %y = forge.index %x {dim = -1 : i64, start = 4 : i64, stop = 4 : i64} : (tensor<10x4xf32>) -> tensor<10x0xf32>
  func.return %y : tensor<10x0xf32>
}
// CHECK: [index-start] forge.op.Index: start 4 must be < 4

// -----

func.func @zero_stride(%x: tensor<10x4xf32>) -> tensor<2x4xf32> {
  %y = forge.index %x {dim = -2 : i64, start = 0 : i64, stop = 2 : i64, stride = 0 : i64} : (tensor<10x4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// CHECK: [index-stride] forge.op.Index: stride 0 must be a non-zero int

// -----

func.func @reshape_without_shape(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %y = forge.reshape %x : (tensor<2x3xf32>) -> tensor<6xf32>
  func.return %y : tensor<6xf32>
}
// CHECK: property 'shape' expected

// -----

func.func @reduce_dim_beyond_forge(%x: tensor<1x2x3x4x5xf32>) -> tensor<1x2x3x4x5xf32> {
  %y = forge.reduce_sum %x {dim = -5 : i64} : (tensor<1x2x3x4x5xf32>) -> tensor<1x2x3x4x5xf32>
  func.return %y : tensor<1x2x3x4x5xf32>
}
// CHECK: [reduce-dim] forge.op.ReduceSum: dim -5 must be one axis in -4..3

// -----

func.func @constant_pad_is_never_callable(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %y = forge.constant_pad %x {padding = array<i64: 0, 0, 1, 1>} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  func.return %y : tensor<2x5xf32>
}
// CHECK: [constantpad-unusable] forge.op.ConstantPad: every Python call fails in Forge

// -----

func.func @max_pool_asymmetric_padding(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %y = forge.max_pool2d %x {kernel_size = 2 : i64, padding = array<i64: 0, 1, 0, 1>} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  func.return %y : tensor<1x1x4x4xf32>
}
// CHECK: [pool-symmetric] forge.op.MaxPool2d: padding [0, 1, 0, 1] ([left, right, top, bottom]) must be symmetric

// -----

func.func @comparison_keeps_its_operand_type(%x: tensor<4xf32>) -> tensor<4xi1> {
  %y = forge.equal %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %y : tensor<4xi1>
}
// CHECK: forge.op.Equal gives tensor<4xf32>, but the result type is tensor<4xi1>

// -----

func.func @integer_divide_is_true_division(%x: tensor<4xi64>) -> tensor<4xi64> {
  %y = forge.divide %x, %x : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  func.return %y : tensor<4xi64>
}
// CHECK: forge.op.Divide gives tensor<4xf32>, but the result type is tensor<4xi64>

// -----

func.func @cast_to_bool_is_int32(%x: tensor<4xf32>) -> tensor<4xi1> {
  %y = forge.cast %x {dtype = i1} : (tensor<4xf32>) -> tensor<4xi1>
  func.return %y : tensor<4xi1>
}
// CHECK: forge.op.Cast gives tensor<4xi32>, but the result type is tensor<4xi1>

// -----

func.func @float64_has_no_data_format(%x: tensor<4xf64>) -> tensor<4xf64> {
  %y = forge.exp %x : (tensor<4xf64>) -> tensor<4xf64>
  func.return %y : tensor<4xf64>
}
// CHECK: [dtype-unsupported] forge.op.Exp: operand 0 has dtype float64, which Forge cannot hold

// -----

func.func @clip_bounds_are_floats(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = forge.clip %x {min = 0 : i64, max = 6 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: [attr-variant] forge.op.Clip: min must be a float, got 0

// -----

// A negative stop adds the size, as in Forge: 1:-1 of 10 has 8 elements.
func.func @negative_stop_is_resolved(%x: tensor<10xf32>) -> tensor<9xf32> {
  %y = forge.index %x {dim = -1 : i64, start = 1 : i64, stop = -1 : i64} : (tensor<10xf32>) -> tensor<9xf32>
  func.return %y : tensor<9xf32>
}
// CHECK: forge.op.Index gives tensor<8xf32>, but the result type is tensor<9xf32>

// -----

func.func @layout_changes_the_count() -> tensor<5x3xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>, layout = [{reshape = array<i64: 5, 3>}]} : tensor<5x3xf32>
  func.return %w : tensor<5x3xf32>
}
// CHECK: layout: reshape of [3, 4] to [5, 3] changes the element count

// -----

func.func @layout_not_a_permutation() -> tensor<4x4xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<4x4xf32>, layout = [{transpose = array<i64: 1, 1>}]} : tensor<4x4xf32>
  func.return %w : tensor<4x4xf32>
}
// CHECK: layout: transpose [1, 1] is no permutation of 2 dims

// -----

func.func @laid_out_shape_is_not_the_result() -> tensor<3x4xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>, layout = [{transpose = array<i64: 1, 0>}]} : tensor<3x4xf32>
  func.return %w : tensor<3x4xf32>
}
// CHECK: the weight laid out has shape [4, 3], but the result is tensor<3x4xf32>

// -----

func.func @unknown_layout_step() -> tensor<3x4xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<3x4xf32>, layout = [{flip = array<i64: 0>}]} : tensor<3x4xf32>
  func.return %w : tensor<3x4xf32>
}
// CHECK: a layout step is one of {transpose, reshape = array<i64: ...>}

// -----

// Every result shape is the one Forge's shape() gives, not only Index's.
func.func @matmul_result_shape(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<9x9xf32> {
  %y = forge.matmul %a, %b : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<9x9xf32>
  func.return %y : tensor<9x9xf32>
}
// CHECK: forge.op.Matmul gives tensor<2x2xf32>, but the result type is tensor<9x9xf32>

// -----

func.func @matmul_inner_dims_agree(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %y = forge.matmul %a, %b : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %y : tensor<2x3xf32>
}
// CHECK: [matmul-shapes] forge.op.Matmul: shapes [2, 3] and [2, 3] do not agree on the inner dimension

// -----

func.func @conv_result_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %y = forge.conv2d %x, %w {padding = array<i64: 0, 0, 0, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return %y : tensor<1x4x8x8xf32>
}
// CHECK: forge.op.Conv2d gives tensor<1x4x6x6xf32>, but the result type is tensor<1x4x8x8xf32>

// -----

// A weight's stored format is a block float; bfloat16 is a whole program's (its types say it).
func.func @weight_format_not_a_block_float() -> tensor<4x3xf32> {
  %w = forge.parameter "w" {value = dense<1.0> : tensor<4x3xf32>, weight_format = #forge<data_format bfloat16>} : tensor<4x3xf32>
  func.return %w : tensor<4x3xf32>
}
// CHECK: a weight's format is one of bfp8_b, bfp4_b, not bfloat16

// -----

func.func @keyword_of_the_wrong_kind(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %y = forge.transpose %x {dim0 = "a", dim1 = -1 : i64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}
// CHECK: forge.transpose: "a" should be of base attribute integer

// -----

func.func @float_keyword_given_an_int(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = forge.clip %x {min = 0 : i64, max = 6.0 : f64} : (tensor<4xf32>) -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// CHECK: [attr-variant] forge.op.Clip: min must be a float, got 0
