// generate.cpp - --generate N on the command line: kilnrt_generate with the command line's
// sampling options, each token printed as it is produced (its text through the tokenizer, else
// its id), then the timing line on stderr; and --chat's conversation on the terminal.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli.h"
#include "internal.h"

namespace kilnrt {
namespace {
struct Stream {
  const Cli *cli;
  kilnrt_tokenizer *tok;
  std::vector<int32_t> out;
  bool keep_logits = false;     // --output-dir: each step's logits, for teacher-forced checks
  std::vector<float> logits;
  int64_t vocab = 0;
};

int32_t on_token(void *user, int32_t token, const float *logits, int64_t vocab) {
  Stream &s = *(Stream *)user;
  if (s.keep_logits && logits) {
    s.vocab = vocab;
    s.logits.insert(s.logits.end(), logits, logits + vocab);
  }
  if (s.tok) {
    const char *text;
    size_t len;
    // An id past the tokenizer's vocabulary (a model vocabulary padded beyond it) prints as <id>.
    if (kilnrt_tokenizer_piece(s.tok, token, (int64_t)s.out.size(), 1, &text, &len) == KILNRT_OK)
      fwrite(text, 1, len, stdout);
    else
      printf("<%d>", token);
  } else {
    printf("%s%d", s.out.empty() ? "" : " ", token);
  }
  fflush(stdout);
  s.out.push_back(token);
  return 0;
}

// The command line's sampling options; the stop tokens: --eos, else the tokenizer's stop ids.
kilnrt_generate_options options_of(const Cli &cli, const GenerateFlags &g) {
  kilnrt_generate_options o{};
  o.max_new_tokens = g.max_new_tokens;
  o.temperature = g.temperature;
  o.top_k = g.top_k;
  o.top_p = g.top_p;
  o.seed = g.seed;
  o.start_token = g.start_token;
  if (g.eos >= 0) {
    o.has_eos = 1;
    o.eos = g.eos;
  } else if (cli.tokenizer) {
    o.n_stop_ids = (int32_t)kilnrt_tokenizer_stop_ids(cli.tokenizer, &o.stop_ids);
  }
  return o;
}

void write_ids(const Cli &cli, const std::string &output_dir, std::vector<int32_t> &ids) {
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) cli.die(1, "cannot create --output-dir '" + output_dir + "': " + ec.message());
  kilnrt_tensor t{KILN_I32, 1, {(int64_t)ids.size()}, ids.data()};
  cli.check(kilnrt_npy_write((output_dir + "/generated.npy").c_str(), &t));
}
}  // namespace

int generate(const Cli &cli, kilnrt_session *s, const GenerateFlags &g, const std::string &output_dir) {
  Stream stream{&cli, cli.tokenizer, {}};
  stream.keep_logits = !output_dir.empty();
  kilnrt_generate_options o = options_of(cli, g);
  kilnrt_generate_stats st{};
  kilnrt_status rc = kilnrt_generate(s, nullptr, 0, &o, on_token, &stream, &st);
  if (!stream.out.empty()) printf("\n");
  fflush(stdout);  // the text before the timing line on stderr
  cli.check(rc);
  if (st.stop == KILNRT_STOP_CONTEXT)
    fprintf(stderr, "%s: generation stopped at the compiled context of %lld tokens, after %lld new tokens\n",
            cli.model.name, (long long)st.context, (long long)st.generated_tokens);
  if (!g.quiet) {
    double pms = st.prompt_ns / 1e6, gms = st.generate_ns / 1e6;
    long long m = (long long)st.generated_tokens;
    fprintf(stderr, "prompt: %lld tokens in %.2f ms (%.2f tok/s); generated: %lld tokens in %.2f ms (%.2f ms/token, %.2f tok/s)\n",
            (long long)st.prompt_tokens, pms, pms > 0 ? st.prompt_tokens / (pms / 1e3) : 0.0, m, gms,
            m ? gms / m : 0.0, gms > 0 ? m / (gms / 1e3) : 0.0);
  }
  if (!output_dir.empty()) {
    write_ids(cli, output_dir, stream.out);
    // The logits each generated token was chosen from: [generated, vocab].
    if (stream.vocab && stream.logits.size() == stream.out.size() * (size_t)stream.vocab) {
      kilnrt_tensor l{KILN_F32, 2, {(int64_t)stream.out.size(), stream.vocab}, stream.logits.data()};
      cli.check(kilnrt_npy_write((output_dir + "/step_logits.npy").c_str(), &l));
    }
  }
  return 0;
}

// The tokenizer's chat template, or the error that --chat needs one.
const char *chat_template(const Cli &cli, kilnrt_tokenizer *tok) {
  if (!tok) cli.die(1, "--chat needs a tokenizer with a chat template: give --tokenizer PATH (none beside the weights)");
  const char *tmpl = kilnrt_tokenizer_chat_template(tok);
  if (!tmpl) cli.die(1, "--chat: the tokenizer holds no chat template");
  return tmpl;
}

