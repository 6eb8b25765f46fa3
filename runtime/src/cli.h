// cli.h - what the compiled executable's command line (main.cpp) and its generation loop
// (generate.cpp) share: the model being run, and failing with a message and an exit code.
#pragma once
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
  // "<model>: error: <msg>" on stderr, then Exit{code}.
  [[noreturn]] void die(int code, const std::string &msg) const;
  // A failed runtime call: its message, exit code 1 (user error) or 2 (internal).
  void check(kilnrt_status st) const;
  const kiln_entry_info *find_entry(const char *name) const;
};

// --generate N (generate.cpp): runs the prompt through `prefill`, then greedy decoding of n
// tokens with the KV cache; prints them (and writes generated.npy into output_dir when given).
// Returns the exit code.
int generate_tokens(const Cli &cli, kilnrt_session *s, const kiln_entry_info *prefill, int n, int32_t start_token,
                    const std::string &output_dir);

}  // namespace kilnrt
