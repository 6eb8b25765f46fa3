// template_test.cpp - kiln's Jinja-subset interpreter for chat templates against transformers'
// own Jinja environment (tests/reference/make_template_fixtures.py wrote
// tests/fixtures/templates/cases.json): SmolLM2's template (from its GGUF file), Llama 3.1's and
// Phi-3.5's as shipped, ChatML (Qwen2-style), [INST] (Mistral-style) and Gemma-style templates
// over conversations of 1-3 turns with and without a system message, and the language's
// corners; and what it refuses: each error names the construct and the template's line.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kilnrt/api.h"

namespace {
using json = nlohmann::json;

TEST(ChatTemplate, RendersAsTransformersDoes) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/tests/fixtures/templates/cases.json");
  json cases = json::parse(f);
  ASSERT_GE(cases.size(), 40u);
  for (const json &c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const char *text;
    size_t len;
    ASSERT_EQ(kilnrt_chat_render(c["template"].get<std::string>().c_str(), c["context"].dump().c_str(), &text, &len), KILNRT_OK)
        << kilnrt_last_error();
    EXPECT_EQ(std::string(text, len), c["output"].get<std::string>());
  }
}

TEST(ChatTemplate, ErrorsNameTheConstructAndLine) {
  auto error = [](const std::string &tmpl, const std::string &ctx = "{\"messages\": []}") {
    const char *text;
    size_t len;
    EXPECT_NE(kilnrt_chat_render(tmpl.c_str(), ctx.c_str(), &text, &len), KILNRT_OK) << tmpl;
    return std::string(kilnrt_last_error());
  };
  EXPECT_NE(error("a\nb\n{% macro m() %}{% endmacro %}").find("line 3: the statement 'macro' is not supported"), std::string::npos);
  EXPECT_NE(error("{{ x | wordcount }}").find("the filter 'wordcount' is not supported"), std::string::npos);
  EXPECT_NE(error("\n{{ raise_exception('roles must alternate') }}").find("line 2: the template raised an exception: roles must alternate"),
            std::string::npos);
  EXPECT_NE(error("{% if true %}x").find("'if' without 'endif'"), std::string::npos);
  EXPECT_NE(error("{{ 'abc' ").find("not closed"), std::string::npos);
  EXPECT_NE(error("{{ 1 + }}").find("expected a value"), std::string::npos);
  EXPECT_NE(error("{{ undefined_fn(1) }}").find("the function 'undefined_fn' is not supported"), std::string::npos);
  EXPECT_NE(error("{% for m in 3 %}{% endfor %}").find("not iterable"), std::string::npos);
  EXPECT_NE(error("{{ x }}", "[1]").find("not a JSON object"), std::string::npos);
}

}  // namespace
