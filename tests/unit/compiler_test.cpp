// Compiler unit tests: kernel specs, DSL -> MLIR emission with user locations, the driver's
// errors and artefacts, and the kernel cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "harness.h"
#include "kiln/Codegen/KernelCache.h"
#include "kiln/Dialect/KernelSpec.h"
#include "kiln/Driver/Driver.h"
#include "kiln/Frontend/DslEmitter.h"
#include "kiln/Pipeline/Phases.h"
#include "kiln/Support/SparsePattern.h"
#include "kiln/dsl/Blocks.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

using namespace kiln;
using ::testing::HasSubstr;

namespace {
// The first op named `name` in a parsed module (not verified: a test may hand codegen what no
// pass would write).
struct Parsed {
  mlir::DialectRegistry registry;
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  explicit Parsed(const std::string &src) {
    registerKilnDialects(registry);
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    module = mlir::parseSourceString<mlir::ModuleOp>(src, mlir::ParserConfig(ctx.get(), /*verifyAfterParse=*/false));
  }
  mlir::Operation *first(llvm::StringRef name) {
    mlir::Operation *found = nullptr;
    module->walk([&](mlir::Operation *op) {
      if (!found && op->getName().getStringRef() == name) found = op;
    });
    return found;
  }
};
}  // namespace

