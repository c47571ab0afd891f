// forge-check --stages S and forge-split --stages S: the GPT-2 test export cut
// where its layers start into stages of about equal stored weights, the
// schedule of M micro-batches (M + S - 1 steps), and outputs equal to the
// one-stage program's bit for bit.
// RUN: forge-check %S/../../tests/data/models/llm_gpt2.onnx --stages 2 --dim batch_size=1 --dim sequence_length=4 --dim past_sequence_length=3 2>&1 | filecheck %s
// RUN: rm -rf %t && forge-split %S/../../tests/data/models/llm_gpt2.onnx -o %t --stages 3 --dim batch_size=1 --dim sequence_length=4 --dim past_sequence_length=3 | filecheck %s --check-prefix=SPLIT
// RUN: not forge-check %S/../../tests/data/models/llm_gpt2.onnx --stages 1 2>&1 | filecheck %s --check-prefix=ONE

// CHECK-LABEL: pipeline: 2 stages, cut where a layer starts, balanced by stored weights
// CHECK-NEXT:  stage  nodes   layers  weights MB  sends MB
// CHECK-NEXT:      0     60      0-0       0.076     0.001
// CHECK-NEXT:      1     49      1-1       0.068         -
// CHECK-NEXT:  micro-batches  steps  bubble
// CHECK-NEXT:              1      2   50.0%
// CHECK-NEXT:              2      3   33.3%
// CHECK-NEXT:              8      9   11.1%
// CHECK:       every output of the 2 stages equals the one-stage program's, bit for bit
// CHECK-NEXT:  match

// SPLIT-LABEL: pipeline: 3 stages, cut where a layer starts, balanced by stored weights
// SPLIT-NEXT:  stage  nodes   layers  weights MB  sends MB
// SPLIT-NEXT:      0     14        -       0.025     0.001
// SPLIT-NEXT:      1     46      0-0       0.051     0.001
// SPLIT-NEXT:      2     49      1-1       0.068         -

// ONE: forge-check: error: --stages 1: a pipeline has 2 stages or more (leave --stages out to check on one device)
