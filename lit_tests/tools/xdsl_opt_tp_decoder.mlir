// Stock xdsl-opt reads the per-device program of a decoder with grouped-query
// attention and a KV cache, as Optimum exports LLaMA (4 query heads over 2 KV
// heads; tests/data/models/make_llm_decoders.py): each of 2 devices holds one
// KV head of the cache and repeats it for its 2 query heads.
// RUN: forge-opt %S/../../tests/data/models/llm_llama.onnx --dim batch_size=1 --dim sequence_length=4 --dim past_sequence_length=3 -p 'onnx-to-tir,tensor-parallel{devices=2},tp-partition' | xdsl-opt | filecheck %s

// CHECK:      shard.grid @tp(shape = 2)
// CHECK:      %past_key_values_0_key: tensor<1x1x3x8xf32> {onnx.name = "past_key_values.0.key", shard.split_axis = 1 : i64}
// CHECK:      -> (tensor<1x4x128xf32> {onnx.name = "logits"}, tensor<1x1x7x8xf32> {onnx.name = "present.0.key", shard.split_axis = 1 : i64}
// CHECK:      %present_0_key = tir.concat %past_key_values_0_key, %{{.*}} axis 2 : tensor<1x1x3x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x7x8xf32>
// CHECK:      %model_layers_0_self_attn_Expand_output = tir.broadcast %{{.*}} : tensor<1x1x1x7x8xf32> -> tensor<1x1x2x7x8xf32>
// CHECK-NEXT: %model_layers_0_self_attn_Reshape_4_output = tir.reshape %model_layers_0_self_attn_Expand_output : tensor<1x1x2x7x8xf32> -> tensor<1x2x7x8xf32>
// CHECK:      shard.all_reduce %{{.*}} on @tp grid_axes = [0] : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
// CHECK:      shard.all_gather %logits on @tp grid_axes = [0] gather_axis = 2 : tensor<1x4x64xf32> -> tensor<1x4x128xf32>
// CHECK-NEXT: func.return %{{.*}}, %present_0_key, %present_0_value, %present_1_key, %present_1_value : tensor<1x4x128xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>, tensor<1x1x7x8xf32>
