// RUN: xdsl-opt %s -p lower-split,tir-to-forge | filecheck %s
// RUN: xdsl-opt %s -p lower-split,tir-to-forge -t forge-python | filecheck %s --check-prefix=PY
// Stock xdsl-opt finds forge-opt's dialects, passes and target through the xdsl.universe entry point.

func.func @f(%x: tensor<10x4xf32>) -> (tensor<4x4xf32>, tensor<6x4xf32>) {
  %a, %b = tir.split %x axis 0 sections [4, 6] : tensor<10x4xf32> -> tensor<4x4xf32>, tensor<6x4xf32>
  func.return %a, %b : tensor<4x4xf32>, tensor<6x4xf32>
}

// CHECK-LABEL: func.func @f
// CHECK-NEXT:    %a = forge.index %x {dim = -2 : i64, start = 0 : i64, stop = 4 : i64, stride = 1 : i64} : (tensor<10x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %b = forge.index %x {dim = -2 : i64, start = 4 : i64, stop = 10 : i64, stride = 1 : i64} : (tensor<10x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    func.return %a, %b

// PY:      def forward(self, input_0):
// PY-NEXT:     a = forge.op.Index("index_1", input_0, dim=-2, start=0, stop=4, stride=1)
