// RUN: forge-opt %s -p scatter-attention-heads --split-input-file | filecheck %s

// A grouped-query attention's decode step on a 2x2 mesh as tp-partition
// leaves it in Galaxy's layout: each row's 4 query and 2 KV heads summed
// over the columns by three all-reduces, its KV cache split by the rows.
// One reduce-scatter makes each column's 2 query and 1 KV heads instead
// (the three sums' blocks side by side, as Galaxy's llama_rs_create_heads),
// the cache is split over all 4 devices, attention runs on the column's
// heads, and one all-gather joins the heads for the output projection.
// CHECK-LABEL: func.func @gqa_decode
// CHECK-SAME:    %past_k: tensor<1x1x3x2xf32> {shard.split_axis = 1 : i64}
// CHECK-SAME:    -> (tensor<1x1x8xf32>, tensor<1x1x4x2xf32> {shard.split_axis = 1 : i64}, tensor<1x1x4x2xf32> {shard.split_axis = 1 : i64})
// CHECK-NEXT:  %qp_1 = tir.reshape %qp : tensor<1x4x1x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT:  %kp_1 = tir.reshape %kp : tensor<1x2x1x2xf32> -> tensor<2x2xf32>
// CHECK-NEXT:  %vp_1 = tir.reshape %vp : tensor<1x2x1x2xf32> -> tensor<2x2xf32>
// CHECK-NEXT:  %q = tir.concat %qp_1, %kp_1, %vp_1 axis 1 : tensor<2x4xf32>, tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x8xf32>
// CHECK-NEXT:  %q_1 = shard.reduce_scatter %q on @tp grid_axes = [1] scatter_axis = 0 : tensor<2x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:  %q_2 = tir.strided_slice %q_1 axes [1] begin [0] end [4] strides [1] : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT:  %q_3 = tir.reshape %q_2 : tensor<1x4xf32> -> tensor<1x2x1x2xf32>
// CHECK-NEXT:  %k = tir.strided_slice %q_1 axes [1] begin [4] end [6] strides [1] : tensor<1x8xf32> -> tensor<1x2xf32>
// CHECK-NEXT:  %k_1 = tir.reshape %k : tensor<1x2xf32> -> tensor<1x1x1x2xf32>
// CHECK-NEXT:  %v = tir.strided_slice %q_1 axes [1] begin [6] end [8] strides [1] : tensor<1x8xf32> -> tensor<1x2xf32>
// CHECK-NEXT:  %v_1 = tir.reshape %v : tensor<1x2xf32> -> tensor<1x1x1x2xf32>
// CHECK-NEXT:  %keys = tir.concat %past_k, %k_1 axis 2 : tensor<1x1x3x2xf32>, tensor<1x1x1x2xf32> -> tensor<1x1x4x2xf32>
// CHECK-NEXT:  %values = tir.concat %past_v, %v_1 axis 2 : tensor<1x1x3x2xf32>, tensor<1x1x1x2xf32> -> tensor<1x1x4x2xf32>
// CHECK-NEXT:  %k5 = tir.reshape %keys : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
// CHECK-NEXT:  %kx = tir.broadcast %k5 : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
// CHECK-NEXT:  %kr = tir.reshape %kx : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
// CHECK-NEXT:  %v5 = tir.reshape %values : tensor<1x1x4x2xf32> -> tensor<1x1x1x4x2xf32>
// CHECK-NEXT:  %vx = tir.broadcast %v5 : tensor<1x1x1x4x2xf32> -> tensor<1x1x2x4x2xf32>
// CHECK-NEXT:  %vr = tir.reshape %vx : tensor<1x1x2x4x2xf32> -> tensor<1x2x4x2xf32>
// CHECK-NEXT:  %kt = tir.transpose %kr perm [0, 1, 3, 2] : tensor<1x2x4x2xf32> -> tensor<1x2x2x4xf32>
// CHECK-NEXT:  %s = tir.matmul %q_3, %kt : tensor<1x2x1x2xf32>, tensor<1x2x2x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT:  %sm = tir.binary add %s, %mask : tensor<1x2x1x4xf32>, tensor<1x1x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT:  %p = tir.softmax %sm {axis = 3 : i64} : tensor<1x2x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT:  %o = tir.matmul %p, %vr : tensor<1x2x1x4xf32>, tensor<1x2x4x2xf32> -> tensor<1x2x1x2xf32>
// CHECK-NEXT:  %ot = tir.transpose %o perm [0, 2, 1, 3] : tensor<1x2x1x2xf32> -> tensor<1x1x2x2xf32>
// CHECK-NEXT:  %out = tir.reshape %ot : tensor<1x1x2x2xf32> -> tensor<1x1x4xf32>
// CHECK-NEXT:  %out_1 = shard.all_gather %out on @tp grid_axes = [1] gather_axis = 2 : tensor<1x1x4xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT:  func.return %out_1, %keys, %values
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @gqa_decode(%qp: tensor<1x4x1x2xf32>, %kp: tensor<1x2x1x2xf32>, %vp: tensor<1x2x1x2xf32>,
                        %past_k: tensor<1x2x3x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64},
                        %past_v: tensor<1x2x3x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64},
                        %mask: tensor<1x1x1x4xf32>)
      -> (tensor<1x1x8xf32>, tensor<1x2x4x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64},
          tensor<1x2x4x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64}) {
    %q = shard.all_reduce %qp on @tp grid_axes = [1] : tensor<1x4x1x2xf32> -> tensor<1x4x1x2xf32>
    %k = shard.all_reduce %kp on @tp grid_axes = [1] : tensor<1x2x1x2xf32> -> tensor<1x2x1x2xf32>
    %v = shard.all_reduce %vp on @tp grid_axes = [1] : tensor<1x2x1x2xf32> -> tensor<1x2x1x2xf32>
    %keys = tir.concat %past_k, %k axis 2 : tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32> -> tensor<1x2x4x2xf32>
    %values = tir.concat %past_v, %v axis 2 : tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32> -> tensor<1x2x4x2xf32>
    %k5 = tir.reshape %keys : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %kx = tir.broadcast %k5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %kr = tir.reshape %kx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %v5 = tir.reshape %values : tensor<1x2x4x2xf32> -> tensor<1x2x1x4x2xf32>
    %vx = tir.broadcast %v5 : tensor<1x2x1x4x2xf32> -> tensor<1x2x2x4x2xf32>
    %vr = tir.reshape %vx : tensor<1x2x2x4x2xf32> -> tensor<1x4x4x2xf32>
    %kt = tir.transpose %kr perm [0, 1, 3, 2] : tensor<1x4x4x2xf32> -> tensor<1x4x2x4xf32>
    %s = tir.matmul %q, %kt : tensor<1x4x1x2xf32>, tensor<1x4x2x4xf32> -> tensor<1x4x1x4xf32>
    %sm = tir.binary add %s, %mask : tensor<1x4x1x4xf32>, tensor<1x1x1x4xf32> -> tensor<1x4x1x4xf32>
    %p = tir.softmax %sm {axis = 3 : i64} : tensor<1x4x1x4xf32> -> tensor<1x4x1x4xf32>
    %o = tir.matmul %p, %vr : tensor<1x4x1x4xf32>, tensor<1x4x4x2xf32> -> tensor<1x4x1x2xf32>
    %ot = tir.transpose %o perm [0, 2, 1, 3] : tensor<1x4x1x2xf32> -> tensor<1x1x4x2xf32>
    %out = tir.reshape %ot : tensor<1x1x4x2xf32> -> tensor<1x1x8xf32>
    func.return %out, %keys, %values : tensor<1x1x8xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>
  }
}

