// RUN: kiln-opt %s --kiln-loop-sequences | FileCheck %s
// RUN: kiln-opt %s --kiln-loop-sequences --kiln-outline-kernels --kiln-plan-buffers --kiln-lower-to-llvm | FileCheck %s --check-prefix=LLVM

// Symbols: L (0), B (1, bound 4), B*L (2, the rows of the batch: factors 1 and 0). Row-wise
// kernels run once over all rows; attention and the position table run once per sequence
// (kiln.per_sequence = B); an entry that writes a cache runs one sequence (kiln.single_sequence).
// CHECK-LABEL: func.func @forward
// CHECK-NOT: kiln.single_sequence
// CHECK: kiln.position_embedding {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.linear
// CHECK-NOT: kiln.per_sequence
// CHECK: kiln.attention {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.relu
// CHECK-NOT: kiln.per_sequence
// CHECK: return
// A padded batch of sentences: attention with a key mask over the rows, and the mean pooling to a
// row per sequence (rows B), each run per sequence; the normalization once over the B rows.
// CHECK-LABEL: func.func @embed
// CHECK-NOT: kiln.single_sequence
// CHECK: kiln.attention {{.*}}key_mask{{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.mean_pool {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.l2_normalize
// CHECK-NOT: kiln.per_sequence
// CHECK: return
// CHECK-LABEL: func.func @cached
// CHECK-SAME: kiln.single_sequence = "it writes a KV cache"
// A cache kept per sequence of B (kiln.state with batch = 1) is written per sequence, by a
// prompt's rows (B*L) as by a batched decode step's one row per sequence (rows B itself), and
// attended to per sequence; row-wise kernels still run once.
// CHECK-LABEL: func.func @batched_cache
// CHECK-NOT: kiln.single_sequence
// CHECK: kiln.cache_write {{.*}}kiln.per_sequence = 1 : i64
// CHECK-LABEL: func.func @decode_batch
// CHECK-NOT: kiln.single_sequence
// CHECK: kiln.embedding
// CHECK-NOT: kiln.per_sequence
// CHECK: kiln.cache_write {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.attention {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.relu
// CHECK-NOT: kiln.per_sequence
// CHECK: return
// The per-sequence call: a loop over b < B whose views start b * L rows further (L is syms[0]).
// LLVM-LABEL: llvm.func @kiln_entry_forward
// LLVM: llvm.icmp "slt"
// LLVM: llvm.cond_br
// The batched decode step: cache_write and attention each in a loop over b < B, the cache's
// view b values (1 x 8 x 8 = 64 floats) further.
// LLVM-LABEL: llvm.func @kiln_entry_decode_batch
// LLVM: %[[N:.*]] = llvm.mlir.constant(64 : i64) : i64
// LLVM-NEXT: %[[OFF:.*]] = llvm.mul %[[N]], %{{.*}} : i64
// LLVM-NEXT: llvm.add %{{.*}}, %[[OFF]] : i64
// LLVM: llvm.call @kiln_cache_write
// LLVM: llvm.icmp "slt"
// LLVM: llvm.call @kiln_attention
// LLVM: llvm.icmp "slt"
// Ragged decoding: a past per sequence ([B]) and cache slots (kiln.cache_slots): each
// sequence's call sees its own past (a [1] view b values further) and the cache of slot
// slots[b] (the slot loaded from the slots input, times 64 floats).
// CHECK-LABEL: func.func @ragged
// CHECK-NOT: kiln.single_sequence
// CHECK: kiln.cache_write {{.*}}kiln.per_sequence = 1 : i64
// CHECK: kiln.attention {{.*}}kiln.per_sequence = 1 : i64
// LLVM-LABEL: llvm.func @kiln_entry_ragged
// LLVM: %[[SLOT:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i32
// LLVM-NEXT: %[[S64:.*]] = llvm.sext %[[SLOT]] : i32 to i64
// LLVM-NEXT: %[[N:.*]] = llvm.mlir.constant(64 : i64) : i64
// LLVM-NEXT: %[[OFF:.*]] = llvm.mul %[[N]], %[[S64]] : i64
// LLVM-NEXT: llvm.add %{{.*}}, %[[OFF]] : i64
// LLVM: llvm.call @kiln_cache_write
// LLVM: llvm.icmp "slt"
// One slot for an entry without the batch (a chunk appended to one slot's cache): the cache's
// view starts slots[0] caches further, with no loop; the same slot with a batch's rows runs one
// sequence at a time.
// CHECK-LABEL: func.func @one_slot
// CHECK-NOT: kiln.per_sequence
// CHECK: return
// LLVM-LABEL: llvm.func @kiln_entry_one_slot
// LLVM: %[[SLOT1:.*]] = llvm.load %{{.*}} : !llvm.ptr -> i32
// LLVM-NEXT: %[[S1:.*]] = llvm.sext %[[SLOT1]] : i32 to i64
// LLVM-NEXT: %[[N1:.*]] = llvm.mlir.constant(64 : i64) : i64
// LLVM-NEXT: llvm.mul %[[N1]], %[[S1]] : i64
// LLVM: llvm.call @kiln_cache_write
// LLVM-NOT: llvm.icmp "slt"
// LLVM: llvm.return
// CHECK-LABEL: func.func @one_slot_batch
// CHECK-SAME: kiln.single_sequence = "it takes a single cache slot"
module attributes {kiln.seq_names = ["L", "B", "B*L"], kiln.seq_bounds = array<i64: 8, 4, 32>,
                   kiln.seq_factors = array<i64: -1, -1, -1, -1, 1, 0>} {
  func.func @forward(%t: tensor<?xi32> {kiln.name = "tokens", kiln.syms = array<i64: 2>}) -> (tensor<?x8xf32> {kiln.name = "y"}) {
    %wpe = kiln.param "wpe" : tensor<8x8xf32>
    %w = kiln.param "w" : tensor<8x8xf32>
    %p = kiln.position_embedding %wpe, %t : (tensor<8x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %h = kiln.linear %p, %w : (tensor<?x8xf32>, tensor<8x8xf32>) -> tensor<?x8xf32>
    %q = kiln.reshape %h : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %o = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 0.35 : f32} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>) -> tensor<1x?x8xf32>
    %r = kiln.reshape %o : (tensor<1x?x8xf32>) -> tensor<?x8xf32>
    %y = kiln.relu %r : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %y : tensor<?x8xf32>
  }
  func.func @embed(%t: tensor<?xi32> {kiln.name = "tokens3", kiln.syms = array<i64: 2>},
                    %mask: tensor<?xi32> {kiln.name = "attention_mask", kiln.syms = array<i64: 2>}) -> (tensor<?x8xf32> {kiln.name = "e"}) {
    %wpe = kiln.param "wpe" : tensor<8x8xf32>
    %p = kiln.position_embedding %wpe, %t : (tensor<8x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %q = kiln.reshape %p : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %o = kiln.attention %q, %q, %q, %mask {key_mask, scale = 0.35 : f32} : (tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<1x?x8xf32>, tensor<?xi32>) -> tensor<1x?x8xf32>
    %r = kiln.reshape %o : (tensor<1x?x8xf32>) -> tensor<?x8xf32>
    %m = kiln.mean_pool %r, %mask {batch = 1 : i64} : (tensor<?x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %e = kiln.l2_normalize %m : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %e : tensor<?x8xf32>
  }
  func.func @cached(%t: tensor<?xi32> {kiln.name = "tokens2", kiln.syms = array<i64: 2>}) -> (tensor<?x8xf32> {kiln.name = "z"}) {
    %wpe = kiln.param "wpe" : tensor<8x8xf32>
    %p = kiln.position_embedding %wpe, %t : (tensor<8x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %p : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "cache" : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v : (tensor<1x8x8xf32>, tensor<1x?x8xf32>) -> tensor<1x8x8xf32>
    %z = kiln.relu %p : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
  func.func @batched_cache(%t: tensor<?xi32> {kiln.name = "tokens3", kiln.syms = array<i64: 2>}) -> (tensor<?x8xf32> {kiln.name = "z3"}) {
    %wpe = kiln.param "wpe" : tensor<8x8xf32>
    %p = kiln.position_embedding %wpe, %t : (tensor<8x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %p : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "bcache" {batch = 1 : i64} : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v : (tensor<1x8x8xf32>, tensor<1x?x8xf32>) -> tensor<1x8x8xf32>
    %z = kiln.relu %p : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
  func.func @decode_batch(%n: tensor<?xi32> {kiln.name = "next", kiln.syms = array<i64: 1>},
                          %past: tensor<1xi32> {kiln.name = "past", kiln.syms = array<i64: -1>}) -> (tensor<?x8xf32> {kiln.name = "z4"}) {
    %wte = kiln.param "wte" : tensor<16x8xf32>
    %e = kiln.embedding %wte, %n : (tensor<16x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %e : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "bcache" {batch = 1 : i64} : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v, %past : (tensor<1x8x8xf32>, tensor<1x?x8xf32>, tensor<1xi32>) -> tensor<1x8x8xf32>
    %o = kiln.attention %v, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.35 : f32} : (tensor<1x?x8xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>, tensor<1xi32>) -> tensor<1x?x8xf32>
    %r = kiln.reshape %o : (tensor<1x?x8xf32>) -> tensor<?x8xf32>
    %z = kiln.relu %r : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
  func.func @ragged(%n: tensor<?xi32> {kiln.name = "next_r", kiln.syms = array<i64: 1>},
                    %past: tensor<?xi32> {kiln.name = "past_r", kiln.syms = array<i64: 1>},
                    %slots: tensor<?xi32> {kiln.name = "slots_r", kiln.syms = array<i64: 1>, kiln.cache_slots}) -> (tensor<?x8xf32> {kiln.name = "z5"}) {
    %wte = kiln.param "wte" : tensor<16x8xf32>
    %e = kiln.embedding %wte, %n : (tensor<16x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %e : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "bcache" {batch = 1 : i64} : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v, %past : (tensor<1x8x8xf32>, tensor<1x?x8xf32>, tensor<?xi32>) -> tensor<1x8x8xf32>
    %o = kiln.attention %v, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.35 : f32} : (tensor<1x?x8xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>, tensor<?xi32>) -> tensor<1x?x8xf32>
    %r = kiln.reshape %o : (tensor<1x?x8xf32>) -> tensor<?x8xf32>
    return %r : tensor<?x8xf32>
  }
  func.func @one_slot(%t: tensor<?xi32> {kiln.name = "chunk", kiln.syms = array<i64: 0>},
                      %past: tensor<1xi32> {kiln.name = "past1", kiln.syms = array<i64: -1>},
                      %slot: tensor<1xi32> {kiln.name = "slot", kiln.syms = array<i64: -1>, kiln.cache_slots}) -> (tensor<?x8xf32> {kiln.name = "z6"}) {
    %wte = kiln.param "wte" : tensor<16x8xf32>
    %e = kiln.embedding %wte, %t : (tensor<16x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %e : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "bcache" {batch = 1 : i64} : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v, %past : (tensor<1x8x8xf32>, tensor<1x?x8xf32>, tensor<1xi32>) -> tensor<1x8x8xf32>
    %o = kiln.attention %v, %c, %c, %past {mask = #kiln.mask<causal>, scale = 0.35 : f32} : (tensor<1x?x8xf32>, tensor<1x8x8xf32>, tensor<1x8x8xf32>, tensor<1xi32>) -> tensor<1x?x8xf32>
    %r = kiln.reshape %o : (tensor<1x?x8xf32>) -> tensor<?x8xf32>
    return %r : tensor<?x8xf32>
  }
  func.func @one_slot_batch(%t: tensor<?xi32> {kiln.name = "tokens_s", kiln.syms = array<i64: 2>},
                            %slot: tensor<1xi32> {kiln.name = "slot_b", kiln.syms = array<i64: -1>, kiln.cache_slots}) -> (tensor<?x8xf32> {kiln.name = "z7"}) {
    %wpe = kiln.param "wpe" : tensor<8x8xf32>
    %p = kiln.position_embedding %wpe, %t : (tensor<8x8xf32>, tensor<?xi32>) -> tensor<?x8xf32>
    %v = kiln.reshape %p : (tensor<?x8xf32>) -> tensor<1x?x8xf32>
    %s = kiln.state "bcache" {batch = 1 : i64} : tensor<1x8x8xf32>
    %c = kiln.cache_write %s, %v : (tensor<1x8x8xf32>, tensor<1x?x8xf32>) -> tensor<1x8x8xf32>
    %z = kiln.relu %p : (tensor<?x8xf32>) -> tensor<?x8xf32>
    return %z : tensor<?x8xf32>
  }
}
