// libFuzzer targets for the files users hand a compiled model: safetensors (KILN_FUZZ_SAFETENSORS),
// GGUF (KILN_FUZZ_GGUF: weights, metadata, tokenizer), chat templates (KILN_FUZZ_TEMPLATE) and
// .npy (KILN_FUZZ_NPY). Each input is written to an in-memory file and read with the
// runtime's own reader; every tensor the reader accepts is touched end to end, so a bad offset
// or size shows up as an ASan report.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kilnrt/api.h"

static std::string memfile(const uint8_t *data, size_t size) {
  static int fd = memfd_create("kiln_fuzz", 0);
  if (ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
  return "/proc/self/fd/" + std::to_string(fd);
}

static volatile uint8_t g_sink;
static void touch(const kilnrt_tensor &t, size_t esize) {
  const uint8_t *p = (const uint8_t *)t.data;
  size_t n = (size_t)kilnrt_tensor_numel(&t) * esize;
  for (size_t i = 0; i < n; ++i) g_sink ^= p[i];
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
#ifdef KILN_FUZZ_TEMPLATE
  // A chat template (the input) rendered for a fixed conversation.
  std::string tmpl((const char *)data, size);
  const char *text;
  size_t len;
  if (kilnrt_chat_render(tmpl.c_str(),
                         "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", "
                         "\"content\": \"Hi 12 é\"}], \"add_generation_prompt\": true, \"bos_token\": \"<s>\"}",
                         &text, &len) == KILNRT_OK)
    for (size_t i = 0; i < len; ++i) g_sink ^= (uint8_t)text[i];
  return 0;
#endif
  std::string path = memfile(data, size);
#ifdef KILN_FUZZ_GGUF
  // Weights, the config its metadata gives, and its tokenizer (a short text through it).
  kilnrt_weights *w;
  if (kilnrt_weights_open(path.c_str(), &w) == KILNRT_OK) {
    for (int i = 0; i < kilnrt_weights_count(w); ++i) {
      const char *name;
      kilnrt_tensor t;
      if (kilnrt_weights_get(w, i, &name, &t) != KILNRT_OK) continue;
      // Every value decoded (blocks of Q8_0 / Q4_0 / Q4_1 as stored: each block's bytes read).
      std::vector<float> f((size_t)kilnrt_tensor_numel(&t));
      if (kilnrt_tensor_to_f32(&t, f.data()) == KILNRT_OK)
        for (float v : f) g_sink ^= (uint8_t)(v != v);
    }
    kilnrt_weights_close(w);
  }
  const char *cfg;
  if (kilnrt_gguf_config(path.c_str(), &cfg) == KILNRT_OK) g_sink ^= (uint8_t)cfg[0];
  kilnrt_tokenizer *tok;
  if (kilnrt_tokenizer_open(path.c_str(), &tok) == KILNRT_OK) {
    const int32_t *ids;
    int64_t n;
    if (kilnrt_tokenizer_encode(tok, "Hi 12 caf\xc3\xa9 <|im_end|>", 20, 1, &ids, &n) == KILNRT_OK)
      for (int64_t i = 0; i < n; ++i) g_sink ^= (uint8_t)ids[i];
    kilnrt_tokenizer_close(tok);
  }
#elif defined(KILN_FUZZ_SAFETENSORS)
  kilnrt_weights *w;
  if (kilnrt_weights_open(path.c_str(), &w) == KILNRT_OK) {
    for (int i = 0; i < kilnrt_weights_count(w); ++i) {
      const char *name;
      kilnrt_tensor t;
      if (kilnrt_weights_get(w, i, &name, &t) == KILNRT_OK) touch(t, t.dtype == KILN_OTHER ? 1 : t.dtype == KILN_F16 || t.dtype == KILN_BF16 ? 2 : 4);
    }
    kilnrt_weights_close(w);
  }
#else
  kilnrt_tensor t;
  if (kilnrt_npy_read(path.c_str(), &t) == KILNRT_OK) {
    touch(t, 4);
    kilnrt_tensor_free(&t);
  }
#endif
  return 0;
}
