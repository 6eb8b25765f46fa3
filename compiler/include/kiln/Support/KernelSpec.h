// KernelSpec.h - what one kernel computes and how it is scheduled, as plain data.
//
// `kiln-outline-kernels` writes a spec for every kernel op as the `kiln.kernel_spec` attribute;
// the Halide code generator reads it back. Its canonical text is the content key of the kernel
// cache: same op, shapes, attributes and schedule (and target) -> same kernel, generated once.
//
//   linear;act=gelu_tanh;layout=in_out;s.tile_m=4;s.tile_n=64;s.vec=16|?x128:f32,128x512:f32,512:f32->?x512:f32
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct TensorDesc {
  std::vector<int64_t> dims;  // -1: dynamic (a sequence length)
  bool is_int = false;        // i32 (token ids) or f32
  std::string text() const;
};

// The kernel families: one Halide algorithm (with a CPU and a GPU schedule) each, in
// compiler/lib/Codegen/Kernels/. Host: served by the runtime (kilnrt), not generated.
enum class KernelFamily {
  Matmul,             // linear, matmul, batch_matmul
  Ffn,                // the chunked FFN
  Attention,          // whole-sequence (online block engine) and cache/decode (row strips)
  SparseAttention,    // block-sparse patterns on the online block engine
  LshHash,            // the Reformer's bucketing
  LshChunkAttention,  // attention within sorted chunks on the online block engine
  RowReduce,          // layer_norm, softmax
  Elementwise,        // add, mul, scale, activations
  DataMovement,       // embeddings, positions, transpose, slice, concat, mask, cache writes
  DepthwiseConv,
  Act,                // adaptive computation time on the recurrent carry
  Host,               // lsh_sort (kilnrt_kernel_lsh_sort)
};

struct KernelSpec {
  std::string kind;                          // the kiln op name: linear, attention, ...
  KernelFamily family = KernelFamily::Host;
  std::map<std::string, std::string> attrs;  // op attributes, and the schedule under "s."
  std::vector<TensorDesc> inputs;
  TensorDesc output;

  std::string text() const;
  static std::optional<KernelSpec> parse(const std::string &text);
  int64_t geti(const std::string &key, int64_t def) const;
  double getf(const std::string &key, double def) const;
  std::string gets(const std::string &key, const std::string &def = "") const;
  // "kiln_<kind>_<16 hex digits of FNV-1a(text + target)>"
  std::string name(const std::string &target) const;
};

uint64_t fnv1a(const std::string &s);

}  // namespace kiln
