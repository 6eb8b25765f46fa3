// generation.cpp - kilnrt_generate: the prompt once through the prefill entry, then one decode
// step per token with the KV cache; greedy or sampled (temperature, top-k, top-p) tokens.
//
// The entries are found by their roles (kiln_entry_role):
//  * Decoder-only models: the prompt runs through the prefill entry (which fills the caches and
//    gives the first new token's logits), then each new token through the decode entry (inputs
//    `token` [1] and `past` [1], output `next_logits`), which attends to the cached positions only.
//  * Encoder-decoder models (an encode entry): the source runs once through it (which fills the
//    cross-attention caches), then decode runs from `start_token`, with its input `memory_len`
//    set to the source length (the rows of encode's first output).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "internal.h"

using namespace kilnrt;

extern "C" const kiln_entry_info *kilnrt_entry_by_role(const kiln_model_info *m, kiln_entry_role role) {
  for (int i = 0; i < m->n_entries; ++i)
    if (m->entries[i].role == (int32_t)role) return &m->entries[i];
  return nullptr;
}

extern "C" const kiln_entry_info *kilnrt_prefill_entry(const kiln_model_info *m) {
  if (const kiln_entry_info *e = kilnrt_entry_by_role(m, KILN_ROLE_ENCODE)) return e;
  if (const kiln_entry_info *e = kilnrt_entry_by_role(m, KILN_ROLE_PREFILL)) return e;
  return kilnrt_entry_by_role(m, KILN_ROLE_FORWARD);
}

