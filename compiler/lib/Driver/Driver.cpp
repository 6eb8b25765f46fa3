// Driver.cpp - the driver's flags, its two entry points (a DSL program, a kilnc file) and the
// boundary where every exception becomes a message and an exit code.
#include <cmath>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>
#include <sstream>

#include "DriverImpl.h"
#include "kilnrt/api.h"
#include "kiln/Frontend/DslEmitter.h"
#include "kiln/dsl/Model.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

namespace fs = std::filesystem;

namespace kiln {

static const char *kEmitNames[] = {"mlir", "cost", "schedule", "halide-stmt", "ptx", "llvm", "obj", "lib", "exe"};
std::optional<Emit> parseEmit(const std::string &name) {
  for (int i = 0; i <= (int)Emit::Exe; ++i)
    if (name == kEmitNames[i]) return (Emit)i;
  return std::nullopt;
}
const char *emitName(Emit e) { return kEmitNames[(int)e]; }

PendingFile::PendingFile(const std::string &p)
    : path(p),
      tmp((fs::path(p).parent_path() / ("." + fs::path(p).filename().string() + ".kiln-tmp-" + std::to_string(getpid())))
              .string()) {}
void PendingFile::commit() {
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw UserError{"cannot write '" + path + "': " + ec.message()};
  done = true;
}
PendingFile::~PendingFile() {
  std::error_code ec;
  if (!done) fs::remove(tmp, ec);
}

std::string shellWord(const std::string &path) {
  std::string r = "'";
  for (char c : path) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

void runCommand(const std::string &cmd) {
  if (system(cmd.c_str()) != 0) throw InternalError{"command failed: " + cmd};
}

// A flag's values: the names of an enum of KilnEnums.td, for CLI11 to turn into the enum.
template <class E>
static std::map<std::string, E> enumNames(uint64_t maxValue, llvm::StringRef (*name)(E)) {
  std::map<std::string, E> m;
  for (uint64_t v = 0; v <= maxValue; ++v) m[name((E)v).str()] = (E)v;
  return m;
}
#define KILN_ENUM_FLAG(E) CLI::CheckedTransformer(enumNames<E>(getMaxEnumValFor##E(), stringify##E))

Driver::Impl::Impl(std::string n, std::string desc) : name(std::move(n)), app(desc) {
  std::string emits;
  for (const char *e : kEmitNames) emits += (emits.empty() ? "" : ", ") + std::string(e);
  app.add_option("-o", output, "output path (executable, library, object, or text)");
  app.add_option("--emit", emitFlag, "artefact: " + emits)
      ->check([](const std::string &v) { return parseEmit(v) ? std::string() : "expected one of the artefacts"; })
      ->capture_default_str();
  app.add_option("--compile-to", compileTo, "stop after phase: input, fused, tiled, scheduled, kernels, llvm, exe")
      ->check([](const std::string &v) { return parsePhase(v) ? std::string() : "expected a phase"; })
      ->capture_default_str();
  app.add_option("--dump-dir", dumpDir, "write NN-<pass>.mlir per pass, <kernel>.schedule.txt and <kernel>.stmt");
  app.add_flag("--print-ir-after-all", printIR, "print the IR after every pass to stderr");
  app.add_option("--target", target,
                 "host, x86-64-avx512, x86-64-avx512bf16 (with AVX-512 BF16 dot products), x86-64-avx2, x86-64-sse41, cuda (the host CPU plus NVIDIA GPU kernels) or opencl "
                 "(the host CPU plus the same GPU kernels on an OpenCL device)")
      ->capture_default_str();
  app.add_option("--gpu-buffers", gpuBuffers,
                 "--target=cuda or opencl: host (each kernel call copies its operands to the device and its result back) or "
                 "device (weights, activations and caches stay on the device)")
      ->transform(KILN_ENUM_FLAG(GpuBuffers))
      ->default_str("host");
  app.add_option("--cache-dir", cacheDir, "kernel cache (default: $KILN_CACHE_DIR or ~/.cache/kiln)");
  // A chunk option's value: auto (0, the pass's default), off (-1, no pass) or a positive count
  // of `what`s, turned into that number.
  auto autoOffOrCount = [](std::string what) {
    return CLI::Validator(
        [what](std::string &v) {
          if (v == "auto" || v == "off") {
            v = v == "auto" ? "0" : "-1";
            return std::string();
          }
          char *end;
          long n = strtol(v.c_str(), &end, 10);
          return *end || n < 1 || n > 1 << 20 ? "expected auto, off or a positive " + what + " count" : std::string();
        },
        "auto|off|N");
  };
  app.add_option("--ffn-chunk", ffnChunk,
                 "rows per FFN chunk: auto (48 to 384 rows: its [chunk, d_ff] intermediate within 4 MiB; 1024 for GPU targets), off, or a "
                 "number")
      ->transform(autoOffOrCount("row"))
      ->default_str("auto");
  app.add_option("--recompute-ffn", recomputeFfn,
                 "training entries: what the backward recomputes of each FFN instead of keeping it from the forward: off; "
                 "activation (its output, from the first linear's: rows x d_ff floats less per FFN for one elementwise "
                 "pass); all (both d_ff-wide intermediates from the FFN's input: twice that, for one more GEMM per FFN, "
                 "and the forward runs the FFN by chunks)")
      ->transform(KILN_ENUM_FLAG(RecomputeFfn))
      ->default_str("off");
  app.add_option("--reversible-backward", reversibleBackward,
                 "training entries: the backward of reversible layers: reconstruct (each layer's input from its output, "
                 "running F and G once more: activation memory constant in depth) or store (keep every layer's activations)")
      ->transform(KILN_ENUM_FLAG(ReversibleBackward))
      ->default_str("reconstruct");
  app.add_option("--precision", precision,
                 "GEMM operands: f32, or bf16 (linear, matmul and FFN kernels round both operands to bfloat16 and sum "
                 "the products in f32; parameters, the backward and the optimizer stay f32). Default: the model's "
                 "Model::set_precision, else f32")
      ->transform(KILN_ENUM_FLAG(PrecisionOption))
      ->default_str("model");
  app.add_option("--quantize", quantize,
                 "keep GEMM weights and embedding tables in ggml's blocks of 32: q8_0 (8.5 bits a weight), q4_0 (4.5), "
                 "q4_1 (5); f32 weights are quantized once when loaded. Default: a GGUF --config's own tensor types "
                 "(its Q8_0, Q4_0 and Q4_1 tensors read as stored), else f32")
      ->transform(KILN_ENUM_FLAG(WeightFormat))
      ->default_str("f32");
  app.add_option("--ffn-grad-chunk", ffnGradChunk,
                 "training entries: d_ff columns per chunk of the backward of a recomputed FFN (--recompute-ffn all or a "
                 "checkpointed block): auto (multiples of 64 columns: each [rows, chunk] intermediate within 16 MiB at the "
                 "row bound), off, or a number")
      ->transform(autoOffOrCount("column"))
      ->default_str("auto");
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

void Driver::Impl::progress(const std::string &line) {
  if (quiet) return;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fprintf(stderr, "kiln: [%6.2f s] %s\n", s, line.c_str());
}

std::string Driver::Impl::defaultCache() {
  if (const char *e = getenv("KILN_CACHE_DIR")) return e;
  if (const char *x = getenv("XDG_CACHE_HOME")) return std::string(x) + "/kiln";
  if (const char *h = getenv("HOME")) return std::string(h) + "/.cache/kiln";
  return (fs::temp_directory_path() / "kiln-cache").string();
}

void Driver::Impl::writeText(const std::string &path, const std::string &text) {
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

int64_t Driver::Impl::memoryLimit() {
  if (maxMemory.empty()) return (int64_t)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE);
  char *end;
  double v = strtod(maxMemory.c_str(), &end);
  std::string suffix = end;
  double mult = suffix == "" ? 1 : suffix == "K" ? 1e3 : suffix == "M" ? 1e6 : suffix == "G" ? 1e9 : suffix == "T" ? 1e12 : -1;
  if (mult < 0 || v < 0 || end == maxMemory.c_str())
    throw UserError{"--max-memory expects bytes, optionally with K, M, G or T, got '" + maxMemory + "'"};
  return (int64_t)(v * mult);
}

Driver::Driver(std::string name, std::string description, std::string prefix)
    : impl_(new Impl(std::move(name), std::move(description))) {
  // The runtime: an install prefix given by the program, else one holding this executable
  // (bin/kilnc of an installed kiln), else the build tree's.
  if (prefix.empty()) {
    std::error_code ec;
    fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    fs::path up = exe.parent_path().parent_path();
    if (!ec && fs::exists(up / "lib/libkilnrt.a") && fs::exists(up / "include/kilnrt/api.h")) prefix = up.string();
  }
  if (!prefix.empty()) {
    impl_->runtimeInclude = prefix + "/include";
    impl_->runtimeLib = prefix + "/lib/libkilnrt.a";
    impl_->mainLib = prefix + "/lib/libkilnrt_main.a";
  }
}
Driver::~Driver() = default;
CLI::App &Driver::app() { return impl_->app; }

static void addConfigFlag(Driver::Impl &impl) {
  if (impl.configOptions.empty())
    impl.app.add_option("--config", impl.configFile,
                        "a checkpoint's config.json: the model's sizes from it (a flag may repeat a size, not "
                        "contradict it), its other fields checked against the model");
}
void Driver::config_option(const std::string &key, const std::string &flag, int64_t &value) {
  addConfigFlag(*impl_);
  impl_->configOptions.push_back({key, flag, &value});
}
void Driver::config_option(const std::string &key, const std::string &flag, double &value) {
  addConfigFlag(*impl_);
  impl_->configOptions.push_back({key, flag, nullptr, &value});
}
void Driver::config_option(const std::string &key, const std::string &flag, bool &value) {
  addConfigFlag(*impl_);
  impl_->configOptions.push_back({key, flag, nullptr, nullptr, &value});
}
void Driver::config_option(const std::string &key, const std::string &flag, std::string &value) {
  addConfigFlag(*impl_);
  impl_->configOptions.push_back({key, flag, nullptr, nullptr, nullptr, &value});
}

// The field a dotted key names ("a.b": member b of object a), or null.
static const nlohmann::json *configField(const nlohmann::json &cfg, const std::string &key) {
  const nlohmann::json *at = &cfg;
  std::stringstream parts(key);
  for (std::string p; std::getline(parts, p, '.');) {
    if (!at->is_object() || !at->contains(p)) return nullptr;
    at = &(*at)[p];
  }
  return at->is_null() ? nullptr : at;
}

// --config: the sizes it gives, into the options bound to them (a flag given explicitly wins).
// A GGUF file (by its magic) gives the config.json its metadata amounts to (kilnrt_gguf_config).
static bool isGguf(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

static void applyConfig(Driver::Impl &impl) {
  nlohmann::json cfg;
  if (isGguf(impl.configFile)) {
    const char *text = nullptr;
    if (kilnrt_gguf_config(impl.configFile.c_str(), &text) != KILNRT_OK) throw UserError{std::string(kilnrt_last_error())};
    cfg = nlohmann::json::parse(text);
    // Its quantized tensors' types, compiled in (unless --quantize says otherwise).
    if (kilnrt_gguf_tensor_types(impl.configFile.c_str(), &text) != KILNRT_OK) throw UserError{std::string(kilnrt_last_error())};
    const nlohmann::json types = nlohmann::json::parse(text);
    if (!impl.app.count("--quantize"))
      for (auto &[name, type] : types.items()) {
        std::string t = type.get<std::string>();
        std::transform(t.begin(), t.end(), t.begin(), ::tolower);
        if (symbolizeWeightFormat(t) && t != "f32") impl.tensorFormats.push_back(name + "=" + t);
      }
  } else {
    std::ifstream f(impl.configFile);
    if (!f) throw UserError{"--config '" + impl.configFile + "': cannot open"};
    cfg = nlohmann::json::parse(f, nullptr, false);
  }
  if (cfg.is_discarded() || !cfg.is_object()) throw UserError{"--config '" + impl.configFile + "' is not a JSON object"};
  for (auto &o : impl.configOptions) {
    std::stringstream keys(o.key);
    for (std::string k; std::getline(keys, k, '|');) {
      const nlohmann::json *v = configField(cfg, k);
      if (!v) continue;
      auto bad = [&](const char *what) {
        return UserError{"--config '" + impl.configFile + "': " + k + " is " + v->dump() + ", not " + what};
      };
      auto contradicts = [&](const std::string &given) {
        return UserError{o.flag + " " + given + " contradicts --config '" + impl.configFile + "', whose " + k + " is " + v->dump()};
      };
      const bool given = impl.app.count(o.flag) > 0;
      if (o.size) {
        if (!v->is_number_integer() || v->get<int64_t>() < 0) throw bad("a size");
        if (given && *o.size != v->get<int64_t>()) throw contradicts(std::to_string(*o.size));
        *o.size = v->get<int64_t>();
      } else if (o.real) {
        if (!v->is_number() || !std::isfinite(v->get<double>())) throw bad("a finite number");
        if (given && *o.real != v->get<double>()) throw contradicts(std::to_string(*o.real));
        *o.real = v->get<double>();
      } else if (o.text) {
        if (!v->is_string()) throw bad("a string");
        if (given && *o.text != v->get<std::string>()) throw contradicts(*o.text);
        *o.text = v->get<std::string>();
      } else {
        if (!v->is_boolean()) throw bad("true or false");
        if (given && *o.flagValue != v->get<bool>()) throw contradicts(*o.flagValue ? "(true)" : "(false)");
        *o.flagValue = v->get<bool>();
      }
      break;
    }
  }
}

// The model's checkpoint fields against --config's file, as a compiled model checks its weights'.
static void checkConfig(Driver::Impl &impl, const Model &m) {
  if (isGguf(impl.configFile)) return;  // its metadata is checked when the weights load
  std::vector<kiln_config_field> fields;
  for (auto &f : m.checkpoint_config())
    fields.push_back({f.key.c_str(), f.value.c_str(), f.absent ? f.absent->c_str() : nullptr, f.what.c_str(), f.at_least});
  if (kilnrt_config_check(impl.configFile.c_str(), fields.data(), (int32_t)fields.size()) != KILNRT_OK)
    throw UserError{std::string(kilnrt_last_error())};
}

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

int Driver::run(int argc, char **argv, const std::function<void(Model &)> &build) {
  bool done;
  int rc = parseFlags(impl_->app, argc, argv, done);
  if (done) return rc;
  return impl_->guarded([&] {
    if (!impl_->configFile.empty()) applyConfig(*impl_);
    Model m(impl_->name);
    build(m);
    if (!impl_->configFile.empty()) checkConfig(*impl_, m);
    if (m.outputs().empty()) throw UserError{"the model '" + impl_->name + "' has no outputs"};
    mlir::DialectRegistry registry;
    registerKilnDialects(registry);
    mlir::MLIRContext ctx(registry);
    // Pass errors at the model's file:line (and its source line when the file is readable).
    llvm::SourceMgr sm;
    mlir::SourceMgrDiagnosticHandler handler(sm, &ctx);
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
    registerKilnDialects(registry);
    mlir::MLIRContext ctx(registry);
    llvm::SourceMgr sm;
    mlir::SourceMgrDiagnosticHandler handler(sm, &ctx);
    auto module = mlir::parseSourceFile<mlir::ModuleOp>(impl_->input, sm, &ctx);
    if (!module) throw UserError{"cannot parse '" + impl_->input + "'"};
    impl_->name = fs::path(impl_->input).stem().string();
    return impl_->compile(ctx, *module);
  });
}

}  // namespace kiln
