// RUN: forge-opt %s -p 'collectives-on-mesh{mesh="2x4"}' --split-input-file | filecheck %s
// RUN: not forge-opt %s -p 'collectives-on-mesh{mesh="3x3"}' --split-input-file 2>&1 | filecheck %s --check-prefix=SIZE
// RUN: not forge-opt %s -p 'collectives-on-mesh{mesh="2x"}' --split-input-file 2>&1 | filecheck %s --check-prefix=FORM

// A mesh of another device count than the line's, and a mesh not RxC:
// SIZE: forge-opt: error: collectives-on-mesh: the grid @tp is [8], neither the line of 9 devices a 3x3 mesh lays out nor that mesh
// FORM: forge-opt: error: mesh '2x': give rows x columns, e.g. 2x4 (an n300 is 1x2, a T3K 2x4, a Galaxy 8x4)

// An all-reduce over the 8 devices of a line, on a 2x4 mesh: a
// reduce-scatter along each row's 4 devices (grid axis 1) of its largest
// dim that 4 divides, an all-reduce of that quarter down each column's 2
// (axis 0), and an all-gather back along the row.
// CHECK:       shard.grid @tp(shape = 2x4)
// CHECK-LABEL: func.func @all_reduce
// CHECK-NEXT: %[[S:.*]] = shard.reduce_scatter %x on @tp grid_axes = [1] scatter_axis = 1 {shard.line = 0 : i64} : tensor<2x16xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[S]] on @tp grid_axes = [0] {shard.line = 0 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[G:.*]] = shard.all_gather %[[R]] on @tp grid_axes = [1] gather_axis = 1 {shard.line = 0 : i64} : tensor<2x4xf32> -> tensor<2x16xf32>
// CHECK-NEXT: func.return %[[G]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @all_reduce(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
    %y = shard.all_reduce %x on @tp grid_axes = [0] : tensor<2x16xf32> -> tensor<2x16xf32>
    func.return %y : tensor<2x16xf32>
  }
}

// -----

// No dim divides by the row's 4 devices: an all-reduce along the row, then
// down the column.
// CHECK-LABEL: func.func @all_reduce_odd
// CHECK:      %[[A:.*]] = shard.all_reduce %x on @tp grid_axes = [1] {shard.line = 0 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT: %[[B:.*]] = shard.all_reduce %[[A]] on @tp grid_axes = [0] {shard.line = 0 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT: func.return %[[B]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @all_reduce_odd(%x: tensor<3x5xf32>) -> tensor<3x5xf32> {
    %y = shard.all_reduce %x on @tp grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf32>
    func.return %y : tensor<3x5xf32>
  }
}

// -----

// Each collective made marks the line collective it is part of
// (`shard.line`, read by the plan's report): here an all-reduce that
// becomes two and an all-gather of its result that becomes two more.
// CHECK-LABEL: func.func @two_in_a_row
// CHECK:      %[[A:.*]] = shard.all_reduce %x on @tp grid_axes = [1] {shard.line = 0 : i64}
// CHECK-NEXT: %[[B:.*]] = shard.all_reduce %[[A]] on @tp grid_axes = [0] {shard.line = 0 : i64}
// CHECK-NEXT: %[[C:.*]] = shard.all_gather %[[B]] on @tp grid_axes = [1] gather_axis = 0 {shard.line = 1 : i64}
// CHECK-NEXT: %[[D:.*]] = shard.all_gather %[[C]] on @tp grid_axes = [0] gather_axis = 0 {shard.line = 1 : i64}
// CHECK-NEXT: func.return %[[D]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @two_in_a_row(%x: tensor<3x5xf32>) -> tensor<24x5xf32> {
    %y = shard.all_reduce %x on @tp grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf32>
    %z = shard.all_gather %y on @tp grid_axes = [0] gather_axis = 0 : tensor<3x5xf32> -> tensor<24x5xf32>
    func.return %z : tensor<24x5xf32>
  }
}

// -----

// A gather along the row first: device r*4+c's block lands where a gather
// over the line of 8 puts it.
// CHECK-LABEL: func.func @all_gather
// CHECK:      %[[A:.*]] = shard.all_gather %x on @tp grid_axes = [1] gather_axis = 0 {shard.line = 0 : i64} : tensor<2x3xf32> -> tensor<8x3xf32>
// CHECK-NEXT: %[[B:.*]] = shard.all_gather %[[A]] on @tp grid_axes = [0] gather_axis = 0 {shard.line = 0 : i64} : tensor<8x3xf32> -> tensor<16x3xf32>
// CHECK-NEXT: func.return %[[B]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @all_gather(%x: tensor<2x3xf32>) -> tensor<16x3xf32> {
    %y = shard.all_gather %x on @tp grid_axes = [0] gather_axis = 0 : tensor<2x3xf32> -> tensor<16x3xf32>
    func.return %y : tensor<16x3xf32>
  }
}

// -----

// A reduce-scatter down the column into halves first, then along the row;
// a block of a weight is the block of rank r*4+c, over both axes.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK:      %[[W:.*]] = shard.all_slice %w on @tp grid_axes = [0, 1] slice_axis = 1 : tensor<3x16xf32> -> tensor<3x2xf32>
// CHECK-NEXT: %[[A:.*]] = shard.reduce_scatter %x on @tp grid_axes = [0] scatter_axis = 1 {shard.line = 0 : i64} : tensor<3x16xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[B:.*]] = shard.reduce_scatter %[[A]] on @tp grid_axes = [1] scatter_axis = 1 {shard.line = 0 : i64} : tensor<3x8xf32> -> tensor<3x2xf32>
// CHECK-NEXT: func.return %[[W]], %[[B]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @reduce_scatter(%w: tensor<3x16xf32>, %x: tensor<3x16xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
    %v = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 1 : tensor<3x16xf32> -> tensor<3x2xf32>
    %y = shard.reduce_scatter %x on @tp grid_axes = [0] scatter_axis = 1 : tensor<3x16xf32> -> tensor<3x2xf32>
    func.return %v, %y : tensor<3x2xf32>, tensor<3x2xf32>
  }
}

// -----

// A maximum (a quantization's range) is no scatter's sum: the maximum
// along the row, then down the column.
// CHECK-LABEL: func.func @all_reduce_max
// CHECK:      %[[A:.*]] = shard.all_reduce %x on @tp grid_axes = [1] reduction = max {shard.line = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: %[[B:.*]] = shard.all_reduce %[[A]] on @tp grid_axes = [0] reduction = max {shard.line = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
// CHECK-NEXT: func.return %[[B]]
builtin.module {
  shard.grid @tp(shape = 8)
  func.func @all_reduce_max(%x: tensor<8xf32>) -> tensor<8xf32> {
    %y = shard.all_reduce %x on @tp grid_axes = [0] reduction = max : tensor<8xf32> -> tensor<8xf32>
    func.return %y : tensor<8xf32>
  }
}
