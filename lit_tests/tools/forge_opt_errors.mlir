// RUN: not forge-opt %s -p no-such-pass 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not forge-opt %t.missing.onnx 2>&1 | filecheck %s --check-prefix=FILE
// RUN: forge-opt --version | filecheck %s --check-prefix=VERSION
// User errors are one line and no traceback.

func.func @f() {
  func.return
}

// PASS: forge-opt: error: Unrecognized passes: ['no-such-pass']
// PASS-NOT: Traceback
// FILE: forge-opt: error: {{.*}}missing.onnx: no such file
// VERSION: forge-opt 0.1.0 (xdsl 0.74.0)
