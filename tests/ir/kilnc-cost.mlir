// The cost report from each op's cost hook (kilnc --emit=cost): SiLU costs 4 FLOPs per element
// and moves its operand and result; RMSNorm 4 per element, reading its weight too; the totals add
// the ops up at the bound and at 1/2, 1/4 of it.
// RUN: kilnc %s --emit=cost --quiet -o - | FileCheck %s
// CHECK: == entry forward at L = 128 (the bound)
// CHECK: 0    silu {{.*}}24.6 K{{ +}}24.6 KB{{ +}}24.6 KB
// CHECK: 1    relu {{.*}}6.14 K{{ +}}24.6 KB{{ +}}24.6 KB
// CHECK: 2    rms_norm {{.*}}24.6 K{{ +}}24.8 KB{{ +}}24.6 KB
// CHECK: total: 55.3 KFLOP, 73.9 KB read, 73.7 KB written
// CHECK: == entry forward at L = 64
// CHECK: total: 27.6 KFLOP
module attributes {kiln.seq_bounds = array<i64: 128>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x48xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x48xf32> {kiln.name = "y"}) {
    %s = kiln.silu %x : (tensor<?x48xf32>) -> tensor<?x48xf32>
    %r = kiln.relu %s : (tensor<?x48xf32>) -> tensor<?x48xf32>
    %w = kiln.param "w" : tensor<48xf32>
    %n = kiln.rms_norm %r, %w : (tensor<?x48xf32>, tensor<48xf32>) -> tensor<?x48xf32>
    return %n : tensor<?x48xf32>
  }
}