kilnrt_status render_chat(kilnrt_tokenizer *tok, const nlohmann::json &messages, std::string &out) {
  const char *tmpl = tok ? kilnrt_tokenizer_chat_template(tok) : nullptr;
  if (!tmpl) return user_error(tok ? "the tokenizer holds no chat template" : "a chat needs a tokenizer with a chat template");
  if (!messages.is_array()) return user_error("the chat's messages are not a JSON array");
  nlohmann::json ctx = {{"messages", messages}, {"add_generation_prompt", true}};
  auto token = [&](int32_t id) {
    const char *text;
    size_t len;
    return id >= 0 && kilnrt_tokenizer_piece(tok, id, 1, 0, &text, &len) == KILNRT_OK ? std::string(text, len) : std::string();
  };
  if (int32_t b = kilnrt_tokenizer_bos(tok); b >= 0) ctx["bos_token"] = token(b);
  if (int32_t e = kilnrt_tokenizer_eos(tok); e >= 0) ctx["eos_token"] = token(e);
  const char *text;
  size_t len;
  if (kilnrt_status st = kilnrt_chat_render(tmpl, ctx.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), &text, &len))
    return st;
  out.assign(text, len);
  return KILNRT_OK;
}

std::string render_chat(const Cli &cli, kilnrt_tokenizer *tok, const nlohmann::json &messages) {
  chat_template(cli, tok);
  std::string text;
  cli.check(render_chat(tok, messages, text));
  return text;
}

int chat(const Cli &cli, kilnrt_session *s, const GenerateFlags &g, const std::string &system, const std::string &output_dir) {
  kilnrt_tokenizer *tok = cli.tokenizer;
  chat_template(cli, tok);  // before the first line is read
  const kiln_entry_info *extend = kilnrt_entry_by_role(&cli.model, KILN_ROLE_EXTEND);
  if (!extend)
    cli.die(1, "--chat without --prompt keeps the KV cache between turns: it needs a model with an extend entry "
               "(examples/llama has one)");
  int64_t context = 0;  // the cache's length: the bound of extend's `past`
  for (int k = 0; k < extend->n_inputs; ++k)
    if (const kiln_tensor_info &in = cli.model.io[extend->inputs[k]]; strcmp(in.name, "past") == 0) context = in.max_value;
  const bool tty = isatty(0) && isatty(2);
  if (tty && !g.quiet) fprintf(stderr, "%s: a conversation; one message per line, Ctrl-D ends it\n", cli.model.name);
  nlohmann::json messages = nlohmann::json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  std::vector<int32_t> cached, all;  // the ids the KV cache holds; every turn's generated ids
  kilnrt_generate_options base = options_of(cli, g);
  std::string line;
  for (int turn = 1;; ++turn) {
    if (tty) fprintf(stderr, "> ");
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      --turn;
      continue;
    }
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string text = render_chat(cli, tok, messages);
    const int32_t *p;
    int64_t n;
    cli.check(kilnrt_tokenizer_encode(tok, text.data(), text.size(), 0, &p, &n));
    std::vector<int32_t> ids(p, p + n);
    // The longest prefix the cache already holds (the earlier turns, unless the template renders
    // them differently now); at least one token runs, for the logits of the answer's first.
    size_t keep = 0;
    while (keep < cached.size() && keep < ids.size() && cached[keep] == ids[keep]) ++keep;
    if (keep == ids.size()) --keep;
    if ((int64_t)ids.size() >= context) {  // no room left for an answer
      fprintf(stderr, "%s: the conversation is %zu tokens, the compiled context is %lld tokens: it ends here\n",
              cli.model.name, ids.size(), (long long)context);
      break;
    }
    kilnrt_generate_options o = base;
    o.past = (int64_t)keep;
    o.seed = base.seed + (uint64_t)turn;  // one stream per turn
    Stream stream{&cli, tok, {}};
    kilnrt_generate_stats st{};
    kilnrt_status rc = kilnrt_generate(s, ids.data() + keep, (int64_t)(ids.size() - keep), &o, on_token, &stream, &st);
    printf("\n");
    fflush(stdout);
    cli.check(rc);
    // The cache now holds the prompt and every generated token but the last.
    cached = ids;
    cached.insert(cached.end(), stream.out.begin(), stream.out.end() - (stream.out.empty() ? 0 : 1));
    all.insert(all.end(), stream.out.begin(), stream.out.end());
    std::vector<int32_t> answer = stream.out;
    if (st.stop == KILNRT_STOP_EOS && !answer.empty()) answer.pop_back();  // the end-of-turn token
    const char *atext = "";
    size_t alen = 0;
    if (!answer.empty()) cli.check(kilnrt_tokenizer_decode(tok, answer.data(), (int64_t)answer.size(), 1, &atext, &alen));
    messages.push_back({{"role", "assistant"}, {"content", std::string(atext, alen)}});
    if (!g.quiet) {
      double pms = st.prompt_ns / 1e6, gms = st.generate_ns / 1e6;
      long long m = (long long)st.generated_tokens;
      fprintf(stderr, "turn %d: %lld new prompt tokens (%zu reused from the cache) in %.2f ms; generated: %lld tokens in %.2f ms (%.2f ms/token)\n",
              turn, (long long)st.prompt_tokens, keep, pms, m, gms, m ? gms / m : 0.0);
    }
    if (st.stop == KILNRT_STOP_CONTEXT) {
      fprintf(stderr, "%s: the conversation filled the compiled context of %lld tokens: it ends here\n", cli.model.name,
              (long long)st.context);
      break;
    }
  }
  if (!output_dir.empty()) {
    write_ids(cli, output_dir, all);
    std::string tmp = output_dir + "/conversation.json.tmp", dst = output_dir + "/conversation.json";
    FILE *f = fopen(tmp.c_str(), "wb");
    std::string js = messages.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (!f || fwrite(js.data(), 1, js.size(), f) != js.size() || fclose(f) != 0 || rename(tmp.c_str(), dst.c_str()) != 0)
      cli.die(1, "cannot write '" + dst + "'");
  }
  return 0;
}

}  // namespace kilnrt
