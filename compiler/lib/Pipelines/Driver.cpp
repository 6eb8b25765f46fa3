// Driver.cpp - flags, progress, kernel generation with the on-disk cache, and the final link.
// Built with exceptions: CLI11, Halide and the DSL report errors by throwing, and every throw
// is caught here and turned into a message and an exit code.
#include "kiln/Pipelines/Driver.h"

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/Codegen/KernelCache.h"
#include "kiln/Support/KernelSpec.h"
#include "kiln/Pipelines/Pipeline.h"
#include "kiln/Transforms/Passes.h"
#include "kiln/dsl/Emit.h"
#include "kiln/dsl/Model.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/Diagnostics.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.1.0"
#endif

namespace fs = std::filesystem;

namespace kiln {

struct UserError {
  std::string msg;
};
struct InternalError {
  std::string msg;
};

struct Driver::Impl {
  std::string name;
  CLI::App app;
  std::string output, emit = "exe", compileTo = "exe", dumpDir, target = "host", cacheDir, input, ffnChunk = "auto",
      symbol = "kiln_model", maxMemory, gpuBuffers = "host";
  bool printIR = false, quiet = false, keepTemps = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();

  Impl(std::string n, std::string desc) : name(std::move(n)), app(desc) {
    app.add_option("-o", output, "output path (executable, library, object, or text)");
    app.add_option("--emit", emit, "artefact: mlir, schedule, halide-stmt, llvm, obj, lib, exe, cost")
        ->check(CLI::IsMember({"mlir", "schedule", "halide-stmt", "ptx", "llvm", "obj", "lib", "exe", "cost"}))
        ->capture_default_str();
    app.add_option("--compile-to", compileTo, "stop after phase: input, fused, tiled, scheduled, kernels, llvm, exe")
        ->check(CLI::IsMember({"input", "fused", "tiled", "scheduled", "kernels", "llvm", "exe"}))
        ->capture_default_str();
    app.add_option("--dump-dir", dumpDir, "write NN-<pass>.mlir per pass, <kernel>.schedule.txt and <kernel>.stmt");
    app.add_flag("--print-ir-after-all", printIR, "print the IR after every pass to stderr");
    app.add_option("--target", target, "host, x86-64-avx512, x86-64-avx2, x86-64-sse41, cuda (the host CPU plus NVIDIA GPU kernels) or opencl "
                   "(the host CPU plus the same GPU kernels on an OpenCL device)")->capture_default_str();
    app.add_option("--gpu-buffers", gpuBuffers,
                   "--target=cuda or opencl: host (each kernel call copies its operands to the device and its result back) or "
                   "device (weights, activations and caches stay on the device)")
        ->check(CLI::IsMember({"host", "device"}))
        ->capture_default_str();
    app.add_option("--cache-dir", cacheDir, "kernel cache (default: $KILN_CACHE_DIR or ~/.cache/kiln)");
    app.add_option("--ffn-chunk", ffnChunk, "rows per FFN chunk: auto (from the L2 size), off, or a number")
        ->check([](const std::string &v) {
          if (v == "auto" || v == "off") return std::string();
          char *end;
          long n = strtol(v.c_str(), &end, 10);
          return *end || n < 1 || n > 1 << 20 ? std::string("expected auto, off or a positive row count") : std::string();
        })
        ->capture_default_str();
    app.add_option("--lib-symbol", symbol, "--emit=lib: C symbol of the model table (one per model in a program)")
        ->check([](const std::string &v) {
          bool ok = !v.empty() && !isdigit((unsigned char)v[0]);
          for (char c : v) ok = ok && (isalnum((unsigned char)c) || c == '_');
          return ok ? std::string() : std::string("expected a C identifier");
        })
        ->capture_default_str();
    app.add_option("--max-memory", maxMemory,
                   "reject a model whose peak memory at the length bounds exceeds this (bytes, or with K/M/G/T; "
                   "default: this machine's RAM; 0: no limit)");
    app.add_flag("--quiet", quiet, "no progress output");
    app.add_flag("--keep-temps", keepTemps, "keep the temporary build folder");
  }

  void progress(const std::string &line) {
    if (quiet) return;
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fprintf(stderr, "kiln: [%6.2f s] %s\n", s, line.c_str());
  }

  std::string defaultCache() {
    if (const char *e = getenv("KILN_CACHE_DIR")) return e;
    if (const char *x = getenv("XDG_CACHE_HOME")) return std::string(x) + "/kiln";
    if (const char *h = getenv("HOME")) return std::string(h) + "/.cache/kiln";
    return (fs::temp_directory_path() / "kiln-cache").string();
  }

