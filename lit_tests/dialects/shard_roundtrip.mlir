// RUN: forge-opt %s --split-input-file | filecheck %s
// RUN: FORGE_ROUNDTRIP

// The collectives xDSL lacks, in MLIR's own syntax.
// CHECK:       shard.grid @tp(shape = 4)
// CHECK-LABEL: func.func @collectives
shard.grid @tp(shape = 4)
func.func @collectives(%x: tensor<8x4xf32>) -> (tensor<8x16xf32>, tensor<2x4xf32>, tensor<8x1xf32>, tensor<8x4xf32>) {
  // CHECK-NEXT: %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<8x4xf32> -> tensor<8x16xf32>
  // CHECK-NEXT: %r = shard.reduce_scatter %x on @tp grid_axes = [0] scatter_axis = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  %r = shard.reduce_scatter %x on @tp grid_axes = [0] scatter_axis = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  // CHECK-NEXT: %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x1xf32>
  %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x1xf32>
  // CHECK-NEXT: %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  %a = shard.all_reduce %x on @tp grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  func.return %g, %r, %s, %a : tensor<8x16xf32>, tensor<2x4xf32>, tensor<8x1xf32>, tensor<8x4xf32>
}
