// What kilnc requires of a kiln-dialect file beyond valid ops (the interface a DSL program
// always provides): checked before any pass runs, each a user error with exit code 1.
// RUN: split-file %s %t
// RUN: not kilnc %t/bound.mlir --compile-to=kernels --emit=mlir --quiet -o /dev/null 2>&1 | FileCheck %s --check-prefix=BOUND
// RUN: not kilnc %t/zero.mlir --compile-to=kernels --emit=mlir --quiet -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: kilnc %t/max.mlir --compile-to=kernels --emit=mlir --quiet -o - | FileCheck %s --check-prefix=MAX

// The DSL's cap on a sequence length's bound (2^24) holds for kilnc input too.
// BOUND: expected every kiln.seq_bounds entry in [1, 16777216], got 33554432
// ZERO: expected every kiln.seq_bounds entry in [1, 16777216], got 0
// MAX: kiln.seq_bounds = array<i64: 16777216>

//--- bound.mlir
module attributes {kiln.seq_bounds = array<i64: 33554432>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    return %r : tensor<?x16xf32>
  }
}
//--- zero.mlir
module attributes {kiln.seq_bounds = array<i64: 0>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    return %r : tensor<?x16xf32>
  }
}
//--- max.mlir
module attributes {kiln.seq_bounds = array<i64: 16777216>, kiln.seq_names = ["L"]} {
  func.func @forward(%x: tensor<?x16xf32> {kiln.name = "x", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x16xf32> {kiln.name = "y"}) {
    %r = kiln.relu %x : (tensor<?x16xf32>) -> tensor<?x16xf32>
    return %r : tensor<?x16xf32>
  }
}
