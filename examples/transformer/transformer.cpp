// examples/transformer: the encoder-decoder Transformer of "Attention Is All You Need" in the
// kiln DSL, reading a torch.nn.Transformer state_dict layout.
//
// Embeddings scaled by sqrt(d) plus sinusoidal positions; post-norm encoder layers
// (self-attention, ReLU FFN) and decoder layers (causal self-attention, cross-attention over the
// encoder output, ReLU FFN); final encoder.norm and decoder.norm; a linear generator.
// Inputs `src_tokens` [S], `tgt_tokens` [T]; output `logits` [T, tgt_vocab].
//
// Parameter names (torch.nn.Transformer's, plus three of kiln's):
//   src_embed.weight [src_vocab, d], tgt_embed.weight [tgt_vocab, d], generator.{weight,bias}
//   encoder.layers.{i}.self_attn.{in_proj_weight [3d, d], in_proj_bias, out_proj.weight, out_proj.bias}
//   encoder.layers.{i}.{linear1,linear2,norm1,norm2}.{weight,bias}, encoder.norm.{weight,bias}
//   decoder.layers.{i}.{self_attn,multihead_attn}.* as above, {linear1,linear2,norm1,norm2,norm3}.*
//   decoder.norm.{weight,bias}
//
//   build/bin/transformer-compile --layers 2 --d-model 64 --heads 4 --d-ff 128 --src-vocab 300 \
//       --tgt-vocab 300 --ctx 64 -o transformer
//   ./transformer --random-weights --tokens src_tokens=5,6,7 --tokens tgt_tokens=1,8
//   ./transformer --random-weights --tokens 5,6,7 --generate 10 --start-token 1
//
// Entries: `forward` (the inputs above), `encode` (src_tokens; fills the cross-attention caches)
// and `decode` (token, past, memory_len -> next_logits; self-attention over the decoder's cache).
// --generate runs the encoder once, then one decode step per token from --start-token.
// --train adds `gradients`: src_tokens, tgt_tokens and targets [T] -> the loss and every
// parameter's gradient.
#include <cmath>

#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

struct TransformerConfig {
  int64_t layers = 6, d_model = 512, heads = 8, d_ff = 2048, src_vocab = 32000, tgt_vocab = 32000, ctx = 256, batch = 1;
  bool train = false;
};

