// What fuse-patterns makes of real exports (tests/data/models): GPT-2's MLP
// is Matmul with its bias, Gelu in its tanh form, Matmul with its bias; a
// BERT layer exported at opset 14, which writes LayerNormalization out op by
// op, uses Forge's Layernorm.
// RUN: forge-opt %S/../../tests/data/models/gpt2_opset17.onnx -p onnx-to-forge | filecheck %s --check-prefix=GPT2
// RUN: forge-opt %S/../../tests/data/models/bert_opset14.onnx -p onnx-to-forge | filecheck %s --check-prefix=BERT

// GPT2:      %[[FC:.*]] = forge.matmul %{{.*}}, %model_transformer_h_0_mlp_c_fc_weight, %model_transformer_h_0_mlp_c_fc_bias : (tensor<1x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<1x16x256xf32>
// GPT2-NEXT: %[[ACT:.*]] = forge.gelu %[[FC]] {approximate = "tanh"} : (tensor<1x16x256xf32>) -> tensor<1x16x256xf32>
// GPT2-NEXT: %{{.*}} = forge.matmul %[[ACT]], %model_transformer_h_0_mlp_c_proj_weight, %{{.*}} : (tensor<1x16x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>

// BERT:      forge.layernorm %{{.*}}, %{{.*}}, %{{.*}} {dim = -1 : i64, epsilon = 9.999999960041972e-13 : f64} : (tensor<1x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x16x64xf32>
// BERT-NOT:  forge.reduce_avg
