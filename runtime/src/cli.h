// cli.h - what the compiled executable's command line (main.cpp) and its generation loop
// (generate.cpp) share: the model being run, and failing with a message and an exit code.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "kilnrt/api.h"

namespace kilnrt {

// Thrown to leave the command line with an exit code (caught in kilnrt_main_run).
struct Exit {
  int code;
};

// The command line of one model.
struct Cli {
  const kiln_model_info &model;
  kilnrt_tokenizer *tokenizer = nullptr;  // --tokenizer, or the one beside --weights; may be null
  // "<model>: error: <msg>" on stderr, then Exit{code}.
  [[noreturn]] void die(int code, const std::string &msg) const;
  // A failed runtime call: its message, exit code 1 (user error) or 2 (internal).
  void check(kilnrt_status st) const;
  const kiln_entry_info *find_entry(const char *name) const;
};

struct GenerateFlags {
  int max_new_tokens = 0;
  float temperature = 0, top_p = 1;
  int top_k = 0;
  int32_t eos = -1, start_token = 0;  // eos < 0: the tokenizer's stop ids (when there is one)
  uint64_t seed = 0;
  bool quiet = false;
};

struct TrainFlags {
  std::string data, eval_data, log, save;
  std::string resume;  // --resume FILE: a checkpoint whose optimizer state the run continues
  int64_t batch = 1, seq = 0, steps = 0, save_every = 0, eval_every = 0;
  uint64_t seed = 0;
  std::optional<double> lr;  // --lr: the peak learning rate; none: the model's (or the checkpoint's)
  bool quiet = false;
};

struct ServeFlags {
  std::string host = "127.0.0.1", api_key;
  int port = 8080, slots = 0, max_queue = 64;
  int64_t ctx = 0, chunk = 256;
  size_t max_body = 1 << 20;
  bool no_prefix_reuse = false;  // every prompt prefilled whole
};

// --serve (serve.cpp): an OpenAI-compatible HTTP server until SIGTERM or SIGINT (then the
// running requests finish and it returns 0).
int serve(const Cli &cli, kilnrt_session *s, const ServeFlags &f);

// --train (train.cpp): the weights already loaded (or a checkpoint, whose optimizer.step it
// continues from); runs the training entry to --steps, logging and checkpointing. Returns the
// exit code.
int train(const Cli &cli, kilnrt_session *s, const TrainFlags &f);

// --generate N (generate.cpp): the prompt already set, then kilnrt_generate; prints each token
// as it comes (text with a tokenizer, else ids) and the timing line (unless quiet); writes
// generated.npy into output_dir when given. Returns the exit code.
int generate(const Cli &cli, kilnrt_session *s, const GenerateFlags &g, const std::string &output_dir);
// --chat without --prompt: a conversation on the terminal (a user message per line of stdin, each
// answer streamed), the KV cache kept between turns: each turn runs only the tokens past the
// longest prefix the cache already holds (the model's extend entry).
int chat(const Cli &cli, kilnrt_session *s, const GenerateFlags &g, const std::string &system, const std::string &output_dir);
// The conversation `messages` (a JSON array of {"role", "content"}) rendered by the tokenizer's
// chat template with the generation prompt, as transformers' apply_chat_template renders it.
std::string render_chat(const Cli &cli, kilnrt_tokenizer *tok, const nlohmann::json &messages);
// The same, as a status (the message in kilnrt_last_error): for the server, where a bad template
// or message is the request's error, not the process's.
kilnrt_status render_chat(kilnrt_tokenizer *tok, const nlohmann::json &messages, std::string &out);

}  // namespace kilnrt