// The spec of an op comes from its hooks and its typed schedule; its text (the cache key) keeps
// the format and key names of the text the kernel generator used to parse back.
TEST(KernelSpec, TextFromTheOpAndNamesAreStable) {
  Parsed p(R"(func.func @f(%x: tensor<?x128xf32>, %w: tensor<128x512xf32>, %b: tensor<512xf32>) -> tensor<?x512xf32> {
    %y = kiln.linear %x, %w, %b {weight_layout = #kiln.weight_layout<in_out>, activation = #kiln.activation<gelu_tanh>,
                                 kiln.schedule = #kiln.schedule<tile_m = 4, pack = per_task>}
        : (tensor<?x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
    %z = kiln.linear %x, %w, %b {weight_layout = #kiln.weight_layout<in_out>, kiln.schedule = #kiln.schedule<tile_m = 4, pack = per_task>}
        : (tensor<?x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<?x512xf32>
    return %y : tensor<?x512xf32>
  })");
  ASSERT_TRUE(p.module);
  mlir::Operation *lin = p.first("kiln.linear");
  ASSERT_TRUE(lin);
  KernelSpec k = KernelSpec::of(lin);
  EXPECT_EQ(k.text(), "linear;act=gelu_tanh;layout=in_out;s.pack=per_task;s.tile_m=4|?x128:f32,128x512:f32,512:f32->?x512:f32");
  EXPECT_EQ(k.family, KernelFamily::Gemm);
  EXPECT_EQ(k.inputs.size(), 3u);
  EXPECT_EQ(k.inputs[0].dims[0], -1);
  EXPECT_EQ(k.schedule.tile_m, 4);
  EXPECT_FALSE(k.schedule.tile_n);  // undecided: the generator refuses to guess it
  EXPECT_EQ(k.name("x86-64-avx2"), KernelSpec::of(lin).name("x86-64-avx2"));
  EXPECT_NE(k.name("x86-64-avx2"), k.name("x86-64-avx512"));  // the target is part of the key
  mlir::Operation *other = lin->getNextNode();
  EXPECT_NE(KernelSpec::of(other).name("x86-64-avx2"), k.name("x86-64-avx2"));  // another activation
}

TEST(Emit, OpsCarryTheUsersLine) {
  Model m("loc");
  Dim L = m.seq("L", 8);
  Tensor x = m.input("x", {L, 4});
  int line = __LINE__ + 1;
  Tensor y = relu(x);
  m.output("y", y);
  mlir::DialectRegistry reg;
  registerKilnDialects(reg);
  mlir::MLIRContext ctx(reg);
  auto module = emitModel(ctx, m);
  std::string s;
  llvm::raw_string_ostream os(s);
  module->print(os, mlir::OpPrintingFlags().enableDebugInfo());
  EXPECT_THAT(s, HasSubstr("compiler_test.cpp\":" + std::to_string(line)));
  EXPECT_THAT(s, HasSubstr("kiln.seq_bounds = array<i64: 8>"));
  EXPECT_THAT(s, HasSubstr("kiln.relu"));
}

namespace {
std::string gpt2Compile() { return std::string(KILN_BIN) + "/gpt2-compile"; }
// A one-layer GPT-2's compile command (add flags), with the tests' kernel cache.
std::string smallGpt2Compile() {
  return gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet --cache-dir " + KILN_TEST_CACHE;
}
}  // namespace

TEST(Driver, ModelErrorsExitOneAtTheUsersLine) {
  std::string dir = kt::workDir("driver");
  std::vector<std::string> args{"bad", "-o", dir + "/bad", "--quiet"};
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  kiln::Driver d("bad", "bad model");
  testing::internal::CaptureStderr();
  int line = 0;
  int rc = d.run((int)argv.size(), argv.data(), [&](Model &m) {
    Tensor x = m.input("x", {m.seq("L", 4), 8});
    line = __LINE__ + 1;
    m.output("y", linear(x, m.param("w", {8, 9})));
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(err, HasSubstr("compiler_test.cpp:" + std::to_string(line) + ": error: linear:"));
}

TEST(Driver, BadFlagsAreUserErrors) {
  auto r = kt::run(gpt2Compile() + " --target riscv -o /dev/null --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("unknown --target 'riscv'"));
  r = kt::run(gpt2Compile() + " --emit=banana");
  EXPECT_EQ(r.code, 1);
  r = kt::run(gpt2Compile() + " --heads 5 --d-model 128 -o /dev/null --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--d-model (128) must be a positive multiple of --heads (5)"));
  r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("-o PATH is required"));
}

TEST(Driver, EmitsEveryPhaseAndArtefact) {
  std::string small = smallGpt2Compile();
  auto r = kt::run(small + " --compile-to=input");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("kiln.attention"));
  EXPECT_THAT(r.output, HasSubstr("kiln.gelu"));
  r = kt::run(small + " --compile-to=fused");
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("kiln.gelu")));  // folded into the linear
  EXPECT_THAT(r.output, HasSubstr("activation = #kiln.activation<gelu_tanh>"));
  r = kt::run(small + " --emit=schedule");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("tile_m = "));
  r = kt::run(small + " --emit=cost");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("at L = 32, C = 32 (the bound)"));  // C: extend's chunk
  EXPECT_THAT(r.output, HasSubstr("at L = 16"));
  EXPECT_THAT(r.output, HasSubstr("at L = 8"));
  EXPECT_THAT(r.output, HasSubstr("peak memory"));
  r = kt::run(small + " --emit=llvm");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("define i32 @kiln_model_entry_forward"));
  r = kt::run(small + " --emit=halide-stmt");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("halide_do_par_for"));
  std::string dir = kt::workDir("emit");
  r = kt::run(small + " --emit=lib -o " + dir + "/libm.a");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/libm.a"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/libm.h"));
  r = kt::run(small + " -o " + dir + "/m --dump-dir " + dir + "/dump");
  EXPECT_EQ(r.code, 0) << r.output;
  int mlir = 0, sched = 0, stmt = 0;
  for (auto &e : std::filesystem::directory_iterator(dir + "/dump")) {
    std::string n = e.path().filename().string();
    mlir += n.ends_with(".mlir");
    sched += n.ends_with(".schedule.txt");
    stmt += n.ends_with(".stmt");
  }
  EXPECT_EQ(mlir, 22);  // input, 20 passes up to the buffer plan, the LLVM lowering
  EXPECT_GT(sched, 5);
  EXPECT_EQ(sched, stmt);
  EXPECT_TRUE(std::filesystem::exists(dir + "/dump/00-input.mlir"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dump/17-kiln-fold-views.mlir"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dump/21-kiln-lower-to-llvm.mlir"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/dump/cost.txt"));
  // The executable depends on system libraries only.
  r = kt::run("ldd " + dir + "/m");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("MLIR")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("LLVM")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("Halide")));
}

