// kiln-opt: run kiln passes, or whole phases (--kiln-phase-tiled), like mlir-opt (for tests/ir).
#include "kiln/Pipeline/Phases.h"
#include "kiln/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  kiln::registerKilnPasses();
  kiln::registerPhasePipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "kiln-opt: kiln passes driver\n", registry));
}
