// libFuzzer target for a compiled model's command line: the input is split at newlines into
// argv and run through kilnrt_main_run with the toy model of tests/support/toy_model.h. Arguments naming paths (containing '/') or output/save flags are dropped so
// the fuzzer cannot write or read outside its working folder.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kilnrt/api.h"
#include "toy_model.h"

extern "C" int kilnrt_main_run(const kiln_model_info *model, int argc, char **argv);

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
  int rc = kilnrt_main_run(&toy::kModel, (int)args.size(), argv.data());
  if (rc != 0 && rc != 1) {  // an internal error (2) from user input is a bug
    fprintf(stderr, "kilnrt_main_run returned %d\n", rc);
    abort();
  }
  return 0;
}
