// RUN: kiln-opt %s --kiln-assign-schedule=vector-width=16 | FileCheck %s

// Every kernel gets the vector width and a parallel outer loop; a 4-wide row is not
// vectorized 16-wide.
// CHECK-LABEL: func.func @schedules
// CHECK: kiln.linear {{.*}}kiln.schedule = {parallel = 1 : i64, tile_m = 4 : i64, vec = 16 : i64}
// CHECK: kiln.relu {{.*}}kiln.schedule = {parallel = 1 : i64, vec = 4 : i64}
func.func @schedules(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %w = kiln.param "w" : tensor<32x8xf32>
  %h = kiln.linear %x, %w {kiln.schedule = {tile_m = 4 : i64}} : (tensor<?x8xf32>, tensor<32x8xf32>) -> tensor<?x32xf32>
  %s = kiln.slice %h {axis = 1 : i64, offset = 0 : i64} : (tensor<?x32xf32>) -> tensor<?x4xf32>
  %r = kiln.relu %s : (tensor<?x4xf32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}
