// RUN: forge-opt %s -p 'tensor-parallel{devices=2}' --split-input-file | filecheck %s

// Megatron's pairing: the first Linear column-parallel (its weight split by
// columns), the one after the element-wise op row-parallel (by rows).
// CHECK:       shard.grid @tp(shape = 2)
// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %w2 = tir.constant {value = dense<2.0> : tensor<16x8xf32>} : tensor<16x8xf32>
  %h = tir.matmul %x, %w1 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %r = tir.unary relu %h : tensor<4x16xf32> -> tensor<4x16xf32>
  %y = tir.matmul %r, %w2 : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
// CHECK:      %[[COLS:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[W1:.*]] = shard.shard %w1 to %[[COLS]] : tensor<8x16xf32>
// CHECK-NEXT: %h = tir.matmul %x, %[[W1]] : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %r = tir.unary relu %h : tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %[[ROWS:.*]] = shard.sharding @tp split_axes = {{\[\[}}0], []] : !shard.sharding
// CHECK-NEXT: %[[W2:.*]] = shard.shard %w2 to %[[ROWS]] : tensor<16x8xf32>
// CHECK-NEXT: %y = tir.matmul %r, %[[W2]] : tensor<4x16xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: func.return %y

// -----

// A vocabulary the devices do not divide: negative indices made positive,
// the table padded with a zero row no index reaches, then split by rows.
// CHECK-LABEL: func.func @embedding
func.func @embedding(%idx: tensor<5xi64>) -> tensor<5x4xf32> {
  %t = tir.constant {value = dense<1.0> : tensor<7x4xf32>} : tensor<7x4xf32>
  %e = tir.gather %t, %idx {axis = 0 : i64} : tensor<7x4xf32>, tensor<5xi64> -> tensor<5x4xf32>
  func.return %e : tensor<5x4xf32>
}
// CHECK:      %[[ZERO:.*]] = tir.constant {value = dense<0> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NEXT: %[[NEG:.*]] = tir.binary lt %idx, %[[ZERO]] : tensor<5xi64>, tensor<1xi64> -> tensor<5xi1>
// CHECK-NEXT: %[[ROWS:.*]] = tir.constant {value = dense<7> : tensor<1xi64>} : tensor<1xi64>
// CHECK-NEXT: %[[WRAP:.*]] = tir.binary add %idx, %[[ROWS]] : tensor<5xi64>, tensor<1xi64> -> tensor<5xi64>
// CHECK-NEXT: %[[POS:.*]] = tir.where %[[NEG]], %[[WRAP]], %idx : tensor<5xi1>, tensor<5xi64>, tensor<5xi64> -> tensor<5xi64>
// CHECK-NEXT: %[[PAD:.*]] = tir.pad %t {pads = array<i64: 0, 1, 0, 0>, value = 0.000000e+00 : f32} : tensor<7x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[SPLIT:.*]] = shard.sharding @tp split_axes = {{\[\[}}0], []] : !shard.sharding
// CHECK-NEXT: %[[T:.*]] = shard.shard %[[PAD]] to %[[SPLIT]] : tensor<8x4xf32>
// CHECK-NEXT: %e = tir.gather %[[T]], %[[POS]] {axis = 0 : i64} : tensor<8x4xf32>, tensor<5xi64> -> tensor<5x4xf32>

// -----

