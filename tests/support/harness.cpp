// harness.cpp - test support (see harness.h).
#include "harness.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "example_models.h"
#include "kilnrt/api.h"

namespace kt {

std::string workDir(const std::string &test) {
  // KILN_TEST_WORK_DIR: a separate folder for a whole-suite rerun (ctest gpu/*-e2e), so that it
  // never writes the executables the per-test ctest entries are running.
  const char *own = getenv("KILN_TEST_WORK_DIR");
  std::string d = std::string(own && *own ? own : KILN_TEST_WORK) + "/" + test;
  std::filesystem::create_directories(d);
  return d;
}

const char *gpuBundle() {
  const char *b = getenv("KILN_TEST_GPU_BUNDLE");
  return b && *b ? b : nullptr;
}

namespace {
std::map<std::string, std::string> &gpuVariants() {  // CPU executable -> its GPU build in the bundle
  static std::map<std::string, std::string> m;
  return m;
}

std::vector<std::string> words(const std::string &cmd) {
  std::stringstream ss(cmd);
  std::vector<std::string> w;
  for (std::string t; ss >> t;) w.push_back(t);
  return w;
}

// A model compiled by the command line (`<model>-compile ... -o PATH`, `kilnc`) to an executable
// for the default target: no --target, --emit or --compile-to of its own, no shell syntax.
bool plainCompile(const std::vector<std::string> &tok) {
  if (tok.empty()) return false;
  std::string tool = std::filesystem::path(tok[0]).filename().string();
  if (tool != "kilnc" && (tool.size() < 8 || tool.substr(tool.size() - 8) != "-compile")) return false;
  bool out = false;
  for (size_t i = 0; i < tok.size(); ++i) {
    if (tok[i].rfind("--target", 0) == 0 || tok[i].rfind("--emit", 0) == 0 || tok[i].rfind("--compile-to", 0) == 0 ||
        tok[i].find_first_of("|&;<>") != std::string::npos)
      return false;
    out |= tok[i] == "-o" && i + 1 < tok.size();
  }
  return out;
}

// KILN_TEST_GPU=opencl[,device]: the driver flags of that GPU target.
std::string gpuTargetFlags() {
  const char *gpu = getenv("KILN_TEST_GPU");
  if (!gpu || !*gpu) return "";
  std::string g = gpu;
  return " --target=" + g.substr(0, g.find(',')) + (g.find(",device") != std::string::npos ? " --gpu-buffers=device" : "");
}

// The recorded cases' outputs (tests/gpu/run.sh prepare), by content: what noteReference finds.
struct CaseOutput {
  std::filesystem::path dir;  // the case
  std::string file;           // NAME.npy
  bool is_int;
};
std::map<uint64_t, std::vector<CaseOutput>> &caseOutputs() {  // several cases may share an output
  static std::map<uint64_t, std::vector<CaseOutput>> m;
  return m;
}
// A kilnrt tensor as a reference tensor: f32 as is, i32 (ids, step counts) as floats, exact below 2^24.
ref::T fromTensor(const kilnrt_tensor &t) {
  ref::T r(std::vector<int64_t>(t.shape, t.shape + t.rank));
  if (t.dtype == KILN_I32)
    for (int64_t i = 0; i < r.numel(); ++i) r.v[i] = (float)((const int32_t *)t.data)[i];
  else
    std::copy((const float *)t.data, (const float *)t.data + r.numel(), r.v.begin());
  return r;
}
uint64_t contentHash(const ref::T &t) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ULL;
  };
  for (int64_t d : t.shape) mix(&d, sizeof d);
  mix(t.v.data(), t.v.size() * sizeof(float));
  return h;
}

