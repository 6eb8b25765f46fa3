// examples/llama: the Llama family (Llama 2 and 3, SmolLM, Qwen2, Qwen3, Mistral, ...) in
// the kiln DSL, with Hugging Face's parameter names and layouts
// (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM).
//
// Pre-norm blocks with RMSNorm; rotary positions on q and k (half-split pairs, as Hugging
// Face's rotate_half); grouped-query attention (the KV cache holds the key and value heads
// only, each read by its group of query heads); the gated FFN down(silu(gate(x)) · up(x));
// linears without bias; the head tied to the token embedding or not (tie_word_embeddings).
// --model-type (config.json's model_type) names the relative: qwen2 has biases on q, k and v
// (not o); qwen3 normalises each head of q and k (q_norm, k_norm: RMSNorm over the head dim,
// before the rotation). sliding_window (Mistral's) limits each query to the last w keys, over the
// KV cache too (a Qwen model's per-layer windows are refused). Scaled rotary positions:
// rope_type linear (positions divided by factor) and llama3 (Llama 3.1's scaling by wavelength:
// factor, low_freq_factor, high_freq_factor, original_max_position_embeddings).
//
//   build/bin/llama-compile --config config.json --ctx 2048 -o llama
//   ./llama --weights model.safetensors --tokens 1,4093,314 --generate 32
//
// Entries as examples/gpt2's: `forward` (every row's logits; fills the caches), `prefill`
// (the last row's logits), `decode` (one token at `past`), `extend` (a chunk of tokens at
// `past`: a conversation's next turn; with --batch, of one slot's cache), `decode_batch`
// (--batch > 1: a token per sequence, each at its own past and cache slot), and
// with --train `gradients`, `eval` and `train_step`.
#include <cmath>

#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

struct LlamaConfig {
  int64_t layers = 30, d_model = 576, heads = 9, kv_heads = 0, head_dim = 0, ffn = 1536, vocab = 49152, ctx = 2048,
          batch = 1;
  double rms_eps = 1e-5, rope_theta = 10000.0;
  bool tied = false, train = false, checkpoint = false;
  bool attention_bias = false, mlp_bias = false;  // biases on q/k/v/o, on gate/up/down (Hugging Face's flags)
  std::string model_type = "llama";              // llama, qwen2 (q/k/v biases), qwen3 (q/k norms)
  int64_t sliding_window = 0;                    // config.json's (0 or absent: none)
  std::string rope_type = "default";             // default, linear or llama3 (rope_scaling's)
  double rope_factor = 1.0, rope_low_freq_factor = 0.0, rope_high_freq_factor = 0.0;
  int64_t rope_original_context = 0;             // llama3: original_max_position_embeddings
  float lr = 1e-3f;
  int64_t warmup = 0, decay_steps = 0;
};

