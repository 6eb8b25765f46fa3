// Link.cpp - the llvm and exe phases: the orchestration lowered to an object, the runtime
// table compiled, then --emit=llvm, obj, lib or the standalone executable (linked with the
// kernels, Halide's runtime and kilnrt).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "DriverImpl.h"
#include "kiln/Dialect/KernelSpec.h"
#include "kiln/Pipeline/ModelTable.h"
#include "kiln/Pipeline/ObjectEmitter.h"
#include "llvm/Support/raw_ostream.h"

namespace fs = std::filesystem;

namespace kiln {

int Driver::Impl::link(mlir::ModuleOp module, const Kernels &kernels, IRDumps &dumps) {
  // The model hash: the module after the kernels phase and the target.
  std::string printed;
  {
    llvm::raw_string_ostream os(printed);
    module->print(os);
  }
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a(printed + "@" + tgt.name));

  std::string work;
  {
    std::string tmpl = (fs::temp_directory_path() / "kiln-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw InternalError{"cannot create a temporary folder"};
    work = tmpl;
  }
  struct Cleanup {
    std::string dir;
    bool keep;
    ~Cleanup() {
      if (!keep) {
        std::error_code ec;
        fs::remove_all(dir, ec);
      }
    }
  } cleanup{work, keepTemps};
  writeText(work + "/model_info.c", modelInfoSource(module, tgt, name, KILN_VERSION, hash, symbol));
  std::string orchestration = work + "/orchestration.o";
  std::string llPath = emit == Emit::Llvm ? (output.empty() ? work + "/orchestration.ll" : output) : "";
  if (mlir::failed(lowerToObject(module, tgt, symbol, dumps, emit == Emit::Llvm ? "" : orchestration, llPath)))
    throw InternalError{"lowering the orchestration failed"};
  progress("phase llvm: orchestration lowered");
  if (emit == Emit::Llvm) {
    if (output.empty()) {
      std::ifstream f(llPath);
      std::stringstream ss;
      ss << f.rdbuf();
      writeText("", ss.str());
    }
    return 0;
  }
  if (emit == Emit::Obj) {
    PendingFile out(output);
    fs::copy_file(orchestration, out.tmp, fs::copy_options::overwrite_existing);
    out.commit();
    return 0;
  }
  runCommand(std::string(KILN_CC) + " -c -O1 -I" + shellWord(runtimeInclude) + " " + shellWord(work + "/model_info.c") +
             " -o " + shellWord(work + "/model_info.o"));
  std::string objs = shellWord(work + "/orchestration.o") + " " + shellWord(work + "/model_info.o");
  for (auto &o : kernels.objects) objs += " " + shellWord(o);
  objs += " " + shellWord(kernels.runtime);
  std::error_code ec;
  fs::path outPath(output);
  if (outPath.has_parent_path()) fs::create_directories(outPath.parent_path(), ec);
  if (emit == Emit::Lib) {
    PendingFile lib(output);
    runCommand("ar rcs " + shellWord(lib.tmp) + " " + objs);
    lib.commit();
    std::string header = fs::path(output).replace_extension(".h").string();
    writeText(header, "/* " + name + ": a model compiled by kiln " KILN_VERSION ". Link " +
                          fs::path(output).filename().string() +
                          " with libkilnrt.a, libpcre2-8.a, libutf8proc.a, -lstdc++ -lpthread -ldl -lm; run it "
                          "through the kilnrt session API (kilnrt/api.h). */\n"
                          "#pragma once\n#include \"kilnrt/api.h\"\n"
                          "#ifdef __cplusplus\nextern \"C\" {\n#endif\nextern const kiln_model_info " +
                          symbol + ";\n#ifdef __cplusplus\n}\n#endif\n");
    progress("wrote " + output + " and " + header);
    return 0;
  }
  PendingFile exe(output);
  runCommand(std::string(KILN_CXX) + " -o " + shellWord(exe.tmp) + " " + objs + " " + shellWord(mainLib) + " " +
             shellWord(runtimeLib) + " " + KILN_TEXT_LIBS + " -lpthread -ldl -lm");
  exe.commit();
  progress("phase exe: wrote " + output);
  return 0;
}

}  // namespace kiln
