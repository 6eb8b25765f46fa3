// kilnrt main: the command line of every compiled kiln model (linked into the executable):
// flags, weights, inputs, runs and outputs; --generate is in generate.cpp.
//
// Exit codes: 0 success, 1 user error (bad flag, file, input), 2 internal error.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>
#include <vector>

#include "cli.h"
#include "internal.h"
#include "weights_state.h"

namespace kilnrt {

void Cli::die(int code, const std::string &msg) const {
  fprintf(stderr, "%s: error: %s\n", model.name, msg.c_str());
  throw Exit{code};
}

void Cli::check(kilnrt_status st) const {
  if (st != KILNRT_OK) die(st == KILNRT_USER_ERROR ? 1 : 2, kilnrt_last_error());
}

const kiln_entry_info *Cli::find_entry(const char *name) const {
  for (int i = 0; i < model.n_entries; ++i)
    if (std::string(model.entries[i].name) == name) return &model.entries[i];
  return nullptr;
}

}  // namespace kilnrt

using namespace kilnrt;

namespace {
// This process's peak resident memory in KiB: VmHWM of /proc/self/status (getrusage's ru_maxrss
// keeps the high-water mark of the process before exec, such as a benchmark's Python parent).
double peak_rss_kib() {
  if (FILE *f = fopen("/proc/self/status", "r")) {
    char line[256];
    double kib = -1;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
    fclose(f);
    if (kib >= 0) return kib;
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (double)u.ru_maxrss;
}


std::string dims_str(const kiln_model_info &model, const kiln_tensor_info &t) {
  std::string s = "[";
  for (int d = 0; d < t.rank; ++d) {
    if (d) s += ", ";
    s += t.dims[d].sym >= 0 ? std::string(model.sym_names[t.dims[d].sym]) + "<=" + std::to_string(t.dims[d].size)
                            : std::to_string(t.dims[d].size);
  }
  return s + "] " + (t.dtype == KILN_F32 ? "f32" : "i32");
}

std::string describe(const kiln_model_info &model) {
  static const char *const kRoles[] = {"other", "forward", "prefill", "decode", "decode_batch",
                                       "encode", "gradients", "eval", "train_step", "extend"};
  std::ostringstream os;
  for (int e = 0; e < model.n_entries; ++e) {
    const kiln_entry_info &en = model.entries[e];
    os << "Entry '" << en.name << "'";
    if (en.role > KILN_ROLE_OTHER && en.role <= KILN_ROLE_EXTEND) os << " (role " << kRoles[en.role] << ")";
    os << "\n  inputs:\n";
    for (int i = 0; i < en.n_inputs; ++i) {
      const kiln_tensor_info &t = model.io[en.inputs[i]];
      os << "    " << t.name << " " << dims_str(model, t);
      if (t.max_value) os << " (token ids < " << t.max_value << ")";
      if (t.optional) os << " (optional: zeros when left out)";
      os << "\n";
    }
    os << "  outputs:\n";
    for (int i = 0; i < en.n_outputs; ++i)
      os << "    " << model.io[en.outputs[i]].name << " " << dims_str(model, model.io[en.outputs[i]]) << "\n";
  }
  os << "Parameters (" << model.n_params << "):\n";
  for (int i = 0; i < model.n_params; ++i) {  // as weights files hold them
    int64_t shape[KILN_MAX_RANK];
    int rank = kilnrt::param_file_shape(model.params[i], shape);
    os << "    " << model.params[i].name << " " << kilnrt::shape_str(shape, rank) << " "
       << kilnrt::dtype_name((kiln_dtype)model.params[i].dtype)
       << (model.params[i].dtype == KILN_BF16 ? " (kept in bfloat16: f32 and f16 tensors are rounded at load)" : "") << "\n";
  }
  return os.str();
}

std::vector<int32_t> parse_ids(const Cli &cli, const std::string &what, const std::string &list) {
  std::vector<int32_t> ids;
  std::stringstream ss(list);
  for (std::string tok; std::getline(ss, tok, ',');) {
    tok.erase(0, tok.find_first_not_of(" "));
    tok.erase(tok.find_last_not_of(" ") + 1);
    char *end = nullptr;
    errno = 0;
    long long v = tok.empty() ? 0 : strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || *end || errno || v < INT32_MIN || v > INT32_MAX)
      cli.die(1, "--tokens " + what + ": '" + tok + "' is not an integer token id");
    ids.push_back((int32_t)v);
  }
  if (ids.empty()) cli.die(1, "--tokens " + what + ": empty token list");
  return ids;
}

void summarize(const char *name, const kilnrt_tensor &t) {
  int64_t n = kilnrt_tensor_numel(&t);
  printf("%s: shape [", name);
  for (int d = 0; d < t.rank; ++d) printf("%s%lld", d ? ", " : "", (long long)t.shape[d]);
  printf("]");
  if (t.dtype != KILN_F32 || n == 0) {
    printf("\n");
    return;
  }
  const float *f = (const float *)t.data;
  double sum = 0, sq = 0;
  size_t nonfinite = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(f[i])) ++nonfinite;
    sum += f[i];
    sq += (double)f[i] * f[i];
  }
  double mean = sum / n;
  printf(" mean %.6g std %.6g", mean, std::sqrt(std::max(0.0, sq / n - mean * mean)));
  if (nonfinite) printf(" (%zu non-finite values)", nonfinite);
  printf("\n  first values:");
  for (int64_t i = 0; i < std::min<int64_t>(n, 6); ++i) printf(" %.6g", f[i]);
  if (t.rank == 2) {
    int64_t cols = t.shape[1];
    const float *last = f + (t.shape[0] - 1) * cols;
    printf("\n  argmax of the last row: %lld", (long long)(std::max_element(last, last + cols) - last));
  }
  printf("\n");
}