  // An output written under a temporary name beside `path` and renamed when complete, so an
  // interrupted or failed write never leaves a truncated file under the final name; the
  // temporary file is removed if the output is never committed.
  struct PendingFile {
    std::string path, tmp;
    bool done = false;
    explicit PendingFile(const std::string &p)
        : path(p), tmp((fs::path(p).parent_path() / ("." + fs::path(p).filename().string() + ".kiln-tmp-" +
                                                     std::to_string(getpid())))
                           .string()) {}
    void commit() {
      std::error_code ec;
      fs::rename(tmp, path, ec);
      if (ec) throw UserError{"cannot write '" + path + "': " + ec.message()};
      done = true;
    }
    ~PendingFile() {
      std::error_code ec;
      if (!done) fs::remove(tmp, ec);
    }
  };

  void writeText(const std::string &path, const std::string &text) {
    if (path.empty() || path == "-") {
      fputs(text.c_str(), stdout);
      return;
    }
    PendingFile out(path);
    std::ofstream f(out.tmp);
    f << text;
    f.close();
    if (!f) throw UserError{"cannot write '" + path + "'"};
    out.commit();
  }

  // A path as one shell word.
  static std::string q(const std::string &path) {
    std::string r = "'";
    for (char c : path) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return r + "'";
  }

  void sh(const std::string &cmd) {
    if (system(cmd.c_str()) != 0) throw InternalError{"command failed: " + cmd};
  }

