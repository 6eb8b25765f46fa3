/* complete.c - a C program that embeds a GPT-2 compiled by kiln as a library and prints a
 * completion of a prompt, token by token as they are generated.
 *
 *   gpt2-compile --layers 12 ... --emit=lib --lib-symbol gpt2_text_lib_model -o libgpt2_text_lib.a
 *   cc complete.c libgpt2_text_lib.a libkilnrt.a libpcre2-8.a libutf8proc.a -lstdc++ -lpthread -ldl -lm
 *   ./gpt2-complete --weights model.safetensors --prompt "Once upon a time" [--tokenizer DIR]
 *                   [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]
 *
 * The tokenizer is read from the weights file's folder unless --tokenizer names one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libgpt2_text_lib.h"

typedef struct {
  kilnrt_tokenizer *tok;
  int64_t index;
} stream;

static int32_t print_piece(void *user, int32_t token, const float *logits, int64_t vocab) {
  stream *s = (stream *)user;
  const char *text;
  size_t len;
  (void)logits;
  (void)vocab;
  if (kilnrt_tokenizer_piece(s->tok, token, s->index++, 1, &text, &len) == KILNRT_OK) fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0;
}

static int fail(const char *what) {
  fprintf(stderr, "gpt2-complete: error: %s: %s\n", what, kilnrt_last_error());
  return 1;
}

int main(int argc, char **argv) {
  const char *weights = NULL, *prompt = NULL, *tokenizer = NULL;
  kilnrt_generate_options o;
  memset(&o, 0, sizeof o);
  o.max_new_tokens = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *f = argv[i], *v = argv[i + 1];
    if (!strcmp(f, "--weights")) weights = v;
    else if (!strcmp(f, "--prompt")) prompt = v;
    else if (!strcmp(f, "--tokenizer")) tokenizer = v;
    else if (!strcmp(f, "--max-new-tokens")) o.max_new_tokens = atoi(v);
    else if (!strcmp(f, "--temperature")) o.temperature = (float)atof(v);
    else if (!strcmp(f, "--top-k")) o.top_k = atoi(v);
    else if (!strcmp(f, "--top-p")) o.top_p = (float)atof(v);
    else if (!strcmp(f, "--seed")) o.seed = strtoull(v, NULL, 10);
    else {
      fprintf(stderr, "gpt2-complete: error: unknown flag '%s'\n", f);
      return 1;
    }
  }
  if (!weights || !prompt) {
    fprintf(stderr, "usage: %s --weights FILE.safetensors --prompt TEXT [--tokenizer PATH] [--max-new-tokens N]\n", argv[0]);
    return 1;
  }
  char folder[4096];
  if (!tokenizer) { /* the weights file's folder */
    snprintf(folder, sizeof folder, "%s", weights);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    else strcpy(folder, ".");
    tokenizer = folder;
  }
  kilnrt_session *s;
  kilnrt_tokenizer *tok;
  if (kilnrt_session_create(&gpt2_text_lib_model, &s)) return fail("session");
  if (kilnrt_session_load_weights(s, weights)) return fail("weights");
  if (kilnrt_tokenizer_open(tokenizer, &tok)) return fail("tokenizer");
  const int32_t *ids;
  int64_t n;
  if (kilnrt_tokenizer_encode(tok, prompt, strlen(prompt), 1, &ids, &n)) return fail("prompt");
  o.has_eos = kilnrt_tokenizer_eos(tok) >= 0;
  o.eos = kilnrt_tokenizer_eos(tok);
  stream st = {tok, n}; /* the completion continues the prompt's text */
  kilnrt_generate_stats stats;
  fputs(prompt, stdout);
  if (kilnrt_generate(s, ids, n, &o, print_piece, &st, &stats)) return fail("generate");
  printf("\n");
  fflush(stdout);
  fprintf(stderr, "prompt: %lld tokens in %.2f ms; generated: %lld tokens in %.2f ms\n", (long long)stats.prompt_tokens,
          stats.prompt_ns / 1e6, (long long)stats.generated_tokens, stats.generate_ns / 1e6);
  kilnrt_tokenizer_close(tok);
  kilnrt_session_destroy(s);
  return 0;
}
