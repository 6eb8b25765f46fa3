// generate.cpp - --generate N: greedy decoding with the KV cache, for decoder-only models (a
// prefill entry, then `decode`) and encoder-decoder models (`encode` once, then `decode`).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli.h"

namespace kilnrt {
namespace {
// The id with the largest logit in the last row of [rows, vocab] logits.
int32_t argmax_last_row(const kilnrt_tensor &t) {
  int64_t cols = t.shape[t.rank - 1], rows = kilnrt_tensor_numel(&t) / cols;
  const float *last = (const float *)t.data + (rows - 1) * cols;
  return (int32_t)(std::max_element(last, last + cols) - last);
}
}  // namespace

// Greedy generation with the KV cache, through a `decode` entry (inputs `token` [1] and `past`
// [1], output `next_logits`) that attends to the cached positions only.
//  * Decoder-only models: the prompt runs through the prefill entry (which fills the caches and
//    gives the first new token), then each new token through `decode`.
//  * Encoder-decoder models (an `encode` entry): the source runs once through `encode` (which
//    fills the cross-attention caches), then `decode` runs from `start_token`, with its input
//    `memory_len` set to the source length (the rows of encode's first output).
int generate_tokens(const Cli &cli, kilnrt_session *s, const kiln_entry_info *prefill, int n, int32_t start_token,
                    const std::string &output_dir) {
  const kiln_model_info &model = cli.model;
  const kiln_entry_info *decode = cli.find_entry("decode");
  if (!decode || prefill == decode) cli.die(1, "--generate needs a model with a prefill entry and a 'decode' entry");
  const bool encdec = std::string(prefill->name) == "encode";
  int64_t L = 0;  // the cache length: the bound of the prompt's length, or the decoder's positions
  if (encdec) {
    for (int k = 0; k < decode->n_inputs; ++k)
      if (std::string(model.io[decode->inputs[k]].name) == "past") L = model.io[decode->inputs[k]].max_value;
  } else {
    for (int k = 0; k < prefill->n_inputs; ++k)
      if (model.io[prefill->inputs[k]].dtype == KILN_I32 && model.io[prefill->inputs[k]].dims[0].sym >= 0)
        L = std::max<int64_t>(L, model.sym_max[model.io[prefill->inputs[k]].dims[0].sym]);
  }
  cli.check(kilnrt_session_run(s, prefill->name));
  const kilnrt_tensor *first;
  cli.check(kilnrt_session_output(s, model.io[prefill->outputs[0]].name, &first));
  int64_t past = encdec ? 0 : first->shape[0];
  if (past + n > L)
    cli.die(1, "--generate " + std::to_string(n) + (encdec ? "" : " after a " + std::to_string(past) + "-token prompt") +
               " exceeds the compiled bound " + std::to_string(L));
  int32_t memory_len = (int32_t)first->shape[0];
  std::vector<int32_t> out;
  if (!encdec) out.push_back(argmax_last_row(*first));
  for (int k = (int)out.size(); k < n; ++k, ++past) {
    int32_t tok = out.empty() ? start_token : out.back(), pos = (int32_t)past;
    kilnrt_tensor t{KILN_I32, 1, {1}, &tok}, p{KILN_I32, 1, {1}, &pos}, ml{KILN_I32, 1, {1}, &memory_len};
    cli.check(kilnrt_session_set_input(s, "token", &t));
    cli.check(kilnrt_session_set_input(s, "past", &p));
    if (encdec) cli.check(kilnrt_session_set_input(s, "memory_len", &ml));
    cli.check(kilnrt_session_run(s, decode->name));
    const kilnrt_tensor *next;
    cli.check(kilnrt_session_output(s, model.io[decode->outputs[0]].name, &next));
    out.push_back(argmax_last_row(*next));
  }
  for (size_t i = 0; i < out.size(); ++i) printf("%s%d", i ? " " : "", out[i]);
  printf("\n");
  if (!output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(output_dir, ec);
    kilnrt_tensor g{KILN_I32, 1, {(int64_t)out.size()}, out.data()};
    cli.check(kilnrt_npy_write((output_dir + "/generated.npy").c_str(), &g));
  }
  return 0;
}

}  // namespace kilnrt