// Records a successful run of a bundled model as a case the GPU machine reruns (see harness.h).
// Only plain commands are recorded: the executable, flags, and the files of --weights, --input
// and --output-dir (--save-weights is dropped; random weights are regenerated from the seed).
void recordGpuCase(const std::string &cmd) {
  namespace fs = std::filesystem;
  std::vector<std::string> tok = words(cmd);
  if (tok.empty() || !gpuVariants().count(tok[0])) return;
  static int cases = 0;
  char id[16];
  snprintf(id, sizeof id, "%04d", cases);
  fs::path dir = fs::path(gpuBundle()) / "cases" / id;
  fs::remove_all(dir);
  fs::create_directories(dir / "want");
  std::string args, outDir;
  for (size_t i = 1; i < tok.size(); ++i) {
    const std::string &t = tok[i];
    bool hasValue = i + 1 < tok.size();
    if (t == "--save-weights" && hasValue) {
      ++i;
    } else if (t == "--output-dir" && hasValue) {
      outDir = tok[++i];
    } else if (t == "--weights" && hasValue) {
      fs::copy_file(tok[++i], dir / "w.safetensors");
      args += " --weights w.safetensors";
    } else if (t == "--input" && hasValue && tok[i + 1].find('=') != std::string::npos) {
      std::string v = tok[++i], name = v.substr(0, v.find('='));
      fs::copy_file(v.substr(v.find('=') + 1), dir / (name + ".npy"));
      args += " --input " + name + "=" + name + ".npy";
    } else if (t.find_first_of("/|&;<>'\"$`") != std::string::npos) {
      fs::remove_all(dir);  // a path or shell syntax this recorder does not know: not a case
      return;
    } else {
      args += " " + t;
    }
  }
  if (outDir.empty()) {
    fs::remove_all(dir);
    return;
  }
  int outputs = 0;
  for (auto &e : fs::directory_iterator(outDir))
    if (e.path().extension() == ".npy") {
      fs::copy_file(e.path(), dir / "want" / e.path().filename());
      ++outputs;
      bool is_int = false;
      ref::T out = loadNpy(e.path().string(), &is_int);
      caseOutputs()[contentHash(out)].push_back({dir, e.path().filename().string(), is_int});
    }
  if (outputs == 0) {
    fs::remove_all(dir);
    return;
  }
  std::ofstream(dir / "model") << fs::relative(gpuVariants()[tok[0]], dir).string() << "\n";
  std::ofstream(dir / "args") << args.substr(args.empty() ? 0 : 1) << "\n";
  ++cases;
}
// A model compiled by the command line (`<model>-compile ... -o PATH`, `kilnc`) rather than
// kt::compile, e.g. the PyTorch fixtures' models: the same command again for the GPU bundle.
void bundleCompile(const std::string &cmd) {
  std::vector<std::string> tok = words(cmd);
  if (!plainCompile(tok) || getenv("KILN_TEST_GPU")) return;
  std::string out, gcmd;
  for (size_t i = 0; i < tok.size(); ++i) {
    if (tok[i] == "-o" && i + 1 < tok.size()) {
      out = tok[++i];
      continue;
    }
    gcmd += tok[i] + " ";
  }
  static int models = 0;
  const char *api = getenv("KILN_TEST_GPU_BUNDLE_API");
  std::string gpuOut = std::string(gpuBundle()) + "/models/cli" + std::to_string(models++) + "-" +
                       std::filesystem::path(out).filename().string();
  std::filesystem::create_directories(std::string(gpuBundle()) + "/models");
  auto g = run(gcmd + "--target=" + (api && *api ? api : "cuda") + " --gpu-buffers=device -o " + gpuOut);
  EXPECT_EQ(g.code, 0) << "compiling " << out << " for the GPU bundle:\n" << g.output;
  if (g.code == 0) registerGpuVariant(out, gpuOut);
}

}  // namespace

void registerGpuVariant(const std::string &exe, const std::string &gpuExe) { gpuVariants()[exe] = gpuExe; }