TEST(Driver, KernelsAreGeneratedOnceAndCached) {
  std::string dir = kt::workDir("cache");
  std::filesystem::remove_all(dir + "/c");
  std::string base = gpt2Compile() + " --d-model 64 --heads 4 --vocab 64 --ctx 32 --cache-dir " + dir + "/c";
  auto one = kt::run(base + " --layers 1 -o " + dir + "/one");
  ASSERT_EQ(one.code, 0) << one.output;
  auto four = kt::run(base + " --layers 4 -o " + dir + "/four");
  ASSERT_EQ(four.code, 0) << four.output;
  // Four layers need exactly the kernels one layer needed: all of them come from the cache
  // (the first compile's generated by worker processes on a machine of two cores or more).
  auto kernels = [](const std::string &out) {
    auto p = out.find("phase kernels: ");
    return p == std::string::npos ? std::string() : out.substr(p, out.find('\n', p) - p);
  };
  EXPECT_THAT(kernels(one.output), HasSubstr("(0 from the cache, "));
  std::string k1 = kernels(one.output);
  int n = std::stoi(k1.substr(std::string("phase kernels: ").size()));
  EXPECT_THAT(kernels(four.output),
              HasSubstr(std::to_string(n) + " kernels (" + std::to_string(n) + " from the cache, 0 generated in parallel)"));
}

TEST(Codegen, HalideErrorsBecomeMessagesNotCrashes) {
  // An op no pass would write (a transpose whose permutation repeats a dim; the verifier would
  // reject it): Halide rejects the algorithm by throwing, and the generator reports it. A kernel
  // whose schedule lacks a decision is refused, naming it; an op that is not a kernel too, and
  // an attention whose blocks an edited dump made empty.
  Parsed p(R"(func.func @f(%x: tensor<?x4xf32>, %q: tensor<2x?x4xf32>) -> tensor<?x4xf32> {
    %t = kiln.transpose %x {permutation = array<i64: 0, 0>, kiln.schedule = #kiln.schedule<vec = 8, parallel = 1, rows_per_task = 4>}
        : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %r = kiln.relu %t {kiln.schedule = #kiln.schedule<vec = 4>} : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %w = kiln.param "w" : tensor<4xf32>
    %a = kiln.attention %q, %q, %q {mask = #kiln.mask<causal>, scale = 1.0 : f32,
        kiln.schedule = #kiln.schedule<vec = 4, parallel = 1, engine = online_block, q_block = 64, k_block = 0>}
        : (tensor<2x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32>) -> tensor<2x?x4xf32>
    return %r : tensor<?x4xf32>
  })");
  ASSERT_TRUE(p.module);
  TargetInfo avx2 = *resolveTarget("x86-64-avx2");
  KernelArtifacts art;
  std::string err;
  std::string dir = kt::workDir("codegen_error");
  EXPECT_FALSE(buildKernel("kiln_bad", KernelSpec::of(p.first("kiln.transpose")), avx2, dir, &art, &err));
  EXPECT_THAT(err, HasSubstr("kiln_bad"));
  EXPECT_FALSE(buildKernel("kiln_unscheduled", KernelSpec::of(p.first("kiln.relu")), avx2, dir, &art, &err));
  EXPECT_THAT(err, HasSubstr("its kiln.schedule has no rows_per_task (the pass that decides it did not run)"));
  EXPECT_FALSE(buildKernel("kiln_param", KernelSpec::of(p.first("kiln.param")), avx2, dir, &art, &err));
  EXPECT_THAT(err, HasSubstr("no Halide kernel for op kind 'param'"));
  EXPECT_FALSE(buildKernel("kiln_zero_block", KernelSpec::of(p.first("kiln.attention")), avx2, dir, &art, &err));
  EXPECT_THAT(err, HasSubstr("q_block 64 and k_block 0 must be positive"));
}

// --target=cuda: each kernel's PTX out of its object (--emit=ptx), and the executable's clear
// error on a machine without a CUDA driver (these machines have none; skipped where one exists).
TEST(Driver, CudaTargetEmitsPtxAndFailsCleanlyWithoutADriver) {
  std::string dir = kt::workDir("cuda");
  std::string small = smallGpt2Compile();
  auto r = kt::run(small + " --emit=ptx -o " + dir + "/ptx");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--emit=ptx needs --target=cuda"));
  r = kt::run(small + " --gpu-buffers=device -o " + dir + "/m");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--gpu-buffers=device needs --target=cuda or opencl"));
  r = kt::run(small + " --target=cuda --emit=ptx -o " + dir + "/ptx");
  ASSERT_EQ(r.code, 0) << r.output;
  int n = 0;
  for (auto &e : std::filesystem::directory_iterator(dir + "/ptx")) {
    std::ifstream f(e.path());
    std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_THAT(text, HasSubstr(".target sm_80")) << e.path();
    EXPECT_THAT(text, HasSubstr(".entry")) << e.path();
    ++n;
  }
  EXPECT_GT(n, 10);
  r = kt::run(small + " --target=cuda -o " + dir + "/m");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run(dir + "/m --version");
  EXPECT_THAT(r.output, HasSubstr("-cuda"));
  if (kt::run("ldconfig -p | grep -q 'libcuda\\.so\\.1'").code == 0) GTEST_SKIP() << "a CUDA driver is installed here";
  r = kt::run(dir + "/m --random-weights --tokens 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no CUDA driver or device"));
  r = kt::run(small + " --target=cuda --gpu-buffers=device -o " + dir + "/md");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(kt::run(dir + "/md --version").output, HasSubstr("-cuda (buffers on the device)"));
  r = kt::run(dir + "/md --random-weights --tokens 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no CUDA driver or device"));
}

