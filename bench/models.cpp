// kiln-bench-models: the DSL programs kiln-bench times, one case per invocation.
//
//   kiln-bench-models --case linear --n 768 --k 3072 --ctx 512 --emit=lib --lib-symbol S -o libS.a
//   kiln-bench-models --case attention --causal --heads 12 --dim 64 --ctx 8192 ...
//   kiln-bench-models --case attention --pattern strided --stride 128 ...   (merged head: the union)
//   kiln-bench-models --case lsh --heads 4 --dim 64 --buckets 64 --hashes 2 --chunk 64 --ctx 65536 ...
//   kiln-bench-models --case ffn --d 768 --dff 3072 --ctx 4096 [--ffn-chunk off] ...
//   kiln-bench-models --case ut_layer --d 256 --heads 4 --ctx 512 ...   (the Universal Transformer's block, once)
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Blocks.h"

int main(int argc, char **argv) {
  kiln::Driver driver("bench", "kiln-bench-models: the models kiln-bench times");
  std::string kind = "linear";
  int64_t n = 768, k = 768, ctx = 512, heads = 12, dim = 64, d = 768, dff = 3072;
  bool causal = false;
  std::string pattern = "none";
  int64_t stride = 128, summary = 8;
  CLI::App &app = driver.app();
  app.add_option("--case", kind, "linear, attention, lsh, ffn or ut_layer")
      ->check(CLI::IsMember({"linear", "attention", "lsh", "ffn", "ut_layer"}));
  int64_t buckets = 64, hashes = 2, chunk = 64;
  app.add_option("--buckets", buckets, "lsh: buckets");
  app.add_option("--hashes", hashes, "lsh: hash rounds");
  app.add_option("--chunk", chunk, "lsh: chunk");
  app.add_option("--n", n, "linear: output features");
  app.add_option("--k", k, "linear: input features");
  app.add_option("--ctx", ctx, "bound of the sequence length (M for linears)");
  app.add_option("--heads", heads, "attention heads");
  app.add_option("--dim", dim, "attention head dim");
  app.add_flag("--causal", causal, "attention: causal mask");
  app.add_option("--pattern", pattern, "attention: sparse pattern (both halves, merged)")
      ->check(CLI::IsMember({"none", "strided", "fixed"}));
  app.add_option("--stride", stride, "strided: the stride; fixed: the block");
  app.add_option("--summary", summary, "fixed: summary positions per block");
  app.add_option("--d", d, "ffn: model width");
  app.add_option("--dff", dff, "ffn: inner width");
  return driver.run(argc, argv, [&](kiln::Model &m) {
    using namespace kiln;
    Dim L = m.seq("L", ctx);
    if (kind == "linear") {
      m.output("y", linear(m.input("x", {L, k}), m.param("w", {n, k})));
    } else if (kind == "attention") {
      Tensor q = m.input("q", {heads, L, dim}), kk = m.input("k", {heads, L, dim}), v = m.input("v", {heads, L, dim});
      Mask mask = causal ? Mask::causal() : Mask::none();
      if (pattern == "strided") mask = Mask::strided({.stride = stride});
      if (pattern == "fixed") mask = Mask::fixed({.block = stride, .summary = summary});
      m.output("o", attention(q, kk, v, {.mask = mask}));
    } else if (kind == "lsh") {
      Tensor qk = m.input("qk", {heads, L, dim}), v = m.input("v", {heads, L, dim});
      Tensor rot = m.param("rot", {hashes, dim, buckets / 2}, {.scale = 1.0f});
      m.output("o", lsh_attention(qk, v, rot, {.buckets = buckets, .hashes = hashes, .chunk = chunk}));
    } else if (kind == "ut_layer") {  // the block examples/universal repeats, with the signal it adds per step
      Tensor x = m.input("x", {L, d});
      m.output("y", universal_block(m, "ut.block", add(x, sinusoidal_positions(x, d)), {.d_model = d, .heads = heads, .d_ff = 4 * d}));
    } else {
      Tensor x = m.input("x", {L, d});
      Tensor h = gelu(linear(x, m.param("w1", {dff, d}), m.param("b1", {dff})), {.approx = GeluApprox::Tanh});
      m.output("y", add(x, linear(h, m.param("w2", {d, dff}), m.param("b2", {d}))));
    }
  });
}
