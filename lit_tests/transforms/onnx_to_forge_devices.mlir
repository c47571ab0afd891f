// onnx-to-forge{devices=2} ends in the Forge program every device runs (SPMD):
// Forge calls on each device's shapes, its blocks of the weights as
// `shard.all_slice`s of the model's parameters, the collectives between as
// `shard` ops. forge-python cuts it at each collective and gives each device
// its blocks.

// A LLaMA block as Optimum exports it (tests/data/models/make_llm_decoders.py):
// q/k/v and gate/up by output columns, o_proj and down_proj by input rows and
// one all-reduce each.
// RUN: forge-opt %S/../../tests/data/models/llm_llama.onnx --dim batch_size=1 --dim sequence_length=4 --dim past_sequence_length=3 -p 'onnx-to-forge{devices=2}' | filecheck %s --check-prefix=LLAMA
// And the same read back by stock xdsl-opt.
// RUN: forge-opt %S/../../tests/data/models/llm_llama.onnx --dim batch_size=1 --dim sequence_length=4 --dim past_sequence_length=3 -p 'onnx-to-forge{devices=2}' | xdsl-opt | filecheck %s --check-prefix=LLAMA

// LLAMA:      shard.grid @tp(shape = 2)
// LLAMA-LABEL: func.func @main_graph
// LLAMA:      %[[Q:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<32x32xf32> -> tensor<32x16xf32>
// LLAMA-NEXT: %model_layers_0_self_attn_q_proj_MatMul_output = forge.matmul %{{.*}}, %[[Q]] : (tensor<1x4x32xf32>, tensor<32x16xf32>) -> tensor<1x4x16xf32>
// LLAMA:      %[[O:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<32x32xf32> -> tensor<16x32xf32>
// LLAMA-NEXT: %model_layers_0_self_attn_o_proj_MatMul_output = forge.matmul %{{.*}}, %[[O]] : (tensor<1x4x16xf32>, tensor<16x32xf32>) -> tensor<1x4x32xf32>
// LLAMA-NEXT: %model_layers_0_Add_output = forge.add %{{.*}}, %model_layers_0_self_attn_o_proj_MatMul_output
// LLAMA-NEXT: %{{.*}} = shard.all_reduce %model_layers_0_Add_output on @tp grid_axes = [0] : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
// LLAMA:      %[[GATE:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<32x64xf32> -> tensor<32x32xf32>
// LLAMA-NEXT: %model_layers_0_mlp_gate_proj_MatMul_output = forge.matmul %{{.*}}, %[[GATE]] : (tensor<1x4x32xf32>, tensor<32x32xf32>) -> tensor<1x4x32xf32>
// LLAMA:      %[[UP:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<32x64xf32> -> tensor<32x32xf32>
// LLAMA-NEXT: %model_layers_0_mlp_up_proj_MatMul_output = forge.matmul %{{.*}}, %[[UP]] : (tensor<1x4x32xf32>, tensor<32x32xf32>) -> tensor<1x4x32xf32>
// LLAMA:      %[[DOWN:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<64x32xf32> -> tensor<32x32xf32>
// LLAMA-NEXT: %model_layers_0_mlp_down_proj_MatMul_output = forge.matmul %model_layers_0_mlp_Mul_output, %[[DOWN]] : (tensor<1x4x32xf32>, tensor<32x32xf32>) -> tensor<1x4x32xf32>
// LLAMA-NEXT: %model_layers_0_Add_1_output = forge.add
// LLAMA-NEXT: %{{.*}} = shard.all_reduce %model_layers_0_Add_1_output on @tp grid_axes = [0] : tensor<1x4x32xf32> -> tensor<1x4x32xf32>
// LLAMA:      shard.all_gather %logits on @tp grid_axes = [0] gather_axis = 2 : tensor<1x4x64xf32> -> tensor<1x4x128xf32>
// LLAMA-NOT:  tir.

// A torchvision-shaped ResNet (tests/data/models/make_cnns.py): the stem by
// output channels, the first block's convolution by input channels, its bias
// added on device 0 alone, its partial sums all-reduced once.
// RUN: forge-opt %S/../../tests/data/models/cnn_resnet18.onnx -p 'onnx-to-forge{devices=2}' | filecheck %s --check-prefix=RESNET

// RESNET:      shard.grid @tp(shape = 2)
// RESNET-LABEL: func.func @main_graph
// RESNET:      %[[W:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<64x3x7x7xf32> -> tensor<32x3x7x7xf32>
// RESNET-NEXT: %[[B:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 0 : tensor<64xf32> -> tensor<32xf32>
// RESNET-NEXT: %conv1_Conv_output = forge.conv2d %x, %[[W]], %[[B]] {{.*}} : (tensor<1x3x64x64xf32>, tensor<32x3x7x7xf32>, tensor<32xf32>) -> tensor<1x32x32x32xf32>
// RESNET-NEXT: %act1_Relu_output = forge.relu %conv1_Conv_output : (tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
// RESNET-NEXT: %maxpool_MaxPool_output = forge.max_pool2d %act1_Relu_output
// RESNET-NEXT: %[[W1:.*]] = shard.all_slice %{{.*}} on @tp grid_axes = [0] slice_axis = 1 : tensor<8x64x3x3xf32> -> tensor<8x32x3x3xf32>
// RESNET-NEXT: %[[FIRST:.*]] = forge.constant "/layer1/layer1.0/conv1/Conv" {value = dense<[true, false]> : tensor<2xi1>} : tensor<2xi1>
// RESNET-NEXT: %[[MINE:.*]] = shard.all_slice %[[FIRST]] on @tp grid_axes = [0] slice_axis = 0 : tensor<2xi1> -> tensor<1xi1>
// RESNET-NEXT: %[[ZERO:.*]] = forge.constant "/layer1/layer1.0/conv1/Conv" {fill = 0.000000e+00 : f32} : tensor<1xf32>
// RESNET-NEXT: %[[B1:.*]] = forge.where %[[MINE]], %{{.*}}, %[[ZERO]] : (tensor<1xi1>, tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
// RESNET-NEXT: %layer1_layer1_0_conv1_Conv_output = forge.conv2d %maxpool_MaxPool_output, %[[W1]], %[[B1]] {{.*}} : (tensor<1x32x16x16xf32>, tensor<8x32x3x3xf32>, tensor<8xf32>) -> tensor<1x8x16x16xf32>
// RESNET-NEXT: %{{.*}} = shard.all_reduce %layer1_layer1_0_conv1_Conv_output on @tp grid_axes = [0] : tensor<1x8x16x16xf32> -> tensor<1x8x16x16xf32>
// RESNET-NOT:  tir.