static void build_transformer(kiln::Model &m, const TransformerConfig &c) {
  using namespace kiln;
  const int64_t d = c.d_model;
  if (c.layers < 1 || d <= 0 || c.heads <= 0 || d % c.heads || d % 2)
    throw Error("transformer: --d-model (" + std::to_string(d) + ") must be an even positive multiple of --heads (" +
                    std::to_string(c.heads) + ") and --layers at least 1",
                SourceLoc::current());
  auto vec = [&](const std::string &n, int64_t size, Init init) { return m.param(n, {size}, {.init = init}); };
  auto norm = [&](const std::string &p, Tensor x) {
    return layer_norm(x, vec(p + ".weight", d, Init::Ones), vec(p + ".bias", d, Init::Zeros), {.eps = 1e-5f});
  };
  auto dense = [&](const std::string &p, Tensor x, int64_t in, int64_t out) {  // nn.Linear: x·Wᵀ + b
    return linear(x, m.param(p + ".weight", {out, in}), vec(p + ".bias", out, Init::Zeros));
  };
  // nn.MultiheadAttention: in_proj_weight [3d, d] holds W_q, W_k, W_v stacked by rows.
  struct InProj {
    Tensor w, b;
  };
  auto in_proj = [&](const std::string &p) {
    return InProj{m.param(p + ".in_proj_weight", {3 * d, d}), vec(p + ".in_proj_bias", 3 * d, Init::Zeros)};
  };
  // x times rows [part·d, (part + parts)·d) of the packed projection, split into `parts` tensors.
  auto project = [&](const InProj &w, Tensor x, int64_t part, int64_t parts) {
    std::vector<int64_t> sizes(parts, d);
    if (parts == 3) return split(linear(x, w.w, w.b), 1, sizes);
    return split(linear(x, slice(w.w, 0, part * d, parts * d), slice(w.b, 0, part * d, parts * d)), 1, sizes);
  };
  auto heads = [&](Tensor x) { return split_heads(x, c.heads); };
  auto out_proj = [&](const std::string &p, Tensor a) { return dense(p + ".out_proj", merge_heads(a), d, d); };
  auto mha = [&](const std::string &p, Tensor x, Tensor mem, bool causal) {
    InProj w = in_proj(p);
    Tensor q, k, v;
    if (mem.id() == x.id()) {
      std::vector<Tensor> qkv = project(w, x, 0, 3);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      q = project(w, x, 0, 1)[0];
      std::vector<Tensor> kv = project(w, mem, 1, 2);
      k = kv[0], v = kv[1];
    }
    return out_proj(p, attention(heads(q), heads(k), heads(v), {.mask = causal ? Mask::causal() : Mask::none()}));
  };
  auto ffn = [&](const std::string &p, Tensor x) {
    return dense(p + ".linear2", relu(dense(p + ".linear1", x, d, c.d_ff)), c.d_ff, d);
  };
  auto embed = [&](const char *table, int64_t vocab, Tensor tokens, Tensor start) {
    Tensor e = scale(embedding(m.param(table, {vocab, d}, {.scale = 1.0f / std::sqrt((float)d)}), tokens),
                     std::sqrt((float)d));
    return add(e, sinusoidal_positions(tokens, d, {.start = start}));
  };
  auto encoder = [&](Tensor src) {
    Tensor x = embed("src_embed.weight", c.src_vocab, src, Tensor());
    for (int64_t i = 0; i < c.layers; ++i) {
      std::string p = "encoder.layers." + std::to_string(i);
      x = norm(p + ".norm1", add(x, mha(p + ".self_attn", x, x, false)));
      x = norm(p + ".norm2", add(x, ffn(p, x)));
    }
    return norm("encoder.norm", x);
  };
  auto cache = [&](const char *kind, int64_t i) { return m.state(std::string(kind) + std::to_string(i), {c.heads, c.ctx, d / c.heads}); };
  auto generator = [&](Tensor y) { return dense("generator", norm("decoder.norm", y), d, c.tgt_vocab); };

  // forward: the whole target sequence at once (teacher forcing).
  // --batch: `forward` and `gradients` run B pairs of sequences at once ([B, S] and [B, T]
  // inputs); `encode`, which fills the cross-attention caches, takes one (B = 1).
  Dim S0 = m.seq("S", c.ctx), T0 = m.seq("T", c.ctx), B = m.batch("B", c.batch);
  Dim S = m.rows(B, S0), T = m.rows(B, T0);
  auto teacherForced = [&](Tensor src, Tensor tgt) {
    Tensor memory = encoder(src);
    Tensor y = embed("tgt_embed.weight", c.tgt_vocab, tgt, Tensor());
    for (int64_t i = 0; i < c.layers; ++i) {
      std::string p = "decoder.layers." + std::to_string(i);
      y = norm(p + ".norm1", add(y, mha(p + ".self_attn", y, y, true)));
      y = norm(p + ".norm2", add(y, mha(p + ".multihead_attn", y, memory, false)));
      y = norm(p + ".norm3", add(y, ffn(p, y)));
    }
    return generator(y);
  };
  m.output("logits", teacherForced(m.tokens("src_tokens", S, c.src_vocab), m.tokens("tgt_tokens", T, c.tgt_vocab)));

  // encode: the source once; every decoder layer's cross-attention keys and values go to the
  // cross caches, which all decode steps read.
  m.entry("encode", EntryRole::Encode);
  Tensor memory1 = encoder(m.tokens("src_tokens", S, c.src_vocab));
  for (int64_t i = 0; i < c.layers; ++i) {
    std::vector<Tensor> kv = project(in_proj("decoder.layers." + std::to_string(i) + ".multihead_attn"), memory1, 1, 2);
    m.keep(cache_write(cache("cross.k.", i), heads(kv[0])));
    m.keep(cache_write(cache("cross.v.", i), heads(kv[1])));
  }
  m.output("memory", memory1);

  // decode: one target token at position `past`; self-attention over the decoder's own cache,
  // cross-attention over the first `memory_len` rows of the cross caches.
  m.entry("decode", EntryRole::Decode);
  Tensor token = m.tokens("token", 1, c.tgt_vocab);
  Tensor past = m.input("past", {1}, {.dtype = DType::I32, .vocab = c.ctx});
  Tensor memory_len = m.input("memory_len", {1}, {.dtype = DType::I32, .vocab = c.ctx + 1});
  Tensor y1 = embed("tgt_embed.weight", c.tgt_vocab, token, past);
  for (int64_t i = 0; i < c.layers; ++i) {
    std::string p = "decoder.layers." + std::to_string(i), sa = p + ".self_attn", ca = p + ".multihead_attn";
    std::vector<Tensor> qkv = project(in_proj(sa), y1, 0, 3);
    Tensor kc = cache_write(cache("self.k.", i), heads(qkv[1]), past);
    Tensor vc = cache_write(cache("self.v.", i), heads(qkv[2]), past);
    y1 = norm(p + ".norm1", add(y1, out_proj(sa, attention(heads(qkv[0]), kc, vc, {.mask = Mask::causal(), .past = past}))));
    Tensor q = heads(project(in_proj(ca), y1, 0, 1)[0]);
    Tensor xa = attention(q, cache("cross.k.", i), cache("cross.v.", i), {.key_count = memory_len});
    y1 = norm(p + ".norm2", add(y1, out_proj(ca, xa)));
    y1 = norm(p + ".norm3", add(y1, ffn(p, y1)));
  }
  m.output("next_logits", generator(y1));

  // --train: `gradients`, the teacher-forced cross-entropy of `targets` [T] (-1 where a position
  // has none) and its gradient with respect to every parameter (grad.<name>).
  if (!c.train) return;
  m.entry("gradients", EntryRole::Gradients);
  Tensor logits = teacherForced(m.tokens("src_tokens", S, c.src_vocab), m.tokens("tgt_tokens", T, c.tgt_vocab));
  m.loss(cross_entropy(logits, m.targets("targets", T, c.tgt_vocab)));
  m.gradients();
}

int main(int argc, char **argv) {
  kiln::Driver driver("transformer", "transformer-compile: compile an encoder-decoder Transformer with kiln");
  TransformerConfig c;
  CLI::App &app = driver.app();
  app.add_option("--layers", c.layers, "encoder and decoder layers")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "attention heads")->capture_default_str();
  app.add_option("--d-ff", c.d_ff, "FFN width")->capture_default_str();
  app.add_option("--src-vocab", c.src_vocab, "source vocabulary")->capture_default_str();
  app.add_option("--tgt-vocab", c.tgt_vocab, "target vocabulary")->capture_default_str();
  app.add_option("--ctx", c.ctx, "maximum source and target length (compiled bound)")->capture_default_str();
  app.add_option("--batch", c.batch, "maximum sequence pairs per run of forward and gradients (compiled bound)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 12))
      ->capture_default_str();
  app.add_flag("--train", c.train, "add the entry `gradients` (src_tokens, tgt_tokens, targets -> loss, grad.<name>)");
  return driver.run(argc, argv, [&](kiln::Model &m) { build_transformer(m, c); });
}