// -----

// Two users: the query's heads (a per-user scale keeps its blocks off the
// users' axis) and, beside them, the keys' heads, though alone the keys'
// sum would take the users' axis. Each sum's blocks are moved to its rows
// (the users after them) before the one reduce-scatter.
// CHECK-LABEL: func.func @two_users
// CHECK-NEXT:  %qp_1 = tir.reshape %qp : tensor<2x2x1x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT:  %qp_2 = tir.transpose %qp_1 perm [1, 0, 2] : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT:  %qp_3 = tir.reshape %qp_2 : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT:  %kp_1 = tir.reshape %kp : tensor<2x2x2x1xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT:  %kp_2 = tir.transpose %kp_1 perm [1, 0, 2] : tensor<2x2x2xf32> -> tensor<2x2x2xf32>
// CHECK-NEXT:  %kp_3 = tir.reshape %kp_2 : tensor<2x2x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT:  %q = tir.concat %qp_3, %kp_3 axis 1 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
// CHECK-NEXT:  %q_1 = shard.reduce_scatter %q on @tp grid_axes = [1] scatter_axis = 0 : tensor<2x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:  %q_2 = tir.strided_slice %q_1 axes [1] begin [0] end [4] strides [1] : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT:  %q_3 = tir.reshape %q_2 : tensor<1x4xf32> -> tensor<2x1x1x2xf32>
// CHECK-NEXT:  %k = tir.strided_slice %q_1 axes [1] begin [4] end [8] strides [1] : tensor<1x8xf32> -> tensor<1x4xf32>
// CHECK-NEXT:  %k_1 = tir.reshape %k : tensor<1x4xf32> -> tensor<2x1x2x1xf32>
// CHECK-NEXT:  %qc = tir.binary mul %q_3, %c : tensor<2x1x1x2xf32>, tensor<2x1x1x2xf32> -> tensor<2x1x1x2xf32>
// CHECK-NEXT:  %s = tir.matmul %qc, %k_1 : tensor<2x1x1x2xf32>, tensor<2x1x2x1xf32> -> tensor<2x1x1x1xf32>
// CHECK-NEXT:  %s_1 = shard.all_gather %s on @tp grid_axes = [1] gather_axis = 1 : tensor<2x1x1x1xf32> -> tensor<2x2x1x1xf32>
// CHECK-NEXT:  func.return %s_1
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @two_users(%qp: tensor<2x2x1x2xf32>, %kp: tensor<2x2x2x1xf32>, %c: tensor<2x1x1x2xf32>) -> tensor<2x2x1x1xf32> {
    %q = shard.all_reduce %qp on @tp grid_axes = [1] : tensor<2x2x1x2xf32> -> tensor<2x2x1x2xf32>
    %k = shard.all_reduce %kp on @tp grid_axes = [1] : tensor<2x2x2x1xf32> -> tensor<2x2x2x1xf32>
    %qc = tir.binary mul %q, %c : tensor<2x2x1x2xf32>, tensor<2x1x1x2xf32> -> tensor<2x2x1x2xf32>
    %s = tir.matmul %qc, %k : tensor<2x2x1x2xf32>, tensor<2x2x2x1xf32> -> tensor<2x2x1x1xf32>
    func.return %s : tensor<2x2x1x1xf32>
  }
}