  int compile(mlir::MLIRContext &ctx, mlir::ModuleOp module);
  int64_t memoryLimit() {
    if (maxMemory.empty()) return (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
    char *end;
    double v = strtod(maxMemory.c_str(), &end);
    std::string suffix = end;
    double mult = suffix == "" ? 1 : suffix == "K" ? 1e3 : suffix == "M" ? 1e6 : suffix == "G" ? 1e9 : suffix == "T" ? 1e12 : -1;
    if (mult < 0 || v < 0 || end == maxMemory.c_str())
      throw UserError{"--max-memory expects bytes, optionally with K, M, G or T, got '" + maxMemory + "'"};
    return (int64_t)(v * mult);
  }
  int guarded(const std::function<int()> &body);
};

Driver::Driver(std::string name, std::string description) : impl_(new Impl(std::move(name), std::move(description))) {}
Driver::~Driver() = default;
CLI::App &Driver::app() { return impl_->app; }

int Driver::Impl::guarded(const std::function<int()> &body) {
  try {
    return body();
  } catch (const Error &e) {  // the model program's own mistake, at its line
    fprintf(stderr, "%s\n", e.what());
    return 1;
  } catch (const UserError &e) {
    fprintf(stderr, "kiln: error: %s\n", e.msg.c_str());
    return 1;
  } catch (const InternalError &e) {
    fprintf(stderr, "kiln: internal error: %s\n", e.msg.c_str());
    return 2;
  } catch (const std::exception &e) {
    fprintf(stderr, "kiln: internal error: %s\n", e.what());
    return 2;
  }
}

static int parseFlags(CLI::App &app, int argc, char **argv, bool &done) {
  done = false;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    done = true;
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    done = true;
    fprintf(stderr, "kiln: error: %s (see --help)\n", e.what());
    return 1;
  }
  return 0;
}

static void setupContext(mlir::DialectRegistry &registry) { registerKilnDialects(registry); }

int Driver::run(int argc, char **argv, const std::function<void(Model &)> &build) {
  bool done;
  int rc = parseFlags(impl_->app, argc, argv, done);
  if (done) return rc;
  return impl_->guarded([&] {
    Model m(impl_->name);
    build(m);
    if (m.outputs().empty()) throw UserError{"the model '" + impl_->name + "' has no outputs"};
    mlir::DialectRegistry registry;
    setupContext(registry);
    mlir::MLIRContext ctx(registry);
    auto module = emitModel(ctx, m);
    return impl_->compile(ctx, *module);
  });
}

int Driver::runFile(int argc, char **argv) {
  impl_->app.add_option("input", impl_->input, "kiln-dialect .mlir file")->required();
  bool done;
  int rc = parseFlags(impl_->app, argc, argv, done);
  if (done) return rc;
  return impl_->guarded([&] {
    mlir::DialectRegistry registry;
    setupContext(registry);
    mlir::MLIRContext ctx(registry);
    llvm::SourceMgr sm;
    mlir::SourceMgrDiagnosticHandler handler(sm, &ctx);
    auto module = mlir::parseSourceFile<mlir::ModuleOp>(impl_->input, sm, &ctx);
    if (!module) throw UserError{"cannot parse '" + impl_->input + "'"};
    impl_->name = fs::path(impl_->input).stem().string();
    return impl_->compile(ctx, *module);
  });
}

int Driver::Impl::compile(mlir::MLIRContext &ctx, mlir::ModuleOp module) {
  auto tgt = resolveTarget(target);
  if (!tgt) throw UserError{"unknown --target '" + target + "' (host, x86-64-avx512, x86-64-avx2, x86-64-sse41, cuda, opencl)"};
  if (emit == "ptx" && !tgt->cuda()) throw UserError{"--emit=ptx needs --target=cuda"};
  if (gpuBuffers == "device" && tgt->gpu.empty()) throw UserError{"--gpu-buffers=device needs --target=cuda or opencl"};
  tgt->gpu_resident = gpuBuffers == "device";
  if (emit == "ptx" && output.empty()) throw UserError{"-o DIR is required for --emit=ptx (one <kernel>.ptx per kernel)"};
  Phase upto = *parsePhase(compileTo);
  if (emit == "exe" && upto != Phase::Exe) emit = upto <= Phase::Kernels ? "mlir" : "llvm";
  if (emit == "mlir" && upto > Phase::Kernels) upto = Phase::Kernels;
  if ((emit == "llvm" || emit == "obj") && upto < Phase::LLVM) upto = Phase::LLVM;
  if (emit == "exe" || emit == "lib" || emit == "halide-stmt" || emit == "ptx") upto = Phase::Exe;
  if (emit == "schedule" || emit == "cost") upto = std::max(upto, Phase::Kernels);
  if ((emit == "exe" || emit == "lib" || emit == "obj") && output.empty())
    throw UserError{"-o PATH is required for --emit=" + emit};
  progress("compiling " + name + " for " + tgt->name);
  if (!dumpDir.empty()) {
    std::error_code ec;
    fs::create_directories(dumpDir, ec);
    if (ec) throw UserError{"cannot create --dump-dir '" + dumpDir + "': " + ec.message()};
    for (auto &e : fs::directory_iterator(dumpDir)) {  // stale dumps would mislead
      auto ext = e.path().extension();
      if (ext == ".mlir" || ext == ".stmt" || ext == ".txt" || ext == ".ll" || ext == ".ptx") fs::remove(e.path());
    }
  }
  PipelineOptions popt;
  popt.target = *tgt;
  popt.dump_dir = dumpDir;
  popt.print_ir_after_all = printIR;
  if (symbol != "kiln_model" && emit != "lib") throw UserError{"--lib-symbol applies to --emit=lib only"};
  popt.symbol = symbol;
  popt.ffn_chunk = ffnChunk == "auto" ? 0 : ffnChunk == "off" ? -1 : std::stoll(ffnChunk);
  popt.progress = [this](const std::string &s) { progress(s); };
  if (mlir::failed(runPhases(module, popt, std::min(upto, Phase::Kernels))))
    throw UserError{"compilation of '" + name + "' failed (see the errors above)"};
  if (upto >= Phase::Kernels && mlir::failed(checkMemoryLimit(module, memoryLimit())))
    throw UserError{"'" + name + "' does not fit the memory limit (see above)"};
  if (emit == "mlir") {
    std::string s;
    llvm::raw_string_ostream os(s);
    module->print(os);
    writeText(output, s);
    return 0;
  }
  std::string cost = costReport(module);
  if (!dumpDir.empty()) writeText(dumpDir + "/cost.txt", cost);
  if (emit == "cost") {
    writeText(output, cost);
    return 0;
  }
  if (emit == "schedule") {
    writeText(output, scheduleReport(module));
    return 0;
  }
  std::string printed;
  {
    llvm::raw_string_ostream os(printed);
    module->print(os);
  }
  char hash[17];
  snprintf(hash, sizeof hash, "%016llx", (unsigned long long)fnv1a(printed + "@" + tgt->name));

  // Kernels: one Halide kernel per distinct spec, reused from the cache when present.
  std::vector<KernelRef> kernels = collectKernels(module);
  std::vector<std::string> objects;
  std::string cache = cacheDir.empty() ? defaultCache() : cacheDir;
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) throw UserError{"cannot create the kernel cache '" + cache + "': " + ec.message()};
  auto k0 = std::chrono::steady_clock::now();
  int reused = 0;
  std::string stmts;
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto spec = KernelSpec::parse(kernels[i].spec);
    if (!spec) throw InternalError{"unreadable kernel spec '" + kernels[i].spec + "'"};
    KernelArtifacts art;
    std::string err;
    if (!buildKernel(kernels[i].name, *spec, tgt->halide, cache, &art, &err)) throw InternalError{err};
    reused += art.cached;
    if (!art.cached) progress("kernel " + std::to_string(i + 1) + "/" + std::to_string(kernels.size()) + " " + kernels[i].name);
    objects.push_back(art.object);
    if (!dumpDir.empty()) {
      writeText(dumpDir + "/" + kernels[i].name + ".schedule.txt",
                kernelScheduleText(kernels[i].name, kernels[i].spec, art.schedule));
      fs::copy_file(art.stmt, dumpDir + "/" + kernels[i].name + ".stmt", fs::copy_options::overwrite_existing);
      if (!art.ptx.empty() && fs::file_size(art.ptx) > 0)
        fs::copy_file(art.ptx, dumpDir + "/" + kernels[i].name + ".ptx", fs::copy_options::overwrite_existing);
    }
    if (emit == "ptx" && !art.ptx.empty() && fs::file_size(art.ptx) > 0) {  // a kernel without one runs on the host
      fs::create_directories(output, ec);
      fs::copy_file(art.ptx, output + "/" + kernels[i].name + ".ptx", fs::copy_options::overwrite_existing);
    }
    if (emit == "halide-stmt") {
      std::ifstream f(art.stmt);
      std::stringstream ss;
      ss << f.rdbuf();
      stmts += "// ---- " + kernels[i].name + "\n" + ss.str() + "\n";
    }
  }
  std::string rt, err;
  if (!buildHalideRuntime(tgt->halide, cache, &rt, &err)) throw InternalError{err};
  char line[160];
  snprintf(line, sizeof line, "phase kernels: %zu kernels (%d from the cache) in %.2f s", kernels.size(), reused,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - k0).count());
  progress(line);
  if (emit == "halide-stmt") {
    writeText(output, stmts);
    return 0;
  }
  if (emit == "ptx") {
    progress("wrote the kernels' PTX to " + output);
    return 0;
  }

  // Orchestration and runtime table.
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
  std::string info = modelInfoSource(module, *tgt, name, KILN_VERSION, hash, symbol);
  writeText(work + "/model_info.c", info);
  std::string orchestration = work + "/orchestration.o";
  std::string llPath = emit == "llvm" ? (output.empty() ? work + "/orchestration.ll" : output) : "";
  if (mlir::failed(lowerToObject(module, popt, dumpCount(), emit == "llvm" ? "" : orchestration, llPath)))
    throw InternalError{"lowering the orchestration failed"};
  progress("phase llvm: orchestration lowered");
  if (emit == "llvm") {
    if (output.empty()) {
      std::ifstream f(llPath);
      std::stringstream ss;
      ss << f.rdbuf();
      writeText("", ss.str());
    }
    return 0;
  }
  if (emit == "obj") {
    PendingFile out(output);
    fs::copy_file(orchestration, out.tmp, fs::copy_options::overwrite_existing);
    out.commit();
    return 0;
  }
  sh(std::string(KILN_CC) + " -c -O1 -I" + q(KILN_RUNTIME_INCLUDE) + " " + q(work + "/model_info.c") + " -o " +
     q(work + "/model_info.o"));
  std::string objs = q(work + "/orchestration.o") + " " + q(work + "/model_info.o");
  for (auto &o : objects) objs += " " + q(o);
  objs += " " + q(rt);
  fs::path outPath(output);
  if (outPath.has_parent_path()) fs::create_directories(outPath.parent_path(), ec);
  if (emit == "lib") {
    std::string lib = output;
    PendingFile out(output);
    sh("ar rcs " + q(out.tmp) + " " + objs);
    out.commit();
    std::string header = fs::path(output).replace_extension(".h").string();
    writeText(header, "/* " + name + ": a model compiled by kiln " KILN_VERSION
                      ". Link " + fs::path(output).filename().string() +
                      " with libkilnrt.a, -lpthread -ldl -lm; run it through the kilnrt session API. */\n"
                      "#pragma once\n#include \"kilnrt/api.h\"\n"
                      "#ifdef __cplusplus\nextern \"C\"\n#endif\nconst kiln_model_info " + symbol + ";\n");
    progress("wrote " + lib + " and " + header);
    return 0;
  }
  PendingFile exe(output);
  sh(std::string(KILN_CXX) + " -o " + q(exe.tmp) + " " + objs + " " + q(KILN_MAIN_LIB) + " " + q(KILN_RUNTIME_LIB) +
     " -lpthread -ldl -lm");
  exe.commit();
  progress("phase exe: wrote " + output);
  return 0;
}

}  // namespace kiln