// The tokenizer for --prompt and --generate: --tokenizer PATH, else the files beside the weights
// (when there are any), else a GGUF weights file's own; null when none has one.
kilnrt_tokenizer *open_tokenizer(const Cli &cli, const std::string &flag, const std::string &weights) {
  std::string path = flag;
  if (path.empty() && !weights.empty()) {
    std::string dir = std::filesystem::path(weights).parent_path().string();
    if (dir.empty()) dir = ".";
    for (const char *f : {"tokenizer.json", "vocab.json", "vocab.txt"})
      if (std::filesystem::exists(dir + "/" + f)) path = dir;
    if (path.empty() && kilnrt::is_gguf(weights)) path = weights;  // a GGUF file holds its tokenizer
  }
  if (path.empty()) return nullptr;
  kilnrt_tokenizer *t;
  kilnrt_status st = kilnrt_tokenizer_open(path.c_str(), &t);
  // A GGUF file of weights alone (no tokenizer.ggml.model): no tokenizer, as for a folder without one.
  if (st != KILNRT_OK && flag.empty() && path == weights && strstr(kilnrt_last_error(), "no tokenizer in its metadata")) return nullptr;
  cli.check(st);
  return t;
}

// Every flag of the command line.
struct Flags {
  std::string weights, save_weights, output_dir, entry;
  bool random = false, version = false, allow_non_finite = false, ignore_config = false;
  uint64_t seed = 0;
  int threads = 0, repeat = 1, generate = 0;
  int32_t start_token = 0;
  std::vector<std::string> inputs, tokens;
  std::string prompt, prompt_file, tokenizer;
  GenerateFlags gen;
  TrainFlags tr;
  bool train = false;
  std::string resume;
  bool chat = false;  // --prompt as a user message through the tokenizer's chat template
  std::string system;
  bool serve = false;
  ServeFlags sv;
};

