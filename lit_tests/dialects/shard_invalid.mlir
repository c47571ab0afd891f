// RUN: forge-opt %s --split-input-file --verify-diagnostics | filecheck %s

shard.grid @tp(shape = 4)
func.func @gather_wrong_size(%x: tensor<8x4xf32>) -> tensor<8x8xf32> {
  %g = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 1 : tensor<8x4xf32> -> tensor<8x8xf32>
  func.return %g : tensor<8x8xf32>
}
// CHECK: 'shard.all_gather' over 4 devices cannot make tensor<8x8xf32> of tensor<8x4xf32> along axis 1

// -----

shard.grid @tp(shape = 2)
func.func @slice_other_dim(%x: tensor<8x4xf32>) -> tensor<4x2xf32> {
  %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x2xf32>
  func.return %s : tensor<4x2xf32>
}
// CHECK: 'shard.all_slice' over 2 devices cannot make tensor<4x2xf32> of tensor<8x4xf32> along axis 0

// -----

shard.grid @tp(shape = 2)
func.func @no_such_grid_axis(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.all_slice %x on @tp grid_axes = [1] slice_axis = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  func.return %s : tensor<8x4xf32>
}
// CHECK: 'shard.all_slice' grid axis 1 is outside the 1-d grid

// -----

func.func @no_grid(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %a = shard.all_gather %x on @nowhere grid_axes = [0] gather_axis = 0 : tensor<8x4xf32> -> tensor<8x4xf32>
  func.return %a : tensor<8x4xf32>
}
// CHECK: 'shard.all_gather' names the grid @nowhere, which is not a shard.grid
