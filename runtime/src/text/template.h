// template.h - chat templates: kiln's own interpreter of the Jinja subset that models' chat
// templates use (no C++ Jinja library is packaged for Debian). Not installed.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "kilnrt/api.h"

namespace kilnrt::text {

// Renders `source` with the variables of `context` (messages, add_generation_prompt, bos_token,
// ...), as transformers' apply_chat_template does (Jinja with trim_blocks and lstrip_blocks).
// A construct outside the subset, a syntax error or raise_exception() is a USER_ERROR naming
// it and the template's line.
kilnrt_status render_template(const std::string &source, const nlohmann::json &context, std::string &out);

}  // namespace kilnrt::text