void add_flags(CLI::App &app, Flags &f) {
  GenerateFlags &gen = f.gen;
  TrainFlags &tr = f.tr;
  app.add_option("--weights", f.weights, "safetensors file with the model's parameters (read with mmap)");
  app.add_flag("--random-weights", f.random, "use deterministic random weights instead of a file");
  app.add_flag("--allow-non-finite-weights", f.allow_non_finite,
               "load weights holding NaN or infinities (refused by default: they give silently wrong outputs)");
  app.add_flag("--ignore-config", f.ignore_config,
               "do not compare the config.json beside the weights with the model (compared by default)");
  app.add_option("--seed", f.seed, "seed for --random-weights and --generate's sampling")->capture_default_str();
  app.add_option("--save-weights", f.save_weights, "write the weights in use as safetensors");
  app.add_option("--input", f.inputs, "NAME=FILE.npy: an input (int32/int64 token ids or float32)");
  app.add_option("--tokens", f.tokens, "1,2,3 or NAME=1,2,3: token ids for a token input");
  app.add_option("--output-dir", f.output_dir, "write every output as DIR/NAME.npy");
  app.add_option("--entry", f.entry,
                 "entry point to run; A,B,... runs several in order in one session, each once per --repeat "
                 "(states carry over: a KV cache that forward fills, decode_batch reads)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "worker threads (default: all cores; under mpirun, the cores over the ranks on this machine)")->check(CLI::Range(1, 1024));
  app.add_option("--repeat", f.repeat, "run N times and print the median time")->check(CLI::Range(1, 1000000));
  app.add_flag("--version", f.version, "print the kiln version, model hash and target");
  app.add_option("--prompt", f.prompt, "text for the token input, through the tokenizer");
  app.add_option("--prompt-file", f.prompt_file, "the prompt text from a file");
  app.add_flag("--chat", f.chat,
               "--prompt is a user message: rendered by the chat template the tokenizer holds (a GGUF file's, or "
               "tokenizer_config.json's), the answer ending at the end-of-turn token; without --prompt, a conversation "
               "on the terminal (a message per line of stdin; the KV cache kept between turns)");
  app.add_option("--system", f.system, "--chat: a system message before the user's");
  app.add_option("--tokenizer", f.tokenizer,
                 "tokenizer.json, vocab.json + merges.txt or vocab.txt (a file or its folder; default: the "
                 "--weights file's folder, when it has one)");
  app.add_option("--generate", f.generate,
                 "generate up to N tokens after the prompt with the KV cache (models with a decode entry: Model::entry's roles); "
                 "prints the text as it comes (token ids without a tokenizer)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--temperature", gen.temperature, "--generate: sampling temperature (0: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1e6f));
  app.add_option("--top-k", gen.top_k, "--generate: sample among the k most likely tokens (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("--top-p", gen.top_p, "--generate: sample within the smallest set reaching probability p")
      ->capture_default_str()
      ->check(CLI::Range(1e-6f, 1.0f));
  app.add_option("--eos", gen.eos, "--generate: stop at this token (default: the tokenizer's stop ids: end of text, end of turn)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--quiet", gen.quiet, "no timing line and no notes on stderr (errors still print)");
  app.add_flag("--serve", f.serve,
               "serve the model over HTTP with OpenAI's API (/v1/completions, /v1/chat/completions, /v1/models, /health, "
               "/metrics): sequences decoded together in --slots cache slots (models with an extend entry; examples/llama)");
  app.add_option("--host", f.sv.host, "--serve: the address to listen on")->capture_default_str();
  app.add_option("--port", f.sv.port, "--serve: the port (0: any free one, printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--slots", f.sv.slots, "--serve: sequences decoded together (default: the compiled batch bound)")
      ->check(CLI::Range(1, 4096));
  app.add_option("--max-queue", f.sv.max_queue, "--serve: requests waiting for a slot before 429")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  app.add_option("--api-key", f.sv.api_key, "--serve: require 'Authorization: Bearer KEY' on /v1/ endpoints");
  app.add_option("--ctx", f.sv.ctx, "--serve: tokens per request, prompt and answer (default: the compiled context)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  app.add_option("--chunk", f.sv.chunk, "--serve: prompt tokens prefilled per step between decode steps")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_option("--max-body", f.sv.max_body, "--serve: the largest request body in bytes (413 beyond)")->capture_default_str();
  app.add_flag("--no-prefix-reuse", f.sv.no_prefix_reuse, "--serve: prefill every prompt whole (by default a slot's cached prefix is reused)");
  app.add_flag("--train", f.train, "train: run the model's training entry over --data for --steps steps");
  app.add_option("--data", tr.data, "--train: a 1-D .npy of token ids (for text, its bytes)");
  app.add_option("--seq", tr.seq, "--train: tokens per window (T; each step reads T + 1)");
  app.add_option("--batch", tr.batch, "--train: windows per step (the batch B; at most the compiled bound)")->capture_default_str();
  app.add_option("--steps", tr.steps, "--train: the total number of steps (a resumed run continues to it)");
  app.add_option("--eval-data", tr.eval_data, "--train: token ids whose mean loss the model's eval entry reports");
  app.add_option("--eval-every", tr.eval_every, "--train: evaluate every K steps (and after the last)");
  app.add_option("--lr", tr.lr, "--train: the peak learning rate (the schedule's shape stays the model's; kept in the checkpoint)");
  app.add_option("--log", tr.log, "--train: CSV log, a row per step");
  app.add_option("--save", tr.save, "--train: checkpoint (parameters and optimizer state), written at the end");
  app.add_option("--save-every", tr.save_every, "--train: also write --save every K steps");
  app.add_option("--resume", f.resume, "--train: continue from this checkpoint (its parameters, moments and step)");
  app.add_option("--start-token", f.start_token,
                 "the first target token of --generate for encoder-decoder models (an 'encode' entry)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
}

// Flags that apply to a mode given without it; --train's defaults (random weights, a resume).
void check_modes(const Cli &cli, const CLI::App &app, Flags &f) {
  if (!f.weights.empty() && f.random) cli.die(1, "give either --weights or --random-weights, not both");
  if (!f.train)
    for (const char *flag : {"--data", "--seq", "--batch", "--steps", "--log", "--save", "--save-every", "--resume",
                             "--eval-data", "--eval-every", "--lr"})
      if (app.count(flag)) cli.die(1, std::string(flag) + " applies to --train");
  if (f.train) {
    if (!f.resume.empty() && (!f.weights.empty() || f.random))
      cli.die(1, "--resume loads the weights: no --weights or --random-weights");
    if (f.tr.data.empty() || !f.tr.seq || !f.tr.steps) cli.die(1, "--train needs --data FILE.npy, --seq T and --steps N");
    if (!f.resume.empty()) f.weights = f.resume;
    else if (f.weights.empty()) f.random = true;  // from the model's initializers
  }
  for (const char *flag : {"--temperature", "--top-k", "--top-p", "--eos"})
    if (app.count(flag) && !f.generate && !(f.chat && f.prompt.empty() && f.prompt_file.empty()))
      cli.die(1, std::string(flag) + " applies to --generate (or --chat)");
  if (app.count("--system") && !f.chat) cli.die(1, "--system applies to --chat");
  if (!f.serve)
    for (const char *flag : {"--host", "--port", "--slots", "--max-queue", "--api-key", "--ctx", "--chunk", "--max-body", "--no-prefix-reuse"})
      if (app.count(flag)) cli.die(1, std::string(flag) + " applies to --serve");
  if (f.serve && (f.train || f.generate || f.chat || !f.prompt.empty() || !f.prompt_file.empty() || !f.tokens.empty() ||
                  !f.inputs.empty() || app.count("--entry") || f.repeat > 1))
    cli.die(1, "--serve takes its prompts over HTTP: no --train, --generate, --chat, --prompt, --tokens, --input, --entry or --repeat");
  if (f.chat && !f.tokens.empty()) cli.die(1, "--chat takes the user's message as --prompt TEXT (or one per line on stdin), not --tokens");
}

// --weights, --random-weights or none; --save-weights. Returns the load time in ms (-1: none).
double load_weights(const Cli &cli, kilnrt_session *s, const Flags &f) {
  const kiln_model_info &model = cli.model;
  double load_ms = -1;
  if (!f.weights.empty()) {
    kilnrt_load_options lo{};
    lo.allow_non_finite = f.allow_non_finite;
    lo.ignore_config = f.ignore_config;
    int64_t l0 = kilnrt_time_now_ns();
    cli.check(kilnrt_session_load_weights_with(s, f.weights.c_str(), &lo));
    load_ms = (kilnrt_time_now_ns() - l0) / 1e6;
    if (int n = kilnrt_session_ignored_count(s); n && !f.gen.quiet) {
      fprintf(stderr, "%s: ignored %d tensor%s of the weights file that the model does not use:", model.name, n, n > 1 ? "s" : "");
      for (int i = 0; i < n && i < 8; ++i) fprintf(stderr, " %s", kilnrt_session_ignored_name(s, i));
      fprintf(stderr, n > 8 ? " ...\n" : "\n");
    }
  } else if (f.random) {
    cli.check(kilnrt_session_random_weights(s, f.seed));
  } else if (model.n_params) {
    cli.die(1, "no weights: give --weights FILE.safetensors or --random-weights");
  }
  if (!f.save_weights.empty()) cli.check(kilnrt_session_save_weights(s, f.save_weights.c_str()));
  return load_ms;
}

// --entry A,B,...: the entries to run in order, each checked.
std::vector<std::string> entry_chain(const Cli &cli, const std::string &entry) {
  std::vector<std::string> chain;
  for (size_t at = 0;;) {
    size_t comma = entry.find(',', at);
    chain.push_back(entry.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (const std::string &c : chain)
    if (!cli.find_entry(c.c_str())) cli.die(1, "no entry point '" + c + "'");
  return chain;
}

// --input NAME=FILE.npy and --tokens [NAME=]1,2,3 for entry `en`; `token_inputs` are its
// required token inputs (`--tokens` without a name goes to the one there is).
void set_inputs(const Cli &cli, kilnrt_session *s, const Flags &f, const std::vector<std::string> &token_inputs) {
  for (const std::string &spec : f.inputs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) cli.die(1, "--input expects NAME=FILE.npy, got '" + spec + "'");
    kilnrt_tensor t;
    cli.check(kilnrt_npy_read(spec.substr(eq + 1).c_str(), &t));
    kilnrt_status st = kilnrt_session_set_input(s, spec.substr(0, eq).c_str(), &t);
    kilnrt_tensor_free(&t);
    cli.check(st);
  }
  for (const std::string &spec : f.tokens) {
    auto eq = spec.find('=');
    std::string name, list = spec;
    if (eq != std::string::npos) {
      name = spec.substr(0, eq);
      list = spec.substr(eq + 1);
    } else if (token_inputs.size() == 1) {
      name = token_inputs[0];
    } else {
      cli.die(1, "the model has " + std::to_string(token_inputs.size()) + " token inputs: use --tokens NAME=1,2,3");
    }
    std::vector<int32_t> ids = parse_ids(cli, name, list);
    kilnrt_tensor t{};
    t.dtype = KILN_I32;
    t.rank = 1;
    t.shape[0] = (int64_t)ids.size();
    t.data = ids.data();
    cli.check(kilnrt_session_set_input(s, name.c_str(), &t));
  }
}

// --prompt TEXT (already read from --prompt-file) through the tokenizer into entry `en`'s one
// token input, checked against the model's vocabulary and context.
void set_prompt(const Cli &cli, kilnrt_session *s, const Flags &f, const kiln_entry_info &en,
                const std::vector<std::string> &token_inputs, kilnrt_tokenizer *tok, const std::string &prompt,
                bool add_special) {
  const kiln_model_info &model = cli.model;
  if (!tok) cli.die(1, "--prompt needs a tokenizer: give --tokenizer PATH (none beside the weights)");
  if (token_inputs.size() != 1)
    cli.die(1, "--prompt: entry '" + std::string(en.name) + "' has " + std::to_string(token_inputs.size()) + " token inputs");
  if (!f.tokens.empty()) cli.die(1, "give --prompt or --tokens, not both");
  const kiln_tensor_info *ti = nullptr;
  for (int i = 0; i < en.n_inputs; ++i)
    if (token_inputs[0] == model.io[en.inputs[i]].name) ti = &model.io[en.inputs[i]];
  if (int64_t tv = kilnrt_tokenizer_vocab_size(tok); ti->max_value && tv > ti->max_value)
    cli.die(1, "the tokenizer has " + std::to_string(tv) + " tokens, more than this model's vocabulary of " +
                   std::to_string(ti->max_value));
  const int32_t *ids;
  int64_t n;
  cli.check(kilnrt_tokenizer_encode(tok, prompt.data(), prompt.size(), add_special, &ids, &n));
  if (n == 0) cli.die(1, "the prompt is empty: it gives no tokens");
  const kiln_dim &len = ti->dims[ti->rank - 1];  // [L], or [B, L]
  int64_t bound = len.sym >= 0 ? model.sym_max[len.sym] : len.size;
  if (n > bound)
    cli.die(1, "the prompt is " + std::to_string(n) + " tokens, longer than this model's context of " +
                   std::to_string(bound) + " tokens");
  kilnrt_tensor t{KILN_I32, 1, {n}, const_cast<int32_t *>(ids)};
  cli.check(kilnrt_session_set_input(s, ti->name, &t));
  for (int i = 0; i < en.n_inputs; ++i)  // a single segment: token type 0 everywhere
    if (std::string(model.io[en.inputs[i]].name) == "token_type_ids") {
      std::vector<int32_t> zeros((size_t)n, 0);
      kilnrt_tensor z{KILN_I32, 1, {n}, zeros.data()};
      cli.check(kilnrt_session_set_input(s, "token_type_ids", &z));
    }
}

// Runs the chain --repeat times (the median time when more than once), then prints (and with
// --output-dir writes) every output once.
int run_entries(const Cli &cli, kilnrt_session *s, const Flags &f, const std::vector<std::string> &chain, double load_ms) {
  const kiln_model_info &model = cli.model;
  std::vector<int64_t> times;
  for (int r = 0; r < f.repeat; ++r) {
    int64_t t0 = kilnrt_time_now_ns();
    for (const std::string &c : chain) cli.check(kilnrt_session_run(s, c.c_str()));
    times.push_back(kilnrt_time_now_ns() - t0);
  }
  if (f.repeat > 1) {
    std::sort(times.begin(), times.end());
    printf("median time over %d runs: %.3f ms (min %.3f ms)\n", f.repeat, times[times.size() / 2] / 1e6, times[0] / 1e6);
    // What a benchmark reports beside the time: loading (mapping, checks, the transposes of
    // kiln-prepack-weights) and the process's peak resident memory after the runs.
    kilnrt_scratch_stats sc;
    kilnrt_scratch_get_stats(&sc);
    if (load_ms >= 0) printf("weights loaded in %.1f ms; ", load_ms);
    printf("peak RSS %.1f MiB; kernel scratch held %.1f MiB\n", peak_rss_kib() / 1024.0, sc.held_bytes / 1048576.0);
  }
  if (!f.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(f.output_dir, ec);
    if (ec) cli.die(1, "cannot create --output-dir '" + f.output_dir + "': " + ec.message());
  }
  std::vector<int> shown;  // each output once (entries may share one, such as "loss": the last run's)
  for (const std::string &c : chain) {
    const kiln_entry_info *ce = cli.find_entry(c.c_str());
    for (int k = 0; k < ce->n_outputs; ++k) {
      if (std::find(shown.begin(), shown.end(), ce->outputs[k]) != shown.end()) continue;
      shown.push_back(ce->outputs[k]);
      const char *name = model.io[ce->outputs[k]].name;
      const kilnrt_tensor *t;
      cli.check(kilnrt_session_output(s, name, &t));
      summarize(name, *t);
      if (!f.output_dir.empty()) cli.check(kilnrt_npy_write((f.output_dir + "/" + name + ".npy").c_str(), t));
    }
  }
  printf("arena: %.1f KiB\n", kilnrt_session_arena_bytes(s) / 1024.0);
  return 0;
}

int run(const kiln_model_info &model, int argc, char **argv) {
  Cli cli{model};
  cli.check(kilnrt_cpu_check(model.cpu_features));
  CLI::App app{std::string(model.name) + ": a model compiled by kiln " + model.kiln_version};
  app.footer(describe(model));
  Flags f;
  f.entry = model.n_entries ? model.entries[0].name : "forward";
  add_flags(app, f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    app.exit(e);
    throw Exit{0};
  } catch (const CLI::ParseError &e) {
    cli.die(1, e.what() + std::string(" (see --help)"));
  }
  if (f.version) {
    printf("kiln %s\nmodel %s hash %s\ntarget %s%s\n", model.kiln_version, model.name, model.model_hash, model.target,
           model.gpu_api != KILN_GPU_NONE ? (model.gpu_resident ? " (buffers on the device)" : " (buffers on the host)") : "");
    return 0;
  }
  if (!f.threads)  // ranks of one machine under mpirun share its cores
    if (const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local && atoi(local) > 1)
      f.threads = std::max(1, (int)std::thread::hardware_concurrency() / atoi(local));
  if (f.threads) kilnrt_threads_set(f.threads);
  kilnrt_session *s;
  cli.check(kilnrt_session_create(&model, &s));
  std::unique_ptr<kilnrt_session, void (*)(kilnrt_session *)> guard(s, kilnrt_session_destroy);
  check_modes(cli, app, f);
  double load_ms = load_weights(cli, s, f);
  if (f.train) {
    f.tr.seed = f.seed;
    f.tr.quiet = f.gen.quiet;
    f.tr.resume = f.resume;
    return kilnrt::train(cli, s, f.tr);
  }
  if (f.generate) {  // the prompt goes where kilnrt_generate runs it: encode, else prefill, else the first entry
    const kiln_entry_info *pe = kilnrt_prefill_entry(&model);
    std::string prefill = pe ? pe->name : "";
    if (app.count("--entry") && f.entry != prefill)
      cli.die(1, "--generate runs the prompt through entry '" + prefill + "'; --entry " + f.entry + " does not apply");
    if (!prefill.empty()) f.entry = prefill;
  }
  std::vector<std::string> chain = entry_chain(cli, f.entry);  // --entry A,B: in order, in this session
  const kiln_entry_info *en = cli.find_entry(chain[0].c_str());  // --tokens and --prompt go to the first
  if (app.count("--start-token") && !(f.generate && en->role == KILN_ROLE_ENCODE))
    cli.die(1, "--start-token applies to --generate on a model with an encode entry");
  std::unique_ptr<kilnrt_tokenizer, void (*)(kilnrt_tokenizer *)> tok(open_tokenizer(cli, f.tokenizer, f.weights),
                                                                       kilnrt_tokenizer_close);
  cli.tokenizer = tok.get();
  if (f.serve) return kilnrt::serve(cli, s, f.sv);
  std::vector<std::string> token_inputs;
  for (int i = 0; i < en->n_inputs; ++i)
    if (model.io[en->inputs[i]].dtype == KILN_I32 && !model.io[en->inputs[i]].optional)
      token_inputs.push_back(model.io[en->inputs[i]].name);
  set_inputs(cli, s, f, token_inputs);
  if (!f.prompt.empty() && !f.prompt_file.empty()) cli.die(1, "give --prompt or --prompt-file, not both");
  std::string prompt = f.prompt;
  if (!f.prompt_file.empty()) cli.check(read_file(f.prompt_file, "--prompt-file", prompt));
  GenerateFlags gen = f.gen;
  gen.max_new_tokens = f.generate;
  gen.start_token = f.start_token;
  gen.seed = f.seed * 0x9e3779b97f4a7c15ULL + 0x5a3d1e;  // the sampling stream, apart from --random-weights'
  if (f.chat && f.prompt.empty() && f.prompt_file.empty()) {  // a conversation on the terminal
    if (!f.generate) gen.max_new_tokens = 1 << 20;  // the end of the turn, or the context, ends an answer
    return kilnrt::chat(cli, s, gen, f.system, f.output_dir);
  }
  if (f.chat) {
    nlohmann::json messages = nlohmann::json::array();
    if (!f.system.empty()) messages.push_back({{"role", "system"}, {"content", f.system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    prompt = render_chat(cli, tok.get(), messages);
  }
  if (app.count("--prompt") || !f.prompt_file.empty()) set_prompt(cli, s, f, *en, token_inputs, tok.get(), prompt, !f.chat);
  if (!f.generate) return run_entries(cli, s, f, chain, load_ms);
  int rc = kilnrt::generate(cli, s, gen, f.output_dir);
  // After the timing line, what a benchmark reports beside it (as --repeat prints): a parent's
  // view of a child's peak RSS (wait4) counts what the parent shared with it before exec.
  if (!gen.quiet) {
    if (load_ms >= 0) fprintf(stderr, "weights loaded in %.1f ms; ", load_ms);
    fprintf(stderr, "peak RSS %.1f MiB\n", peak_rss_kib() / 1024.0);
  }
  return rc;
}
}  // namespace

// The command line of a compiled model, callable with any model table (the fuzzer drives it
// with a toy one). Returns the exit code; never exits the process.
extern "C" int kilnrt_main_run(const kiln_model_info *model, int argc, char **argv) {
  try {
    return run(*model, argc, argv);
  } catch (const Exit &e) {
    return e.code;
  } catch (const std::exception &e) {
    fprintf(stderr, "%s: internal error: %s\n", model->name, e.what());
    return 2;
  }
}

#ifndef KILNRT_NO_MAIN
extern "C" const kiln_model_info kiln_model;
int main(int argc, char **argv) { return kilnrt_main_run(&kiln_model, argc, argv); }
#endif
