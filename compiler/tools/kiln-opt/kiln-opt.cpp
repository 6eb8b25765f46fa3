// kiln-opt: run kiln passes one at a time (for lit tests), like mlir-opt.
#include "kiln/Pipelines/Pipeline.h"
#include "kiln/Transforms/Passes.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  kiln::registerKilnDialects(registry);
  kiln::registerKilnPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "kiln-opt: kiln passes driver\n", registry));
}
