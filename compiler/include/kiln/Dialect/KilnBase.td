// KilnBase.td - the kiln dialect and the class every kiln op derives from.
#ifndef KILN_BASE
#define KILN_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "kiln/Dialect/KilnInterfaces.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Transformer models: attention, linears, norms, with dynamic sequence lengths";
  let description = [{
    The kiln dialect is what the kiln DSL emits. Each op carries the user's file:line as its
    location. Function arguments are the model's inputs (`kiln.name`; `kiln.syms`, the index
    of the sequence length of each dim, -1 for static dims; `kiln.vocab` for token ids);
    results are its outputs (`kiln.name`). The module attributes `kiln.seq_names` and
    `kiln.seq_bounds` name each sequence length and give its compiled bound.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;  // kiln.schedule, kiln.sparse and kiln.arena have their types
}

// `family`: the kernel family that computes the op (KernelFamily in KilnInterfaces.h: None, not
// a kernel; Runtime, served by the runtime). `tiling` (set with `let`): how kiln-tile-ops decides
// its tiles (Tiling in KilnInterfaces.h), by default Rowwise for a kernel, None otherwise.
// `hooks`: the KilnOpInterface methods the op defines itself (the others have defaults).
class Kiln_Op<string mnemonic, list<Trait> traits = [], string family = "None", list<string> hooks = []>
    : Op<Kiln_Dialect, mnemonic, !listconcat(traits, [DeclareOpInterfaceMethods<KilnOpInterface, hooks>])> {
  string kernelFamily = family;
  string tiling = !if(!or(!eq(family, "None"), !eq(family, "Runtime")), "None", "Rowwise");
  code extraDecls = "";  // more of the op class's declarations
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = "static constexpr ::kiln::KernelFamily kFamily = ::kiln::KernelFamily::" # kernelFamily #
                              ";\n  static constexpr ::kiln::Tiling kTiling = ::kiln::Tiling::" # tiling # ";\n" # extraDecls;
}

#endif  // KILN_BASE