TEST(Driver, OpenclTargetRunsTheGpuSchedulesOrFailsCleanlyWithoutADevice) {
  std::string dir = kt::workDir("opencl");
  std::string small = smallGpt2Compile();
  auto r = kt::run(small + " --target=opencl --emit=ptx -o " + dir + "/ptx");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--emit=ptx needs --target=cuda"));
  r = kt::run(small + " --target=opencl --gpu-buffers=device --dump-dir " + dir + "/dump -o " + dir + "/m");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(kt::run(dir + "/m --version").output, HasSubstr("-opencl (buffers on the device)"));
  // The schedules are the GPU ones: one block per row, GEMM tiles across threads.
  // The FFN runs over GPU-sized chunks of rows (1024 by default) in a host loop.
  bool gpuSchedule = false, gpuChunks = false, staged = false;
  for (auto &e : std::filesystem::directory_iterator(dir + "/dump")) {
    if (e.path().extension() != ".txt") continue;
    std::ifstream f(e.path());
    std::string text((std::istreambuf_iterator<char>(f)), {});
    // The schedule files list the Halide calls applied, as they were made.
    if (e.path().string().find("kiln_linear_") != std::string::npos) {
      gpuSchedule |= text.find("out.gpu_blocks(jo, io)") != std::string::npos;
      staged |= text.find("Ar.store_in(GPUShared)") != std::string::npos;  // the forward's GEMMs (decode's are not)
    }
    if (e.path().string().find("kiln_ffn_") != std::string::npos)
      gpuChunks |= text.find("out.split(i, ic, ir, ") != std::string::npos && text.find("1024") != std::string::npos &&
                   text.find("h.compute_at(out, ic)") != std::string::npos;
  }
  EXPECT_TRUE(gpuSchedule) << "no linear kernel has a GPU schedule";
  EXPECT_TRUE(staged) << "no linear kernel stages its operands in shared memory";
  EXPECT_TRUE(gpuChunks) << "no FFN kernel runs over GPU-sized chunks";
  // No OpenCL platform (the ICD loader finds no vendor): a clear user error, exit 1.
  r = kt::run("OCL_ICD_VENDORS=/nonexistent " + dir + "/m --random-weights --tokens 1,2");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("no OpenCL platform or device"));
}