void noteReference(const ref::T &kilnOutput, const ref::T &reference) {
  if (!gpuBundle()) return;
  uint64_t out = contentHash(kilnOutput), want = contentHash(reference);
  auto it = caseOutputs().find(out);
  // A reference that is itself another recorded kiln output (two kiln builds compared) is not
  // one; a reference equal to the output (exact ids, attention over one key) is.
  if (it == caseOutputs().end() || (want != out && caseOutputs().count(want)) || reference.shape != kilnOutput.shape)
    return;
  for (const CaseOutput &c : it->second) {
    std::filesystem::create_directories(c.dir / "ref");
    std::filesystem::path path = c.dir / "ref" / c.file;
    if (std::filesystem::exists(path)) continue;
    if (c.is_int) {  // token ids and step counts: written as the kiln output's i32
      std::vector<int32_t> ids(reference.v.begin(), reference.v.end());
      kilnrt_tensor t{KILN_I32, (int32_t)reference.shape.size(), {}, ids.data()};
      for (size_t d = 0; d < reference.shape.size(); ++d) t.shape[d] = reference.shape[d];
      EXPECT_EQ(kilnrt_npy_write(path.c_str(), &t), KILNRT_OK) << kilnrt_last_error();
    } else {
      saveNpy(path.string(), reference);
    }
  }
}

std::string example(const std::string &name) {
  std::string built = std::string(KILN_BIN) + "/" + name;
  if (gpuTargetFlags().empty()) return built;
  static std::map<std::string, std::string> compiled;
  if (compiled.count(name)) return compiled[name];
  auto args = kExampleModels.find(name);
  if (args == kExampleModels.end()) {
    ADD_FAILURE() << "no example model '" << name << "'";
    return built;
  }
  std::string out = workDir("gpu-examples") + "/" + name;
  auto r = run(built + "-compile " + args->second + " --quiet --cache-dir " + KILN_TEST_CACHE + " -o " + out);
  EXPECT_EQ(r.code, 0) << "compiling example " << name << " for the GPU target:\n" << r.output;
  return compiled[name] = out;
}

RunResult run(const std::string &cmdIn) {
  std::string cmd = cmdIn;
  if (!gpuTargetFlags().empty() && plainCompile(words(cmd))) cmd += gpuTargetFlags();
  RunResult r{0, ""};
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  if (r.code == 0 && gpuBundle()) {
    recordGpuCase(cmd);
    bundleCompile(cmd);
  }
  return r;
}

ref::T runModel(const std::string &dir, const std::string &exe, const std::string &inputArgs, const std::string &name,
                std::map<std::string, ref::T> &weights, int seed) {
  std::string wpath = dir + "/weights.safetensors", odir = dir + "/out";
  std::string cmd = exe + " --random-weights --seed " + std::to_string(seed) + " --save-weights " + wpath + " " + inputArgs +
                    " --output-dir " + odir;
  fprintf(stderr, "[ run      ] %s\n", cmd.c_str());
  auto r = run(cmd);
  EXPECT_EQ(r.code, 0) << r.output;
  weights = loadWeights(wpath);
  return loadNpy(odir + "/" + name + ".npy");
}

