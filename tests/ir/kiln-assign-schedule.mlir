// RUN: kiln-opt %s --kiln-assign-schedule=vector-width=16 --split-input-file | FileCheck %s

// Every kernel gets the vector width, a 4-wide row is not vectorized 16-wide; a decision already
// in the schedule (tile_m) is kept. Work over a dynamic length runs in parallel tasks.
// CHECK-LABEL: func.func @schedules
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<vec = 16, parallel = 1, tile_m = 4>
// CHECK: kiln.relu {{.*}}kiln.schedule = #kiln.schedule<vec = 4, parallel = 1>
func.func @schedules(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %w = kiln.param "w" : tensor<32x8xf32>
  %h = kiln.linear %x, %w {kiln.schedule = #kiln.schedule<tile_m = 4>} : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  %s = kiln.slice %h {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x4xf32>
  %r = kiln.relu %s : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}

// -----

// Parallelism follows the work at the bounds (the cost hooks' FLOPs and bytes): a decode step's
// norm over one 64-wide row is under 2^16 and runs on one thread, its linear does not; at the
// bound 512 the norm is parallel too.
// CHECK-LABEL: func.func @decode
// CHECK: kiln.layer_norm {{.*}}kiln.schedule = #kiln.schedule<vec = 16, parallel = 0>
// CHECK: kiln.linear {{.*}}kiln.schedule = #kiln.schedule<vec = 16, parallel = 1>
// CHECK-LABEL: func.func @prefill
// CHECK: kiln.layer_norm {{.*}}kiln.schedule = #kiln.schedule<vec = 16, parallel = 1>
module attributes {kiln.seq_bounds = array<i64: 512>, kiln.seq_names = ["L"]} {
  func.func @decode(%x: tensor<1x64xf32> {kiln.name = "x", kiln.syms = array<i64: -1, -1>}) -> (tensor<1x1024xf32> {kiln.name = "y"}) {
    %g = kiln.param "g" : tensor<64xf32>
    %n = kiln.layer_norm %x, %g, %g : (tensor<1x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
    %w = kiln.param "w" : tensor<1024x64xf32>
    %y = kiln.linear %n, %w : (tensor<1x64xf32>, tensor<1024x64xf32>) -> tensor<1x1024xf32>
    return %y : tensor<1x1024xf32>
  }
  func.func @prefill(%x: tensor<?x64xf32> {kiln.name = "xs", kiln.syms = array<i64: 0, -1>}) -> (tensor<?x64xf32> {kiln.name = "n"}) {
    %g = kiln.param "g" : tensor<64xf32>
    %n = kiln.layer_norm %x, %g, %g : (tensor<?x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<?x64xf32>
    return %n : tensor<?x64xf32>
  }
}