// A fused projection split into equal parts (GPT-2's QKV) is packed: the
// columns reordered so each device holds its block of every part, and the
// split reads the parts per device.
// CHECK-LABEL: func.func @fused_qkv
func.func @fused_qkv(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %w = tir.constant {value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
  %y = tir.matmul %x, %w : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %q, %k = tir.split %y axis 1 sections [4, 4] : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  func.return %q, %k : tensor<2x4xf32>, tensor<2x4xf32>
}
// CHECK:      %[[ORDER:.*]] = tir.constant {value = dense<[0, 1, 4, 5, 2, 3, 6, 7]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %[[P:.*]] = tir.gather %w, %[[ORDER]] {axis = 1 : i64} : tensor<4x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
// CHECK-NEXT: %[[COLS:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[W:.*]] = shard.shard %[[P]] to %[[COLS]] : tensor<4x8xf32>
// CHECK-NEXT: %y = tir.matmul %x, %[[W]] : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[D:.*]] = tir.reshape %y : tensor<2x8xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[Q:.*]], %[[K:.*]] = tir.split %[[D]] axis 2 sections [2, 2]
// CHECK-NEXT: %q = tir.reshape %[[Q]] : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %k = tir.reshape %[[K]] : tensor<2x2x2xf32> -> tensor<2x4xf32>

// -----

// A fused projection taken apart by Slices of unequal parts (Phi-3's
// qkv_proj under grouped-query attention: 4 query columns, 2 of keys, 2 of
// values) is packed the same way: each part read per device by a slice of
// its block.
// CHECK-LABEL: func.func @fused_by_slices
func.func @fused_by_slices(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>) {
  %w = tir.constant {value = dense<1.0> : tensor<4x8xf32>} : tensor<4x8xf32>
  %y = tir.matmul %x, %w : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
  %q = tir.strided_slice %y axes [1] begin [0] end [4] strides [1] : tensor<2x8xf32> -> tensor<2x4xf32>
  %k = tir.strided_slice %y axes [1] begin [4] end [6] strides [1] : tensor<2x8xf32> -> tensor<2x2xf32>
  %v = tir.strided_slice %y axes [1] begin [6] end [8] strides [1] : tensor<2x8xf32> -> tensor<2x2xf32>
  func.return %q, %k, %v : tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32>
}
// CHECK:      %[[ORDER:.*]] = tir.constant {value = dense<[0, 1, 4, 6, 2, 3, 5, 7]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %[[P:.*]] = tir.gather %w, %[[ORDER]] {axis = 1 : i64}
// CHECK:      %y = tir.matmul %x, %{{.*}} : tensor<2x4xf32>, tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[D:.*]] = tir.reshape %y : tensor<2x8xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT: %[[Q:.*]] = tir.strided_slice %[[D]] axes [2] begin [0] end [2] strides [1] : tensor<2x2x4xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT: %q = tir.reshape %[[Q]] : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[K:.*]] = tir.strided_slice %[[D]] axes [2] begin [2] end [3] strides [1] : tensor<2x2x4xf32> -> tensor<2x2x1xf32>
// CHECK-NEXT: %k = tir.reshape %[[K]] : tensor<2x2x1xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %[[V:.*]] = tir.strided_slice %[[D]] axes [2] begin [3] end [4] strides [1] : tensor<2x2x4xf32> -> tensor<2x2x1xf32>
// CHECK-NEXT: %v = tir.reshape %[[V]] : tensor<2x2x1xf32> -> tensor<2x2xf32>

// -----

// An LM head tied to the embedding (its weight the table transposed) reads
// the table's rows, split as the embedding reads them: (T · xᵀ)ᵀ, then the
// padding's column sliced off. No block of the transposed table is made.
// CHECK-LABEL: func.func @tied_head
func.func @tied_head(%idx: tensor<2x3xi64>) -> tensor<2x3x7xf32> {
  %t = tir.constant {value = dense<1.0> : tensor<7x4xf32>} : tensor<7x4xf32>
  %e = tir.gather %t, %idx {axis = 0 : i64} : tensor<7x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
  %tt = tir.transpose %t perm [1, 0] : tensor<7x4xf32> -> tensor<4x7xf32>
  %y = tir.matmul %e, %tt : tensor<2x3x4xf32>, tensor<4x7xf32> -> tensor<2x3x7xf32>
  func.return %y : tensor<2x3x7xf32>
}
// CHECK:      %[[TS:.*]] = shard.shard %[[PAD:.*]] to %{{.*}} : tensor<8x4xf32>
// CHECK-NEXT: %e = tir.gather %[[TS]], %{{.*}} {axis = 0 : i64} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[X:.*]] = tir.reshape %e : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: %[[XT:.*]] = tir.transpose %[[X]] perm [1, 0] : tensor<6x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %[[P:.*]] = tir.matmul %[[TS]], %[[XT]] : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
// CHECK-NEXT: %[[PT:.*]] = tir.transpose %[[P]] perm [1, 0] : tensor<8x6xf32> -> tensor<6x8xf32>
// CHECK-NEXT: %[[Y:.*]] = tir.reshape %[[PT]] : tensor<6x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %y = tir.strided_slice %[[Y]] axes [2] begin [0] end [7] strides [1] : tensor<2x3x8xf32> -> tensor<2x3x7xf32>
// CHECK-NEXT: func.return %y

// -----

// A multi-query fused projection (GPT-BigCode's c_attn, Falcon's
// query_key_value): the query's 2 heads divide by the devices, the one K/V
// head does not. It becomes two Linears: the query's columns
// column-parallel, K and V whole on every device, as Megatron keeps K/V
// with fewer heads than devices.
// CHECK-LABEL: func.func @multi_query
func.func @multi_query(%x: tensor<3x8xf32>) -> (tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %w = tir.constant {value = dense<1.0> : tensor<8x16xf32>} : tensor<8x16xf32>
  %y = tir.matmul %x, %w : tensor<3x8xf32>, tensor<8x16xf32> -> tensor<3x16xf32>
  %q, %k, %v = tir.split %y axis 1 sections [8, 4, 4] : tensor<3x16xf32> -> tensor<3x8xf32>, tensor<3x4xf32>, tensor<3x4xf32>
  %qh = tir.reshape %q : tensor<3x8xf32> -> tensor<3x2x4xf32>
  func.return %qh, %k, %v : tensor<3x2x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}
// CHECK:      %[[QCOLS:.*]] = tir.constant {value = dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %[[WQ:.*]] = tir.gather %w, %[[QCOLS]] {axis = 1 : i64} : tensor<8x16xf32>, tensor<8xi64> -> tensor<8x8xf32>
// CHECK-NEXT: %[[COLS:.*]] = shard.sharding @tp split_axes = {{\[\[}}], [0]] : !shard.sharding
// CHECK-NEXT: %[[WQS:.*]] = shard.shard %[[WQ]] to %[[COLS]] : tensor<8x8xf32>
// CHECK-NEXT: %q = tir.matmul %x, %[[WQS]] : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %[[KVCOLS:.*]] = tir.constant {value = dense<[8, 9, 10, 11, 12, 13, 14, 15]> : tensor<8xi64>} : tensor<8xi64>
// CHECK-NEXT: %[[WKV:.*]] = tir.gather %w, %[[KVCOLS]] {axis = 1 : i64} : tensor<8x16xf32>, tensor<8xi64> -> tensor<8x8xf32>
// CHECK-NEXT: %[[KV:.*]] = tir.matmul %x, %[[WKV]] : tensor<3x8xf32>, tensor<8x8xf32> -> tensor<3x8xf32>
// CHECK-NEXT: %k = tir.strided_slice %[[KV]] axes [1] begin [0] end [4] strides [1] : tensor<3x8xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %v = tir.strided_slice %[[KV]] axes [1] begin [4] end [8] strides [1] : tensor<3x8xf32> -> tensor<3x4xf32>
// CHECK-NEXT: %qh = tir.reshape %q : tensor<3x8xf32> -> tensor<3x2x4xf32>