static void build_llama(kiln::Model &m, LlamaConfig c) {
  using namespace kiln;
  const int64_t d = c.d_model, H = c.heads;
  auto n = [](int64_t v) { return std::to_string(v); };
  if (c.layers < 0 || d <= 0 || H <= 0 || c.ffn <= 0)
    throw Error("llama: --layers must be non-negative and --d-model, --heads and --ffn positive", SourceLoc::current());
  if (c.kv_heads == 0) c.kv_heads = H;
  if (c.head_dim == 0) {
    if (d % H) throw Error("llama: --d-model (" + n(d) + ") is no multiple of --heads (" + n(H) + "); give --head-dim", SourceLoc::current());
    c.head_dim = d / H;
  }
  const int64_t Hkv = c.kv_heads, hd = c.head_dim;
  if (Hkv <= 0 || H % Hkv)
    throw Error("llama: --kv-heads (" + n(Hkv) + ") must divide --heads (" + n(H) + ")", SourceLoc::current());
  if (hd % 2) throw Error("llama: the head dim (" + n(hd) + ") must be even (rotary pairs)", SourceLoc::current());
  const bool qwen2 = c.model_type == "qwen2", qwen3 = c.model_type == "qwen3";
  if (!qwen2 && !qwen3 && c.model_type != "llama" && c.model_type != "mistral")
    throw Error("llama: model_type '" + c.model_type + "' is not one this program compiles (llama, mistral, qwen2, qwen3)",
                SourceLoc::current());
  // Mistral's sliding window: query i sees keys i - w < j <= i, over the cache too. A window
  // no shorter than the context is plain causal attention. Qwen2 and Qwen3 choose windowed
  // layers by layer_types, which this program does not read: refused.
  const bool windowed = c.sliding_window > 0 && c.sliding_window < c.ctx;
  if (windowed && (qwen2 || qwen3))
    throw Error("llama: a sliding window of " + n(c.sliding_window) + " positions, shorter than --ctx " + n(c.ctx) + ", in a " +
                    c.model_type + " model (windowed layers chosen by layer_types) is not supported yet; compile with --ctx " +
                    n(c.sliding_window) + " or less",
                SourceLoc::current());
  const Mask mask = windowed ? Mask::window(c.sliding_window) : Mask::causal();
  const bool linearRope = c.rope_type == "linear", llama3Rope = c.rope_type == "llama3";
  if (!linearRope && !llama3Rope && c.rope_type != "default")
    throw Error("llama: rope_type '" + c.rope_type + "' is not one this program computes (default, linear, llama3)",
                SourceLoc::current());
  if ((linearRope || llama3Rope) && !(c.rope_factor > 0 && std::isfinite(c.rope_factor)))
    throw Error("llama: rope_type " + c.rope_type + " needs a positive factor (--rope-factor)", SourceLoc::current());
  if (llama3Rope && (c.rope_original_context <= 0 || !(c.rope_low_freq_factor > 0) ||
                     !(c.rope_high_freq_factor > c.rope_low_freq_factor)))
    throw Error("llama: rope_type llama3 needs original_max_position_embeddings > 0 and 0 < low_freq_factor < "
                "high_freq_factor (--rope-original-context, --rope-low-freq-factor, --rope-high-freq-factor)",
                SourceLoc::current());
  if (c.tied) m.ignore_weights({"lm_head.weight"});
  // Hugging Face's LlamaConfig: the sizes, and what changes the numbers (absent: its defaults).
  auto num = [](double v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", v);
    return std::string(buf);
  };
  m.checkpoint_config({{"model_type", "\"" + c.model_type + "\"", "as its model type", "\"llama\""},
                       {"num_hidden_layers", n(c.layers), "layers"},
                       {"hidden_size", n(d), "as its width"},
                       {"num_attention_heads", n(H), "query heads"},
                       {"num_key_value_heads", n(Hkv), "key and value heads", n(H)},
                       {"head_dim", n(hd), "as its head dim", n(d / H)},
                       {"intermediate_size", n(c.ffn), "as its FFN width"},
                       {"vocab_size", n(c.vocab), "tokens"},
                       {"rms_norm_eps", num(c.rms_eps), "as its RMS norm epsilon", "1e-06"},
                       {"rope_theta|rope_parameters.rope_theta", num(c.rope_theta), "as its rotary base", "10000"},
                       {"rope_parameters.rope_type|rope_scaling.rope_type|rope_scaling.type", "\"" + c.rope_type + "\"",
                        "as its rotary scaling", "\"default\""},
                       {"hidden_act", "\"silu\"", "as its activation", "\"silu\""},
                       {"attention_bias", c.attention_bias ? "true" : "false",
                        c.attention_bias ? "for attention with biases" : "for attention without biases", "false"},
                       {"mlp_bias", c.mlp_bias ? "true" : "false", c.mlp_bias ? "for an FFN with biases" : "for an FFN without biases",
                        "false"},
                       {"tie_word_embeddings", c.tied ? "true" : "false",
                        c.tied ? "for a head tied to the token embedding" : "for a head of its own (lm_head)", "false"}});
  // A windowed model needs the checkpoint's window; an unwindowed one, none shorter than its context.
  if (windowed)
    m.checkpoint_config({{"sliding_window", n(c.sliding_window), "as its sliding window"}});
  else
    m.checkpoint_config({{"sliding_window", n(c.ctx), "without a sliding window shorter than its context", std::nullopt, true}});
  if (linearRope || llama3Rope)
    m.checkpoint_config({{"rope_parameters.factor|rope_scaling.factor", num(c.rope_factor), "as its rotary scaling factor"}});
  if (llama3Rope)
    m.checkpoint_config(
        {{"rope_parameters.low_freq_factor|rope_scaling.low_freq_factor", num(c.rope_low_freq_factor), "as its low_freq_factor"},
         {"rope_parameters.high_freq_factor|rope_scaling.high_freq_factor", num(c.rope_high_freq_factor), "as its high_freq_factor"},
         {"rope_parameters.original_max_position_embeddings|rope_scaling.original_max_position_embeddings",
          n(c.rope_original_context), "as its original context"}});
  Dim L = m.seq("L", c.ctx), B = m.batch("B", c.batch), N = m.rows(B, L);
  auto norm = [&](const std::string &p, Tensor x) {
    return rms_norm(x, m.param(p, {d}, {.init = Init::Ones}), {.eps = (float)c.rms_eps});
  };
  // A projection `p` (p.weight [out, in]; p.bias [out] where the config has biases).
  auto proj = [&](const std::string &p, Tensor x, int64_t in, int64_t out, bool bias) {
    return bias ? linear(x, m.param(p + ".weight", {out, in}), m.param(p + ".bias", {out}, {.init = Init::Zeros}))
                : linear(x, m.param(p + ".weight", {out, in}));
  };
  auto cacheState = [&](const std::string &name) {
    return c.batch > 1 ? m.state(name, {Hkv, c.ctx, hd}, B) : m.state(name, {Hkv, c.ctx, hd});
  };
  // One block: x [n, d] -> [n, d]; past and cache as in examples/gpt2 (none: the prompt from
  // position 0; cache false: the training entries).
  auto block = [&](int64_t i, Tensor x, Tensor past, bool cache) {
    std::string p = "model.layers." + std::to_string(i);
    Tensor h = norm(p + ".input_layernorm.weight", x);
    RopeOptions rot{.theta = (float)c.rope_theta, .style = RopeStyle::HalfSplit, .past = past};
    if (linearRope || llama3Rope) rot.scaling = (float)c.rope_factor;
    if (llama3Rope) {
      rot.original_context = c.rope_original_context;
      rot.low_freq_factor = (float)c.rope_low_freq_factor;
      rot.high_freq_factor = (float)c.rope_high_freq_factor;
    }
    const bool qkvBias = c.attention_bias || qwen2;
    Tensor q = split_heads(proj(p + ".self_attn.q_proj", h, d, H * hd, qkvBias), H);
    Tensor k = split_heads(proj(p + ".self_attn.k_proj", h, d, Hkv * hd, qkvBias), Hkv);
    if (qwen3) {  // each head's q and k normalised over the head dim, before the rotation
      q = rms_norm(q, m.param(p + ".self_attn.q_norm.weight", {hd}, {.init = Init::Ones}), {.eps = (float)c.rms_eps});
      k = rms_norm(k, m.param(p + ".self_attn.k_norm.weight", {hd}, {.init = Init::Ones}), {.eps = (float)c.rms_eps});
    }
    q = rope(q, rot);
    k = rope(k, rot);
    Tensor v = split_heads(proj(p + ".self_attn.v_proj", h, d, Hkv * hd, qkvBias), Hkv);
    Tensor a;
    if (!cache) {
      a = attention(q, k, v, {.mask = mask});
    } else if (Tensor kc = cache_write(cacheState("cache.k." + std::to_string(i)), k, past),
               vc = cache_write(cacheState("cache.v." + std::to_string(i)), v, past);
               past) {
      a = attention(q, kc, vc, {.mask = mask, .past = past});
    } else {
      m.keep(kc);
      m.keep(vc);
      a = attention(q, k, v, {.mask = mask});
    }
    x = add(x, proj(p + ".self_attn.o_proj", merge_heads(a), H * hd, d, c.attention_bias));
    Tensor h2 = norm(p + ".post_attention_layernorm.weight", x);
    Tensor f = mul(silu(proj(p + ".mlp.gate_proj", h2, d, c.ffn, c.mlp_bias)), proj(p + ".mlp.up_proj", h2, d, c.ffn, c.mlp_bias));
    return add(x, proj(p + ".mlp.down_proj", f, c.ffn, d, c.mlp_bias));
  };
  // The decoder shared by the entries: token ids -> logits [n, vocab].
  auto decoder = [&](Tensor ids, Tensor past, bool lastRow = false, bool cache = true) {
    Tensor embed = m.param("model.embed_tokens.weight", {c.vocab, d});
    Tensor x = embedding(embed, ids);
    for (int64_t i = 0; i < c.layers; ++i)
      x = !cache && c.checkpoint ? m.checkpoint([&] { return block(i, x, past, cache); }) : block(i, x, past, cache);
    if (lastRow) x = last(x, 0);
    x = norm("model.norm.weight", x);
    return linear(x, c.tied ? embed : m.param("lm_head.weight", {c.vocab, d}));
  };
  m.output("logits", decoder(m.tokens("tokens", N, c.vocab), Tensor()));
  m.entry("prefill", EntryRole::Prefill);
  m.output("last_logits", decoder(m.tokens("tokens", N, c.vocab), Tensor(), true));
  m.entry("decode", EntryRole::Decode);
  Tensor token = m.tokens("token", 1, c.vocab);
  m.output("next_logits", decoder(token, m.input("past", {1}, {.dtype = DType::I32, .vocab = c.ctx})));
  // extend: a chunk of tokens appended at `past` of the cache (its positions past, past + 1,
  // ...; the cache must already hold the first `past`): a chat's next turn runs only its own
  // tokens. The chunk's last row's logits.
  // --batch > 1 keeps a cache per sequence: the chunk goes into the cache of slot `slot` (a
  // prompt prefilled into a free slot at past 0, in chunks, or a turn appended to its own).
  m.entry("extend", EntryRole::Extend);
  Tensor chunk = m.tokens("chunk", m.seq("C", c.ctx), c.vocab);
  if (c.batch > 1) m.cache_slots("slot", 1, B);
  m.output("chunk_logits", decoder(chunk, m.input("past", {1}, {.dtype = DType::I32, .vocab = c.ctx}), true));
  if (c.batch > 1) {  // one token per sequence, sequence r at past_batch[r] of slot slots[r]'s cache
    m.entry("decode_batch", EntryRole::DecodeBatch);
    Tensor tokens = m.tokens("token_batch", B, c.vocab);
    Tensor pastB = m.input("past_batch", {B}, {.dtype = DType::I32, .vocab = c.ctx});
    m.cache_slots("slots", B, B);
    m.output("next_logits_batch", decoder(tokens, pastB));
  }
  if (!c.train) return;
  // --train: the mean cross-entropy of the next tokens (`targets`, -1 where a position has
  // none); AdamW with weight decay 0.1 on matrices, clipping at 1.
  auto nextTokenLoss = [&](EntryRole) {
    Tensor t = m.tokens("tokens", N, c.vocab);
    Tensor targets = m.targets("targets", N, c.vocab);
    m.loss(cross_entropy(decoder(t, Tensor(), false, false), targets));
  };
  TrainOptions opt{.optimizer = AdamW{.lr = c.lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f},
                   .clip_norm = 1.0f,
                   .warmup_steps = c.warmup};
  if (c.decay_steps > 0) opt.decay = Cosine{.steps = c.decay_steps, .min_ratio = 0.1f};
  training_entries(m, nextTokenLoss, opt);
}