std::string readFile(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::map<std::string, ref::T> loadWeights(const std::string &path) {
  std::map<std::string, ref::T> out;
  kilnrt_weights *w;
  if (kilnrt_weights_open(path.c_str(), &w) != KILNRT_OK) {
    ADD_FAILURE() << kilnrt_last_error();
    return out;
  }
  for (int i = 0; i < kilnrt_weights_count(w); ++i) {
    const char *name;
    kilnrt_tensor t;
    kilnrt_weights_get(w, i, &name, &t);
    if (t.dtype == KILN_BF16) {  // a weight kept in bfloat16 (--precision bf16): widened, exactly
      ref::T r;
      r.shape.assign(t.shape, t.shape + t.rank);
      r.v.resize(kilnrt_tensor_numel(&t));
      for (size_t k = 0; k < r.v.size(); ++k) {
        uint32_t bits = (uint32_t)((const uint16_t *)t.data)[k] << 16;
        memcpy(&r.v[k], &bits, 4);
      }
      out[name] = r;
      continue;
    }
    if (t.dtype != KILN_F32) continue;  // mask buffers and other non-weights
    out[name] = fromTensor(t);
  }
  kilnrt_weights_close(w);
  return out;
}

void saveWeights(const std::string &path, const std::map<std::string, ref::T> &weights) {
  std::vector<const char *> names;
  std::vector<kilnrt_tensor> ts;
  for (auto &[name, t] : weights) {
    names.push_back(name.c_str());
    kilnrt_tensor k{KILN_F32, (int32_t)t.shape.size(), {}, const_cast<float *>(t.v.data())};
    for (size_t d = 0; d < t.shape.size(); ++d) k.shape[d] = t.shape[d];
    ts.push_back(k);
  }
  if (kilnrt_weights_save(path.c_str(), (int32_t)names.size(), names.data(), ts.data()) != KILNRT_OK)
    ADD_FAILURE() << kilnrt_last_error();
}

ref::T loadNpy(const std::string &path, bool *is_int) {
  kilnrt_tensor t;
  if (kilnrt_npy_read(path.c_str(), &t) != KILNRT_OK) {
    ADD_FAILURE() << kilnrt_last_error();
    return {};
  }
  if (is_int) *is_int = t.dtype == KILN_I32;
  ref::T r = fromTensor(t);
  kilnrt_tensor_free(&t);
  return r;
}

void saveNpy(const std::string &path, const ref::T &r) {
  kilnrt_tensor t{};
  t.dtype = KILN_F32;
  t.rank = (int32_t)r.shape.size();
  for (int i = 0; i < t.rank; ++i) t.shape[i] = r.shape[i];
  t.data = const_cast<float *>(r.v.data());  // written from, never to
  ASSERT_EQ(kilnrt_npy_write(path.c_str(), &t), KILNRT_OK) << kilnrt_last_error();
}

void saveIds(const std::string &path, const std::vector<int32_t> &ids, bool as_int64) {
  std::string h = std::string("{'descr': '") + (as_int64 ? "<i8" : "<i4") + "', 'fortran_order': False, 'shape': (" +
                  std::to_string(ids.size()) + ",), }";
  while ((10 + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  FILE *f = fopen(path.c_str(), "wb");
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  uint16_t hl = (uint16_t)h.size();
  fwrite(&hl, 2, 1, f);
  fwrite(h.data(), 1, h.size(), f);
  for (int32_t id : ids) {
    if (as_int64) {
      int64_t v = id;
      fwrite(&v, 8, 1, f);
    } else {
      fwrite(&id, 4, 1, f);
    }
  }
  fclose(f);
}

std::string idList(const std::vector<int32_t> &ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::vector<int32_t> randomIds(int n, int vocab, unsigned seed) {
  std::mt19937 g(seed);
  std::vector<int32_t> ids(n);
  for (auto &i : ids) i = (int32_t)(g() % vocab);
  return ids;
}

ref::T randomT(std::vector<int64_t> shape, unsigned seed, float scale) {
  ref::T t(std::move(shape));
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (float &f : t.v) f = u(g);
  return t;
}

// Written simply: keep the top 16 bits after adding half an ulp of bfloat16 (ties to the even one).
float roundBf16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}
ref::T roundedBf16(ref::T t) {
  for (float &v : t.v) v = roundBf16(v);
  return t;
}

::testing::AssertionResult allClose(const ref::T &r, const ref::T &got) {
  if (r.shape != got.shape) {
    std::ostringstream os;
    os << "shapes differ: reference [";
    for (auto d : r.shape) os << d << " ";
    os << "] vs kiln [";
    for (auto d : got.shape) os << d << " ";
    return ::testing::AssertionFailure() << os.str() << "]";
  }
  double maxabs = 0;
  for (float f : r.v) maxabs = std::max(maxabs, (double)std::fabs(f));
  double worst = 0;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < r.v.size(); ++i) {
    double err = std::fabs((double)got.v[i] - r.v[i]);
    double tol = 1e-4 * std::fabs(r.v[i]) + 1e-4 * maxabs;
    if (!(err <= tol)) {  // also catches NaN
      if (!bad) first = i;
      ++bad;
    }
    worst = std::max(worst, err / (maxabs > 0 ? maxabs : 1));
  }
  if (bad)
    return ::testing::AssertionFailure() << bad << " of " << r.v.size() << " elements differ; first at " << first
                                         << ": reference " << r.v[first] << ", kiln " << got.v[first]
                                         << " (max |ref| " << maxabs << ")";
  noteReference(got, r);  // a match: the GPU bundle's case carries the reference (EXPECT_FALSE's do not)
  return ::testing::AssertionSuccess() << "max error " << worst << " of max|ref|";
}

}  // namespace kt
