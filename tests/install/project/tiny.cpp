// tiny: a token embedding and a two-layer GELU MLP, written and built outside kiln's tree.
#include "kiln/Driver/Driver.h"
#include "kiln/dsl/Ops.h"

int main(int argc, char **argv) {
  kiln::Driver driver("tiny", "tiny: a small model built against an installed kiln");
  int64_t width = 16;
  driver.app().add_option("--width", width, "hidden width");
  return driver.run(argc, argv, [&](kiln::Model &m) {
    using namespace kiln;
    Dim L = m.seq("L", 8);
    Tensor tokens = m.tokens("tokens", L, 10);
    Tensor x = embedding(m.param("emb", {10, width}), tokens);
    Tensor h = gelu(linear(x, m.param("w1", {width, width}), m.param("b1", {width})));
    m.output("y", linear(h, m.param("w2", {2, width}), m.param("b2", {2})));
  });
}