extern "C" kilnrt_status kilnrt_sample(const float *logits, int64_t vocab, const kilnrt_generate_options *o,
                                       uint64_t *state, int32_t *token) {
  if (vocab <= 0) return user_error("sampling from an empty logits row");
  int64_t best = 0;
  for (int64_t i = 0; i < vocab; ++i) {
    if (!std::isfinite(logits[i]))
      return user_error("the logits hold a non-finite value (" + std::to_string(logits[i]) + ") at token " +
                        std::to_string(i));
    if (logits[i] > logits[best]) best = i;
  }
  if (!(o->temperature > 0)) {  // greedy (also for a NaN temperature: checked by the callers)
    *token = (int32_t)best;
    return KILNRT_OK;
  }
  // Weights over the whole row, in id order: exp((l - max) / T), summing to `sum`.
  const double T = o->temperature, top = logits[best] / T;
  std::vector<double> w((size_t)vocab);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += w[i] = std::exp(logits[i] / T - top);
  // Candidates: by decreasing logit (ties: the smaller id first, so a seed names one text) when
  // top-k or top-p cuts them; otherwise the whole row in id order, without sorting.
  std::vector<int32_t> idx((size_t)vocab);
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const bool nucleus = o->top_p > 0 && o->top_p < 1;
  if (o->top_k > 0) {
    int64_t keep = std::min<int64_t>(o->top_k, vocab);
    std::partial_sort(idx.begin(), idx.begin() + keep, idx.end(), before);
    idx.resize((size_t)keep);
    sum = 0;
    for (int32_t i : idx) sum += w[i];
  } else if (nucleus) {
    // Only as many of the most likely as the nucleus needs: sorted in growing prefixes until
    // their probability reaches top_p (a peaked row needs few; a flat one sorts the whole row).
    int64_t m = std::min<int64_t>(vocab, 256);
    for (;;) {
      std::partial_sort(idx.begin(), idx.begin() + m, idx.end(), before);
      double c = 0;
      for (int64_t j = 0; j < m; ++j) c += w[idx[j]] / sum;
      if (c >= o->top_p || m == vocab) break;
      m = std::min<int64_t>(vocab, m * 4);
    }
    idx.resize((size_t)m);
  }
  std::vector<double> p(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) p[i] = w[idx[i]] / sum;
  if (nucleus) {  // the nucleus: the shortest prefix reaching top_p
    double c = 0;
    size_t n = 0;
    while (n < p.size() && c < o->top_p) c += p[n++];
    p.resize(n);
    for (double &v : p) v /= c;
  }
  double u = (splitmix64(*state) >> 11) * (1.0 / 9007199254740992.0), c = 0;
  size_t pick = p.size() - 1;
  for (size_t i = 0; i < p.size(); ++i)
    if ((c += p[i]) > u) {
      pick = i;
      break;
    }
  *token = idx[pick];
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_generate(kilnrt_session *s, const int32_t *prompt, int64_t n_prompt,
                                         const kilnrt_generate_options *options, kilnrt_token_fn fn, void *user,
                                         kilnrt_generate_stats *stats) {
  const kiln_model_info &m = *kilnrt_session_model(s);
  kilnrt_generate_options o = options ? *options : kilnrt_generate_options{};
  kilnrt_generate_stats st{};
  if (o.max_new_tokens < 0) return user_error("max_new_tokens is negative");
  if (!std::isfinite(o.temperature) || o.temperature < 0)
    return user_error("temperature " + std::to_string(o.temperature) + " is not a finite number >= 0");
  if (!std::isfinite(o.top_p) || o.top_p < 0 || o.top_p > 1)
    return user_error("top_p " + std::to_string(o.top_p) + " is outside [0, 1]");
  if (o.top_k < 0) return user_error("top_k is negative");
  if (o.past < 0) return user_error("past is negative");
  if (o.n_stop_ids < 0 || (o.n_stop_ids > 0 && !o.stop_ids)) return user_error("n_stop_ids without stop_ids");
  const kiln_entry_info *decode = kilnrt_entry_by_role(&m, KILN_ROLE_DECODE);
  const kiln_entry_info *prefill = kilnrt_prefill_entry(&m);
  const kiln_entry_info *extend = o.past > 0 ? kilnrt_entry_by_role(&m, KILN_ROLE_EXTEND) : nullptr;
  if (o.past > 0 && !extend)
    return user_error("continuing at past = " + std::to_string(o.past) +
                      " needs a model with an extend entry (a chunk of tokens at `past`: examples/llama has one)");
  if (o.past > 0 && !prompt) return user_error("continuing at past > 0 needs the new tokens (prompt)");
  const bool encdec = prefill && prefill->role == KILN_ROLE_ENCODE;
  if (!decode || !prefill)
    return user_error("generation needs a model with a decode entry and a prefill, encode or forward entry (Model::entry's roles)");
  int64_t L = 0;  // the cache length: the bound of the prompt's length, or the decoder's positions
  const char *token_input = nullptr;
  if (encdec) {
    for (int k = 0; k < decode->n_inputs; ++k)
      if (std::string(m.io[decode->inputs[k]].name) == "past") L = m.io[decode->inputs[k]].max_value;
  } else {
    for (int k = 0; k < prefill->n_inputs; ++k)
      if (const kiln_tensor_info &in = m.io[prefill->inputs[k]]; in.dtype == KILN_I32 && in.dims[in.rank - 1].sym >= 0)
        L = std::max<int64_t>(L, m.sym_max[in.dims[in.rank - 1].sym]);  // [L] or [B, L]
  }
  for (int k = 0; k < prefill->n_inputs; ++k)
    if (m.io[prefill->inputs[k]].dtype == KILN_I32 && !m.io[prefill->inputs[k]].optional) {
      token_input = m.io[prefill->inputs[k]].name;
      break;
    }
  if (extend) {  // the chunk goes to the extend entry's token input
    token_input = nullptr;
    for (int k = 0; k < extend->n_inputs; ++k)
      if (m.io[extend->inputs[k]].dtype == KILN_I32 && std::string(m.io[extend->inputs[k]].name) != "past" &&
          !m.io[extend->inputs[k]].cache_slots) {  // not its slot (left out: slot 0)
        token_input = m.io[extend->inputs[k]].name;
        break;
      }
    if (o.past + n_prompt > L)
      return user_error("the conversation is " + std::to_string(o.past + n_prompt) + " tokens; this model's context is " +
                        std::to_string(L) + " tokens");
    prefill = extend;
  }
  st.context = L;
  if (prompt) {
    if (!token_input) return user_error(std::string("entry '") + prefill->name + "' has no token input for the prompt");
    if (n_prompt <= 0) return user_error("the prompt is empty");
    if (!encdec && n_prompt > L)
      return user_error("the prompt is " + std::to_string(n_prompt) + " tokens; this model's context is " +
                        std::to_string(L) + " tokens");
    kilnrt_tensor t{KILN_I32, 1, {n_prompt}, const_cast<int32_t *>(prompt)};
    if (kilnrt_status r = kilnrt_session_set_input(s, token_input, &t)) return r;
    if (extend) {
      int32_t at = (int32_t)o.past;
      kilnrt_tensor p{KILN_I32, 1, {1}, &at};
      if (kilnrt_status r = kilnrt_session_set_input(s, "past", &p)) return r;
    }
  }
  int64_t t0 = kilnrt_time_now_ns();
  if (kilnrt_status r = kilnrt_session_run(s, prefill->name)) return r;
  const kilnrt_tensor *first;
  if (kilnrt_status r = kilnrt_session_output(s, m.io[prefill->outputs[0]].name, &first)) return r;
  int64_t t1 = kilnrt_time_now_ns();
  st.prompt_ns = t1 - t0;
  // The prompt's length: the token input's (a prefill entry's output may be its last row only).
  const kilnrt_tensor *given = token_input ? kilnrt::session_input(s, token_input) : nullptr;
  st.prompt_tokens = given ? given->shape[given->rank - 1] : first->shape[0];  // [L], or [1, L] (a batch of one)
  int64_t past = encdec ? 0 : o.past + st.prompt_tokens;
  int32_t memory_len = (int32_t)first->shape[0];
  uint64_t rng = o.seed;
  const float *row = nullptr;
  int64_t vocab = 0;
  int32_t prev = o.start_token;
  st.stop = KILNRT_STOP_LENGTH;
  for (int64_t k = 0; k < o.max_new_tokens; ++k) {
    if (encdec || k > 0) {  // one decode step: the previous token at position `past`
      if (past >= L) {
        st.stop = KILNRT_STOP_CONTEXT;
        break;
      }
      int32_t pos = (int32_t)past;
      kilnrt_tensor t{KILN_I32, 1, {1}, &prev}, p{KILN_I32, 1, {1}, &pos}, ml{KILN_I32, 1, {1}, &memory_len};
      if (kilnrt_status r = kilnrt_session_set_input(s, "token", &t)) return r;
      if (kilnrt_status r = kilnrt_session_set_input(s, "past", &p)) return r;
      if (encdec)
        if (kilnrt_status r = kilnrt_session_set_input(s, "memory_len", &ml)) return r;
      if (kilnrt_status r = kilnrt_session_run(s, decode->name)) return r;
      const kilnrt_tensor *next;
      if (kilnrt_status r = kilnrt_session_output(s, m.io[decode->outputs[0]].name, &next)) return r;
      vocab = next->shape[next->rank - 1];
      row = (const float *)next->data + (kilnrt_tensor_numel(next) / vocab - 1) * vocab;
      ++past;
    } else {  // the first token: the prompt's last row
      vocab = first->shape[first->rank - 1];
      row = (const float *)first->data + (kilnrt_tensor_numel(first) / vocab - 1) * vocab;
    }
    int32_t tok;
    if (kilnrt_sample(row, vocab, &o, &rng, &tok) != KILNRT_OK)
      return user_error(std::string(kilnrt_last_error()) + " (generated token " + std::to_string(k + 1) + ")");
    prev = tok;
    st.generated_tokens = k + 1;
    if (fn && fn(user, tok, row, vocab)) {
      st.stop = KILNRT_STOP_CALLBACK;
      break;
    }
    if ((o.has_eos && tok == o.eos) || std::find(o.stop_ids, o.stop_ids + o.n_stop_ids, tok) != o.stop_ids + o.n_stop_ids) {
      st.stop = KILNRT_STOP_EOS;
      break;
    }
  }
  st.generate_ns = kilnrt_time_now_ns() - t1;
  if (stats) *stats = st;
  return KILNRT_OK;
}
