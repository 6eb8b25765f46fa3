// generate.cpp - --generate N on the command line: kilnrt_generate with the command line's
// sampling options, each token printed as it is produced (its text through the tokenizer, else
// its id), then the timing line on stderr.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "cli.h"

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
}  // namespace

int generate(const Cli &cli, kilnrt_session *s, const GenerateFlags &g, const std::string &output_dir) {
  Stream stream{&cli, cli.tokenizer, {}};
  stream.keep_logits = !output_dir.empty();
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
  }
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
    std::error_code ec;
    std::filesystem::create_directories(output_dir, ec);
    kilnrt_tensor t{KILN_I32, 1, {(int64_t)stream.out.size()}, stream.out.data()};
    cli.check(kilnrt_npy_write((output_dir + "/generated.npy").c_str(), &t));
    // The logits each generated token was chosen from: [generated, vocab].
    if (stream.vocab && stream.logits.size() == stream.out.size() * (size_t)stream.vocab) {
      kilnrt_tensor l{KILN_F32, 2, {(int64_t)stream.out.size(), stream.vocab}, stream.logits.data()};
      cli.check(kilnrt_npy_write((output_dir + "/step_logits.npy").c_str(), &l));
    }
  }
  return 0;
}

}  // namespace kilnrt