// -----

// A cache another op reads whole: it is not split, and the keys' sum stays.
// CHECK-LABEL: func.func @cache_read_elsewhere
// CHECK-SAME:    %past_k: tensor<1x2x3x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64}
// CHECK-NEXT:  %k = shard.all_reduce %kp on @tp grid_axes = [1]
// CHECK-NEXT:  %keys = tir.concat %past_k, %k axis 2
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @cache_read_elsewhere(%kp: tensor<1x2x1x2xf32>,
                                  %past_k: tensor<1x2x3x2xf32> {shard.split_axis = 1 : i64, shard.split_blocks = 2 : i64})
      -> (tensor<1x2x4x2xf32>, tensor<1x2x3x2xf32>) {
    %k = shard.all_reduce %kp on @tp grid_axes = [1] : tensor<1x2x1x2xf32> -> tensor<1x2x1x2xf32>
    %keys = tir.concat %past_k, %k axis 2 : tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32> -> tensor<1x2x4x2xf32>
    %twice = tir.binary add %past_k, %past_k : tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x3x2xf32>
    func.return %keys, %twice : tensor<1x2x4x2xf32>, tensor<1x2x3x2xf32>
  }
}


// -----

// Query heads a matmul takes with keys held whole on each device: no
// column could take its block of them, so the sum stays.
// CHECK-LABEL: func.func @whole_query_heads
// CHECK-NEXT:  %q = shard.all_reduce %qp on @tp grid_axes = [1]
// CHECK-NEXT:  %s = tir.matmul %q, %kt
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @whole_query_heads(%qp: tensor<1x4x1x2xf32>, %kt: tensor<1x4x2x4xf32>) -> tensor<1x4x1x4xf32> {
    %q = shard.all_reduce %qp on @tp grid_axes = [1] : tensor<1x4x1x2xf32> -> tensor<1x4x1x2xf32>
    %s = tir.matmul %q, %kt : tensor<1x4x1x2xf32>, tensor<1x4x2x4xf32> -> tensor<1x4x1x4xf32>
    func.return %s : tensor<1x4x1x4xf32>
  }
}


// -----

// A sum over the rows stays: only the columns hold a row's heads.
// CHECK-LABEL: func.func @on_the_rows
// CHECK-NEXT:  %q = shard.all_reduce %qp on @tp grid_axes = [0]
// CHECK-NEXT:  %e = tir.unary exp %q
builtin.module {
  shard.grid @tp(shape = 2x2)
  func.func @on_the_rows(%qp: tensor<1x4x1x2xf32>) -> tensor<1x4x1x2xf32> {
    %q = shard.all_reduce %qp on @tp grid_axes = [0] : tensor<1x4x1x2xf32> -> tensor<1x4x1x2xf32>
    %e = tir.unary exp %q : tensor<1x4x1x2xf32> -> tensor<1x4x1x2xf32>
    func.return %e : tensor<1x4x1x2xf32>
  }
}