int main(int argc, char **argv) {
  kiln::Driver driver("llama", "llama-compile: compile a Llama-family decoder (Hugging Face names and layouts) with kiln");
  LlamaConfig c;
  CLI::App &app = driver.app();
  app.add_option("--layers", c.layers, "decoder blocks")->capture_default_str();
  app.add_option("--d-model", c.d_model, "model width")->capture_default_str();
  app.add_option("--heads", c.heads, "query heads")->capture_default_str();
  app.add_option("--kv-heads", c.kv_heads, "key and value heads (grouped-query attention; 0: --heads)")->capture_default_str();
  app.add_option("--head-dim", c.head_dim, "features per head (0: --d-model / --heads)")->capture_default_str();
  app.add_option("--ffn", c.ffn, "the gated FFN's width")->capture_default_str();
  app.add_option("--vocab", c.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--ctx", c.ctx, "the compiled context: the longest sequence and the KV cache's length")->capture_default_str();
  app.add_option("--rms-eps", c.rms_eps, "RMSNorm's epsilon")->capture_default_str();
  app.add_option("--rope-theta", c.rope_theta, "the rotary positions' base")->capture_default_str();
  app.add_option("--rope-type", c.rope_type, "rotary scaling: default (none), linear or llama3")->capture_default_str();
  app.add_option("--rope-factor", c.rope_factor, "rotary scaling factor (linear, llama3)")->capture_default_str();
  app.add_option("--rope-low-freq-factor", c.rope_low_freq_factor, "llama3 rotary scaling: low_freq_factor");
  app.add_option("--rope-high-freq-factor", c.rope_high_freq_factor, "llama3 rotary scaling: high_freq_factor");
  app.add_option("--rope-original-context", c.rope_original_context,
                 "llama3 rotary scaling: original_max_position_embeddings");
  app.add_flag("--tied", c.tied, "the output head is the token embedding (no lm_head.weight)");
  app.add_flag("--attention-bias", c.attention_bias, "q_proj, k_proj, v_proj and o_proj have biases");
  app.add_flag("--mlp-bias", c.mlp_bias, "gate_proj, up_proj and down_proj have biases");
  app.add_option("--model-type", c.model_type, "llama, mistral, qwen2 (biases on q, k, v) or qwen3 (q and k norms)")
      ->capture_default_str();
  app.add_option("--sliding-window", c.sliding_window, "each query sees the last this many keys, itself included (0: all)")
      ->capture_default_str();
  driver.config_option("num_hidden_layers", "--layers", c.layers);
  driver.config_option("hidden_size", "--d-model", c.d_model);
  driver.config_option("num_attention_heads", "--heads", c.heads);
  driver.config_option("num_key_value_heads", "--kv-heads", c.kv_heads);
  driver.config_option("head_dim", "--head-dim", c.head_dim);
  driver.config_option("intermediate_size", "--ffn", c.ffn);
  driver.config_option("vocab_size", "--vocab", c.vocab);
  driver.config_option("rms_norm_eps", "--rms-eps", c.rms_eps);
  driver.config_option("rope_theta|rope_parameters.rope_theta", "--rope-theta", c.rope_theta);
  driver.config_option("rope_parameters.rope_type|rope_scaling.rope_type|rope_scaling.type", "--rope-type", c.rope_type);
  driver.config_option("rope_parameters.factor|rope_scaling.factor", "--rope-factor", c.rope_factor);
  driver.config_option("rope_parameters.low_freq_factor|rope_scaling.low_freq_factor", "--rope-low-freq-factor",
                       c.rope_low_freq_factor);
  driver.config_option("rope_parameters.high_freq_factor|rope_scaling.high_freq_factor", "--rope-high-freq-factor",
                       c.rope_high_freq_factor);
  driver.config_option("rope_parameters.original_max_position_embeddings|rope_scaling.original_max_position_embeddings",
                       "--rope-original-context", c.rope_original_context);
  driver.config_option("tie_word_embeddings", "--tied", c.tied);
  driver.config_option("attention_bias", "--attention-bias", c.attention_bias);
  driver.config_option("mlp_bias", "--mlp-bias", c.mlp_bias);
  driver.config_option("model_type", "--model-type", c.model_type);
  driver.config_option("sliding_window", "--sliding-window", c.sliding_window);
  app.add_option("--batch", c.batch, "maximum sequences per run (compiled bound) of forward, decode_batch and the training entries")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 12))
      ->capture_default_str();
  app.add_flag("--train", c.train, "add the training entries: `gradients`, `eval` and `train_step` (AdamW; ./model --train)");
  app.add_flag("--train-checkpoint", c.checkpoint, "--train: checkpoint every block (its backward recomputes it)");
  app.add_option("--train-lr", c.lr, "--train: the peak learning rate")->capture_default_str();
  app.add_option("--train-warmup", c.warmup, "--train: linear warmup steps")->capture_default_str();
  app.add_option("--train-decay-steps", c.decay_steps, "--train: cosine decay to 0.1 x lr at this step (0: constant)")
      ->capture_default_str();
  return driver.run(argc, argv, [&](kiln::Model &m) { build_llama(m, c); });
}