TEST(Driver, PrintIrAfterAllShowsEveryPass) {
  auto r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet --emit=cost "
                                   "--print-ir-after-all -o /dev/null");
  EXPECT_EQ(r.code, 0);
  for (const char *p : {"input", "kiln-fuse-attention", "kiln-lower-lsh-attention", "kiln-lower-act", "kiln-fuse-epilogue", "kiln-chunk-ffn", "kiln-prepack-weights", "kiln-tile-sparse-pattern", "kiln-tile-ops", "kiln-assign-schedule", "kiln-outline-kernels",
                        "kiln-plan-buffers"})
    EXPECT_THAT(r.output, HasSubstr(std::string("IR Dump After ") + p));
}

TEST(Driver, PathsWithSpacesAndQuotes) {
  std::string dir = kt::workDir("odd paths") + "/it's here";
  std::filesystem::create_directories(dir);
  auto r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 32 --quiet --cache-dir " +
                   KILN_TEST_CACHE + " -o \"" + dir + "/m\"");
  ASSERT_EQ(r.code, 0) << r.output;
  r = kt::run("\"" + dir + "/m\" --random-weights --tokens 1,2");
  EXPECT_EQ(r.code, 0) << r.output;
}

TEST(Driver, MemoryLimitNamesTheLargestBuffers) {
  auto r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 4096 --quiet --max-memory 1M "
                                   "--emit=cost -o /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("more than the memory limit of 1 MB (--max-memory)"));
  EXPECT_THAT(r.output, HasSubstr("largest buffers: linear at gpt2.cpp:"));
  r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 4096 --quiet --max-memory lots "
                              "--emit=cost -o /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.output, HasSubstr("--max-memory expects bytes"));
  r = kt::run(gpt2Compile() + " --layers 1 --d-model 64 --heads 4 --vocab 64 --ctx 4096 --quiet --max-memory 1G "
                              "--emit=cost -o /dev/null");
  EXPECT_EQ(r.code, 0) << r.output;
}

// The block schedules compute work proportional to the pairs each pattern allows (up to block
// rounding), not to the blocks the pattern touches in sequence order; the allowed counts are
// checked against brute force. (The strided global part fills whole blocks once each residue
// class has at least a block of positions, L >= stride x block: 4096 here.)
TEST(SparsePattern, WorkFollowsTheAllowedPairs) {
  using kiln::sparse::Pattern;
  using kiln::sparse::Half;
  using kiln::sparse::Kind;
  auto brute = [](const Pattern &p, int64_t L) {
    double n = 0;
    int64_t s = p.size, t = p.summary;
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        bool local = p.kind == Kind::Strided ? i - j < s : j / s == i / s;
        bool global = p.kind == Kind::Strided ? (i - j) % s == 0 : j % s >= s - t;
        n += p.part == Half::Local ? local : p.part == Half::Global ? global : (local || global);
      }
    return n;
  };
  for (Half part : {Half::Local, Half::Global, Half::Union}) {
    Pattern st{.kind = Kind::Strided, .part = part, .size = 64, .block = 64};
    Pattern fx{.kind = Kind::Fixed, .part = part, .size = 64, .summary = 8, .block = 64};
    for (int64_t L : {4096, 6000}) {
      SCOPED_TRACE(std::to_string((int)part) + " L = " + std::to_string(L));
      kiln::sparse::Work ws = kiln::sparse::countWork(st, L), wf = kiln::sparse::countWork(fx, L);
      EXPECT_EQ(ws.allowed, brute(st, L));
      EXPECT_EQ(wf.allowed, brute(fx, L));
      // Within a small factor of the allowed pairs: the diagonal blocks are half empty, and a
      // residue class whose positions straddle a block boundary costs an extra block.
      EXPECT_LE(ws.visited, 4.0 * ws.allowed + 2.0 * 64 * 64);
      EXPECT_LE(wf.visited, 3.0 * wf.allowed + 2.0 * 64 * 64);
      EXPECT_GE(ws.visited, ws.allowed);
    }
  }
  // In sequence order the strided global part touches every lower-triangular block; the
  // stride transpose visits about L/s of them per residue class.
  Pattern g{.kind = Kind::Strided, .part = Half::Global, .size = 64, .block = 64};
  EXPECT_LT(kiln::sparse::countWork(g, 4096).visited, 0.05 * 4096.0 * 4096.0 / 2);
}
