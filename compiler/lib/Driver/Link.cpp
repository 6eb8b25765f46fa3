// Link.cpp - the llvm and exe phases: the orchestration lowered to an object, the runtime
// table compiled, then --emit=llvm, obj, lib or the standalone executable (linked with the
// kernels, Halide's runtime and kilnrt).
#include <unistd.h>

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

// The linker flag for the fastest linker on PATH: lld (an executable of GPT-2 small linked in
// 78 ms against 137 ms with the default, bfd), else gold (105 ms), else the default.
static std::string fastLinker() {
  const char *path = getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (const char *ld : {"ld.lld", "ld.gold"}) {
    for (size_t at = 0; at <= dirs.size();) {
      size_t colon = dirs.find(':', at);
      std::string dir = dirs.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
      if (!dir.empty() && access((dir + "/" + ld).c_str(), X_OK) == 0) return std::string(" -fuse-ld=") + (ld + 3);
      if (colon == std::string::npos) break;
      at = colon + 1;
    }
  }
  return "";
}

Driver::Impl::Lowered::~Lowered() {
  std::error_code ec;
  if (!keep && !work.empty()) fs::remove_all(work, ec);
}

std::unique_ptr<Driver::Impl::Lowered> Driver::Impl::lower(mlir::ModuleOp module, IRDumps &dumps) {
  // The model hash: the module after the kernels phase and the target.
  std::string printed;
  {
    llvm::raw_string_ostream os(printed);
    module->print(os);
  }
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a(printed + "@" + tgt.name));
  auto l = std::make_unique<Lowered>();
  {
    std::string tmpl = (fs::temp_directory_path() / "kiln-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw InternalError{"cannot create a temporary folder"};
    l->work = tmpl;
    l->keep = keepTemps;
  }
  writeText(l->work + "/model_info.c", modelInfoSource(module, tgt, name, KILN_VERSION, hash, symbol));
  l->orchestration = l->work + "/orchestration.o";
  l->ll = emit == Emit::Llvm ? (output.empty() ? l->work + "/orchestration.ll" : output) : "";
  if (mlir::failed(lowerToObject(module, tgt, symbol, dumps, emit == Emit::Llvm ? "" : l->orchestration, l->ll)))
    throw InternalError{"lowering the orchestration failed"};
  if (emit == Emit::Lib || emit == Emit::Exe)
    runCommand(std::string(KILN_CC) + " -c -O1 -I" + shellWord(runtimeInclude) + " " + shellWord(l->work + "/model_info.c") +
               " -o " + shellWord(l->work + "/model_info.o"));
  progress("phase llvm: orchestration lowered");
  return l;
}

int Driver::Impl::link(const Lowered &lowered, const Kernels &kernels) {
  const std::string &work = lowered.work, &llPath = lowered.ll, &orchestration = lowered.orchestration;
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
  std::string objs = shellWord(orchestration) + " " + shellWord(work + "/model_info.o");
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
  static const std::string linker = fastLinker();
  runCommand(std::string(KILN_CXX) + linker + " -o " + shellWord(exe.tmp) + " " + objs + " " + shellWord(mainLib) + " " +
             shellWord(runtimeLib) + " " + KILN_TEXT_LIBS + " -lpthread -ldl -lm");
  exe.commit();
  progress("phase exe: wrote " + output);
  return 0;
}

}  // namespace kiln
