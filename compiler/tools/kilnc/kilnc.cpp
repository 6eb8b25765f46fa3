// kilnc: compile a kiln-dialect .mlir file end to end (the same driver as DSL programs).
#include "kiln/Driver/Driver.h"

int main(int argc, char **argv) {
  kiln::Driver driver("kilnc", "kilnc: compile a kiln-dialect .mlir file to a standalone executable");
  return driver.runFile(argc, argv);
}
