// libFuzzer target for a compiled model's command line: the input is split at newlines into
// argv and run through kilnrt_main_run with a toy model (token input of length <= 8, vocab 10,
// one parameter). Arguments naming paths (containing '/') or output/save flags are dropped so
// the fuzzer cannot write or read outside its working folder.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kilnrt/api.h"

extern "C" int kilnrt_main_run(const kiln_model_info *model, int argc, char **argv);

namespace {
int32_t entry(void **bufs, const int64_t *syms, int32_t *) {
  const float *w = (const float *)bufs[0];
  const int32_t *ids = (const int32_t *)bufs[1];
  float *out = (float *)bufs[2];
  for (int64_t i = 0; i < syms[0]; ++i) out[i] = ids[i] + w[0];
  return 0;
}
const char *const kSyms[] = {"L"};
const int64_t kMax[] = {8};
const kiln_tensor_info kParams[] = {{"w", KILN_F32, 1, {{4, -1}}, 0, KILN_INIT_NORMAL, 0.02f}};
const kiln_tensor_info kIo[] = {{"tokens", KILN_I32, 1, {{8, 0}}, 10, 0, 0}, {"out", KILN_F32, 1, {{8, 0}}, 0, 0, 0}};
const int32_t kIn[] = {0}, kOut[] = {1};
const kiln_buffer_info kBufs[] = {{4, {1, 0, 0, 0}, 0, 0}};
const char *const kKernels[] = {"copy"};
const kiln_entry_info kEntries[] = {{"forward", entry, 1, 1, kIn, kOut, 1, kBufs, 1, kKernels}};
const kiln_model_info kModel = {KILN_ABI_VERSION, "toy", "0", "h", "t", "", 1, kSyms, kMax, 1, kParams, 2, kIo, 1,
                                kEntries, "", 0, nullptr};
}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/kiln_fuzz_args_XXXXXX";
  if (!mkdtemp(dir) || chdir(dir) != 0) abort();
  // The model's own output is silenced with libFuzzer's -close_fd_mask=3 (see the ctest command),
  // which keeps libFuzzer's statistics.
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args{"toy"};
  std::string cur;
  for (size_t i = 0; i <= size && args.size() < 32; ++i) {
    if (i == size || data[i] == '\n') {
      bool unsafe = cur.find('/') != std::string::npos || cur.find("output-dir") != std::string::npos ||
                    cur.find("save-weights") != std::string::npos || cur.find("repeat") != std::string::npos;
      if (!unsafe) args.push_back(cur);
      cur.clear();
    } else if (cur.size() < 256) {
      cur.push_back((char)data[i]);
    }
  }
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = kilnrt_main_run(&kModel, (int)args.size(), argv.data());
  if (rc != 0 && rc != 1) {  // an internal error (2) from user input is a bug
    fprintf(stderr, "kilnrt_main_run returned %d\n", rc);
    abort();
  }
  return 0;
}
