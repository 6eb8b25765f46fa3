// Runtime unit tests: the kilnrt C API on hand-made model tables and files (no compiler).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>
#include <vector>

#include "harness.h"
#include "kilnrt/api.h"
#include "toy_model.h"

using ::testing::HasSubstr;

namespace {

std::string dir() { return kt::workDir("runtime"); }

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
}

// A safetensors file from a header and raw data, with the header length as given.
std::string safetensors(const std::string &header, const std::string &data, int64_t claimed = -1) {
  uint64_t n = claimed >= 0 ? (uint64_t)claimed : header.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = (char)(n >> (8 * i));
  return s + header + data;
}

using namespace toy;

// The same model with checkpoint conventions: files may omit "model." and carry "*.mask" buffers.
const kiln_tensor_info kParamsP[] = {{"model.w", KILN_F32, 1, {{4, -1}}, 0, KILN_INIT_ONES, 0}};
const char *const kIgnored[] = {"*.mask"};
const kiln_model_info kModelP = {KILN_ABI_VERSION, "toyp", "0", "h", "t", "", 1, kSyms, kMax, 1, kParamsP, 2, kIo, 1,
                                 kEntries, "model.", 1, kIgnored};

// The same model with a state "acc" [4]: each run adds acc[0] to the output, then increments it.
int32_t entryS(void **bufs, const int64_t *syms, int32_t *) {
  const float *w = (const float *)bufs[0];
  const int32_t *ids = (const int32_t *)bufs[1];
  float *out = (float *)bufs[2], *acc = (float *)bufs[3];
  for (int64_t i = 0; i < syms[0]; ++i) out[i] = ids[i] + w[0] + acc[0];
  acc[0] += 1;
  return 0;
}
const kiln_entry_info kEntriesS[] = {{"forward", entryS, 1, 1, kIn, kOut, 1, kBufs, 1, kKernels}};
const kiln_tensor_info kStates[] = {{"acc", KILN_F32, 1, {{4, -1}}, 0, 0, 0}};
const kiln_model_info kModelS = {KILN_ABI_VERSION, "toys", "0", "h", "t", "", 1, kSyms, kMax, 1, kParams, 2, kIo, 1,
                                 kEntriesS, "", 0, nullptr, 1, kStates};

kilnrt_tensor ids(std::vector<int32_t> &v) {
  kilnrt_tensor t{};
  t.dtype = KILN_I32;
  t.rank = 1;
  t.shape[0] = (int64_t)v.size();
  t.data = v.data();
  return t;
}

TEST(Arena, LiveBuffersNeverOverlapAndDeadOnesAreReused) {
  // a: kernels 0-1, b: 1-2, c: 2-3 (a and c can share), sizes 100*L, 200*L, 100*L bytes.
  kiln_buffer_info b[] = {{100, {1, 0, 0, 0}, 0, 1}, {200, {1, 0, 0, 0}, 1, 2}, {100, {1, 0, 0, 0}, 2, 3}};
  int64_t syms[4] = {8, 1, 1, 1}, off[3], total;
  ASSERT_EQ(kilnrt_arena_plan(b, 3, syms, off, &total), KILNRT_OK);
  EXPECT_EQ(total, 1664 + 896);  // b, then a and c (128-byte rounded) sharing one place
  auto overlap = [&](int i, int j, int64_t si, int64_t sj) { return off[i] < off[j] + sj && off[j] < off[i] + si; };
  EXPECT_FALSE(overlap(0, 1, 896, 1664));
  EXPECT_FALSE(overlap(1, 2, 1664, 896));
  for (int64_t o : off) EXPECT_EQ(o % 128, 0);
  EXPECT_EQ(off[0], off[2]);  // a and c are never live together: same place
  int64_t syms2[4] = {16, 1, 1, 1}, total2;
  ASSERT_EQ(kilnrt_arena_plan(b, 3, syms2, off, &total2), KILNRT_OK);
  EXPECT_GT(total2, total);  // grows with the length
  kiln_buffer_info huge[] = {{1 << 20, {2, 0, 0, 0}, 0, 0}};
  int64_t big[4] = {1 << 24, 1, 1, 1};
  EXPECT_EQ(kilnrt_arena_plan(huge, 1, big, off, &total), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("sequence length too large"));
}

TEST(Npy, RoundTripAndInt64) {
  ref::T t = kt::randomT({3, 5}, 1);
  std::string p = dir() + "/a.npy";
  kt::saveNpy(p, t);
  ref::T back = kt::loadNpy(p);
  EXPECT_EQ(back.shape, t.shape);
  EXPECT_EQ(back.v, t.v);
  kt::saveIds(dir() + "/ids.npy", {1, 2, 300}, /*as_int64=*/true);
  kilnrt_tensor r;
  ASSERT_EQ(kilnrt_npy_read((dir() + "/ids.npy").c_str(), &r), KILNRT_OK);
  EXPECT_EQ(r.dtype, KILN_I32);
  EXPECT_EQ(((int32_t *)r.data)[2], 300);
  kilnrt_tensor_free(&r);
}

// Found by fuzz_npy: a zero-element array passed a null pointer to memcpy (undefined behaviour).
TEST(Npy, ZeroElementArray) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }";
  writeFile(dir() + "/empty.npy", std::string("\x93NUMPY\x01\x00", 8) + (char)h.size() + '\0' + h);
  kilnrt_tensor r;
  ASSERT_EQ(kilnrt_npy_read((dir() + "/empty.npy").c_str(), &r), KILNRT_OK) << kilnrt_last_error();
  EXPECT_EQ(kilnrt_tensor_numel(&r), 0);
  kilnrt_tensor_free(&r);
}

// A shape whose element count overflows: four dims of 2^32 once wrapped around to 0 elements
// and were accepted with no data (review finding); every multiplication is now checked.
TEST(Npy, ShapeProductOverflowIsRejected) {
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296, 4294967296), }";
  writeFile(dir() + "/huge.npy", std::string("\x93NUMPY\x01\x00", 8) + (char)h.size() + '\0' + h);
  kilnrt_tensor r;
  EXPECT_EQ(kilnrt_npy_read((dir() + "/huge.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("has more elements than the"));
  h = "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }";  // 2^32 elements, 4 data bytes
  writeFile(dir() + "/big.npy", std::string("\x93NUMPY\x01\x00", 8) + (char)h.size() + '\0' + h + std::string(4, '\0'));
  EXPECT_EQ(kilnrt_npy_read((dir() + "/big.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("has more elements than the"));
  kilnrt_tensor t{KILN_F32, 4, {int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32, int64_t(1) << 32}, nullptr};
  EXPECT_EQ(kilnrt_tensor_numel(&t), -1);
  t.shape[3] = 0;
  EXPECT_EQ(kilnrt_tensor_numel(&t), 0);
  t.shape[2] = -1;
  EXPECT_EQ(kilnrt_tensor_numel(&t), -1);
}

TEST(Npy, BadFilesAreRejectedByName) {
  kilnrt_tensor r;
  writeFile(dir() + "/bad.npy", "hello world, not numpy");
  EXPECT_EQ(kilnrt_npy_read((dir() + "/bad.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("bad magic"));
  // truncated data
  kt::saveNpy(dir() + "/t.npy", kt::randomT({4, 4}, 2));
  std::ifstream f(dir() + "/t.npy", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  writeFile(dir() + "/t.npy", bytes.substr(0, bytes.size() - 3));
  EXPECT_EQ(kilnrt_npy_read((dir() + "/t.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("needs 64 data bytes but the file holds 61"));
  std::string h = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }";
  writeFile(dir() + "/f8.npy", std::string("\x93NUMPY\x01\x00", 8) + (char)h.size() + '\0' + h + std::string(16, '\0'));
  EXPECT_EQ(kilnrt_npy_read((dir() + "/f8.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("dtype '<f8' is not supported"));
  h = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }";
  writeFile(dir() + "/fo.npy", std::string("\x93NUMPY\x01\x00", 8) + (char)h.size() + '\0' + h + std::string(8, '\0'));
  EXPECT_EQ(kilnrt_npy_read((dir() + "/fo.npy").c_str(), &r), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("Fortran order"));
  EXPECT_EQ(kilnrt_npy_read((dir() + "/missing.npy").c_str(), &r), KILNRT_USER_ERROR);
}

TEST(Safetensors, RoundTrip) {
  float a[4] = {1, 2, 3, 4};
  int32_t b[2] = {7, 8};
  kilnrt_tensor ts[2] = {};
  ts[0] = {KILN_F32, 2, {2, 2}, a};
  ts[1] = {KILN_I32, 1, {2}, b};
  const char *names[] = {"a", "b"};
  std::string p = dir() + "/rt.safetensors";
  ASSERT_EQ(kilnrt_weights_save(p.c_str(), 2, names, ts), KILNRT_OK);
  kilnrt_weights *w;
  ASSERT_EQ(kilnrt_weights_open(p.c_str(), &w), KILNRT_OK) << kilnrt_last_error();
  kilnrt_tensor t;
  ASSERT_EQ(kilnrt_weights_find(w, "a", &t), KILNRT_OK);
  EXPECT_EQ(t.shape[1], 2);
  EXPECT_EQ(((float *)t.data)[3], 4.0f);
  ASSERT_EQ(kilnrt_weights_find(w, "b", &t), KILNRT_OK);
  EXPECT_EQ(((int32_t *)t.data)[1], 8);
  EXPECT_EQ(kilnrt_weights_find(w, "c", &t), KILNRT_USER_ERROR);
  kilnrt_weights_close(w);
}

struct BadFile {
  std::string name, bytes, message;
};
class SafetensorsErrors : public ::testing::TestWithParam<BadFile> {};
TEST_P(SafetensorsErrors, RejectedWithAClearMessage) {
  std::string p = dir() + "/" + GetParam().name + ".safetensors";
  writeFile(p, GetParam().bytes);
  kilnrt_weights *w = nullptr;
  EXPECT_EQ(kilnrt_weights_open(p.c_str(), &w), KILNRT_USER_ERROR);
  EXPECT_EQ(w, nullptr);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr(GetParam().message));
}
const std::string kOk = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
INSTANTIATE_TEST_SUITE_P(
    Files, SafetensorsErrors,
    ::testing::Values(
        BadFile{"short", "abc", "shorter than the 8-byte header length"},
        BadFile{"header_too_long", safetensors(kOk, std::string(8, '\0'), 1 << 30), "header claims 1073741824 bytes"},
        BadFile{"bad_json", safetensors("{\"w\": [1,", ""), "corrupt JSON header"},
        BadFile{"truncated_data", safetensors(kOk, std::string(4, '\0')), "lie outside the 4 data bytes"},
        BadFile{"bad_dtype", safetensors(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')),
                "dtype Q4 is not a safetensors dtype"},
        BadFile{"f16_size", safetensors(R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
                "shape [3] needs 6 bytes but data_offsets span 8"},
        BadFile{"size_mismatch", safetensors(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
                "shape [3] needs 12 bytes but data_offsets span 8"},
        BadFile{"overlap",
                safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                            std::string(12, '\0')),
                "overlap"},
        // Review findings: an overlap behind an empty tensor (sorted, b is compared with e only),
        // and a name or field given twice (the JSON parser kept only the last).
        BadFile{"overlap_behind_empty",
                safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                            std::string(12, '\0')),
                "two tensors overlap in the data section (one starts at byte 8 before another ends at byte 12)"},
        BadFile{"duplicate_name",
                safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                            std::string(16, '\0')),
                "tensor 'w' appears twice in the header"},
        BadFile{"duplicate_field",
                safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"shape":[1]}})", std::string(8, '\0')),
                "key 'shape' appears twice in one entry of the header"},
        BadFile{"negative", safetensors(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", std::string(8, '\0')),
                "non-negative"},
        BadFile{"absurd", safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, '\0')),
                "absurd shape"}),
    [](const auto &i) { return i.param.name; });

TEST(Session, RunsAToyModelAndChecksInputs) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModel, &s), KILNRT_OK);
  std::vector<int32_t> v{1, 2, 3};
  kilnrt_tensor t = ids(v);
  EXPECT_EQ(kilnrt_session_run(s, "forward"), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("no weights loaded"));
  ASSERT_EQ(kilnrt_session_random_weights(s, 1), KILNRT_OK);
  EXPECT_EQ(kilnrt_session_run(s, "forward"), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("input 'tokens' was not given"));
  ASSERT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK);
  const kilnrt_tensor *out;
  ASSERT_EQ(kilnrt_session_output(s, "out", &out), KILNRT_OK);
  EXPECT_EQ(out->shape[0], 3);
  EXPECT_EQ(((float *)out->data)[2], 4.0f);  // ids[2] + w[0] (init ones)
  std::vector<int32_t> bad{1, 10};
  t = ids(bad);
  EXPECT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("token id 10 at position 1 is outside the vocabulary [0, 10)"));
  std::vector<int32_t> longer(9, 1);
  t = ids(longer);
  EXPECT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("sequence length L = 9 exceeds the compiled bound 8"));
  std::vector<int32_t> none;
  t = ids(none);
  EXPECT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("must be at least 1"));
  t = ids(v);
  t.dtype = KILN_F32;
  EXPECT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("must be i32, got f32"));
  EXPECT_EQ(kilnrt_session_set_input(s, "nope", &t), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("no input 'nope' (inputs: tokens)"));
  EXPECT_EQ(kilnrt_session_run(s, "decode"), KILNRT_USER_ERROR);
  kilnrt_session_destroy(s);
}

// States persist across runs; kilnrt_session_state reads them and writes through its view.
TEST(Session, StatesAreReadableAndWritable) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModelS, &s), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_random_weights(s, 1), KILNRT_OK);
  std::vector<int32_t> v{1, 2};
  kilnrt_tensor t = ids(v), st;
  ASSERT_EQ(kilnrt_session_set_input(s, "tokens", &t), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_state(s, "acc", &st), KILNRT_OK);
  EXPECT_EQ(st.rank, 1);
  EXPECT_EQ(st.shape[0], 4);
  EXPECT_EQ(((float *)st.data)[0], 0.0f);  // zero at creation
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK);
  EXPECT_EQ(((float *)st.data)[0], 2.0f);
  ((float *)st.data)[0] = 10.0f;
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK);
  const kilnrt_tensor *out;
  ASSERT_EQ(kilnrt_session_output(s, "out", &out), KILNRT_OK);
  EXPECT_EQ(((float *)out->data)[1], 13.0f);  // ids[1] + w[0] + acc[0]
  EXPECT_EQ(kilnrt_session_state(s, "cache", &st), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("no state 'cache' (states: acc)"));
  kilnrt_session_destroy(s);
}

TEST(Session, WeightsFilesMustMatchTheModel) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModel, &s), KILNRT_OK);
  float four[4] = {5, 0, 0, 0}, three[3] = {0, 0, 0};
  int32_t ints[4] = {0, 0, 0, 0};
  const char *w[] = {"w"}, *wx[] = {"w", "extra"}, *other[] = {"v"};
  kilnrt_tensor good{KILN_F32, 1, {4}, four}, bad_shape{KILN_F32, 1, {3}, three}, bad_type{KILN_I32, 1, {4}, ints};
  kilnrt_tensor two[2] = {good, good};
  auto check = [&](const char *name, int n, const char *const *names, const kilnrt_tensor *ts, const char *msg) {
    std::string p = dir() + "/" + name + ".safetensors";
    ASSERT_EQ(kilnrt_weights_save(p.c_str(), n, names, ts), KILNRT_OK);
    kilnrt_status st = kilnrt_session_load_weights(s, p.c_str());
    if (!msg) {
      EXPECT_EQ(st, KILNRT_OK) << kilnrt_last_error();
    } else {
      EXPECT_EQ(st, KILNRT_USER_ERROR);
      EXPECT_THAT(kilnrt_last_error(), HasSubstr(msg));
    }
  };
  check("good", 1, w, &good, nullptr);
  check("extra", 2, wx, two, "unexpected (1): extra");
  check("missing", 1, other, &good, "missing (1): w\n  unexpected (1): v");
  check("shape", 1, w, &bad_shape, "mis-shaped (1): w ([3] f32, expected [4] f32)");
  check("dtype", 1, w, &bad_type, "mis-shaped (1): w ([4] i32, expected [4] f32)");
  kilnrt_session_destroy(s);
}

// A NaN or infinity in a weight is refused by default (it gives silently wrong outputs), naming
// the tensor and the first index; the load option accepts it. Ignored tensors are not checked.
TEST(Session, NonFiniteWeightsAreRefusedUnlessAllowed) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModel, &s), KILNRT_OK);
  const char *names[] = {"w"};
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    float w[4] = {1, 2, bad, bad};
    kilnrt_tensor t{KILN_F32, 1, {4}, w};
    std::string p = dir() + "/nonfinite.safetensors";
    ASSERT_EQ(kilnrt_weights_save(p.c_str(), 1, names, &t), KILNRT_OK);
    EXPECT_EQ(kilnrt_session_load_weights(s, p.c_str()), KILNRT_USER_ERROR);
    EXPECT_THAT(kilnrt_last_error(), HasSubstr("tensor 'w' holds a non-finite value"));
    EXPECT_THAT(kilnrt_last_error(), HasSubstr("at flat index 2"));
    kilnrt_load_options opt{};
    opt.allow_non_finite = 1;
    EXPECT_EQ(kilnrt_session_load_weights_with(s, p.c_str(), &opt), KILNRT_OK) << kilnrt_last_error();
  }
  kilnrt_session_destroy(s);
}

TEST(Session, CheckpointPrefixAndIgnoredBuffers) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModelP, &s), KILNRT_OK);
  // "w" without the prefix, plus a U8 mask buffer the model ignores.
  std::string data(16, '\0'), mask(4, '\1');
  std::string p = dir() + "/prefixed.safetensors";
  writeFile(p, safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("layer.mask":{"dtype":"U8","shape":[2,2],"data_offsets":[16,20]}})",
                           data + mask));
  ASSERT_EQ(kilnrt_session_load_weights(s, p.c_str()), KILNRT_OK) << kilnrt_last_error();
  ASSERT_EQ(kilnrt_session_ignored_count(s), 1);
  EXPECT_STREQ(kilnrt_session_ignored_name(s, 0), "layer.mask");
  // A U8 tensor that is not ignorable is unexpected; a parameter stored as U8 is mis-shaped.
  writeFile(p, safetensors(R"({"model.w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("other":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
                           std::string(8, '\0')));
  EXPECT_EQ(kilnrt_session_load_weights(s, p.c_str()), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("unexpected (1): other"));
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("mis-shaped (1): model.w ([4] an unsupported dtype, expected [4] f32)"));
  kilnrt_session_destroy(s);
}

TEST(Session, RandomWeightsAreDeterministic) {
  kilnrt_session *a, *b;
  ASSERT_EQ(kilnrt_session_create(&kModel, &a), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_create(&kModel, &b), KILNRT_OK);
  kilnrt_session_random_weights(a, 42);
  kilnrt_session_random_weights(b, 42);
  std::string pa = dir() + "/ra.safetensors", pb = dir() + "/rb.safetensors";
  kilnrt_session_save_weights(a, pa.c_str());
  kilnrt_session_save_weights(b, pb.c_str());
  std::ifstream fa(pa, std::ios::binary), fb(pb, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(fa)), {}), std::string((std::istreambuf_iterator<char>(fb)), {}));
  kilnrt_session_destroy(a);
  kilnrt_session_destroy(b);
}

// Parameters kept in the layouts kiln-prepack-weights gives them: "a" [3, 5] in panels of 4
// columns (dims [2, 3, 4]), "b" the transpose of a [5, 3] file tensor, also in panels, and "t"
// the plain transpose of a [2, 3] file tensor. The entry copies the kept storage out, element
// ids[i] of each parameter, so the test reads the layouts the kernels see.
int32_t entryLayouts(void **bufs, const int64_t *syms, int32_t *) {
  const int32_t *ids = (const int32_t *)bufs[3];
  for (int p = 0; p < 3; ++p) {
    const float *w = (const float *)bufs[p];
    float *out = (float *)bufs[4 + p];
    for (int64_t i = 0; i < syms[0]; ++i) out[i] = ids[i] < (p == 2 ? 6 : 24) ? w[ids[i]] : -1.0f;
  }
  return 0;
}
const int64_t kMaxL[] = {24};
const kiln_tensor_info kParamsL[] = {
    {"a", KILN_F32, 3, {{2, -1}, {3, -1}, {4, -1}}, 0, KILN_INIT_NORMAL, 1.0f, 0, 0, 5},
    {"b", KILN_F32, 3, {{2, -1}, {3, -1}, {4, -1}}, 0, KILN_INIT_NORMAL, 1.0f, 0, 1, 5},
    {"t", KILN_F32, 2, {{3, -1}, {2, -1}}, 0, KILN_INIT_NORMAL, 1.0f, 0, 1, 0}};
const kiln_tensor_info kIoL[] = {{"tokens", KILN_I32, 1, {{24, 0}}, 24, 0, 0},
                                 {"a", KILN_F32, 1, {{24, 0}}, 0, 0, 0},
                                 {"b", KILN_F32, 1, {{24, 0}}, 0, 0, 0},
                                 {"t", KILN_F32, 1, {{24, 0}}, 0, 0, 0}};
const int32_t kInL[] = {0}, kOutL[] = {1, 2, 3};
const kiln_entry_info kEntriesL[] = {{"forward", entryLayouts, 1, 3, kInL, kOutL, 1, kBufs, 1, kKernels}};
const kiln_model_info kModelL = {KILN_ABI_VERSION, "toyl", "0", "h", "t", "", 1, kSyms, kMaxL, 3, kParamsL, 4, kIoL, 1,
                                 kEntriesL, "", 0, nullptr};

TEST(Session, ParametersAreKeptInPanelsAndSavedInTheFilesLayout) {
  kilnrt_session *s;
  ASSERT_EQ(kilnrt_session_create(&kModelL, &s), KILNRT_OK);
  // a[k][c] = 10 k + c ([3, 5]); b's file [5, 3]: b[c][k] = 100 + 10 k + c; t's file [2, 3]: t[r][c] = 3 r + c.
  std::vector<float> a(15), b(15), t(6);
  for (int k = 0; k < 3; ++k)
    for (int c = 0; c < 5; ++c) a[k * 5 + c] = 10.0f * k + c, b[c * 3 + k] = 100.0f + 10.0f * k + c;
  for (int i = 0; i < 6; ++i) t[i] = (float)i;
  std::string data((const char *)a.data(), 60);
  data += std::string((const char *)b.data(), 60) + std::string((const char *)t.data(), 24);
  std::string p = dir() + "/layouts.safetensors";
  writeFile(p, safetensors(R"({"a":{"dtype":"F32","shape":[3,5],"data_offsets":[0,60]},)"
                           R"("b":{"dtype":"F32","shape":[5,3],"data_offsets":[60,120]},)"
                           R"("t":{"dtype":"F32","shape":[2,3],"data_offsets":[120,144]}})",
                           data));
  ASSERT_EQ(kilnrt_session_load_weights(s, p.c_str()), KILNRT_OK) << kilnrt_last_error();
  std::vector<int32_t> v(24);
  for (int i = 0; i < 24; ++i) v[i] = i;
  kilnrt_tensor in = ids(v);
  ASSERT_EQ(kilnrt_session_set_input(s, "tokens", &in), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK) << kilnrt_last_error();
  const kilnrt_tensor *oa, *ob, *ot;
  ASSERT_EQ(kilnrt_session_output(s, "a", &oa), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_output(s, "b", &ob), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_output(s, "t", &ot), KILNRT_OK);
  for (int pn = 0; pn < 2; ++pn)  // panel pn, row k, lane l: column 4 pn + l of row k, 0 past the 5 columns
    for (int k = 0; k < 3; ++k)
      for (int l = 0; l < 4; ++l) {
        int c = 4 * pn + l, at = (pn * 3 + k) * 4 + l;
        EXPECT_EQ(((const float *)oa->data)[at], c < 5 ? 10.0f * k + c : 0.0f) << "a panel " << pn << " row " << k << " lane " << l;
        EXPECT_EQ(((const float *)ob->data)[at], c < 5 ? 100.0f + 10.0f * k + c : 0.0f) << "b panel " << pn << " row " << k << " lane " << l;
      }
  for (int r = 0; r < 3; ++r)  // t kept [3, 2]
    for (int c = 0; c < 2; ++c) EXPECT_EQ(((const float *)ot->data)[r * 2 + c], 3.0f * c + r);
  // Saved back in the files' layouts and shapes, the same bytes.
  std::string q = dir() + "/layouts-saved.safetensors";
  ASSERT_EQ(kilnrt_session_save_weights(s, q.c_str()), KILNRT_OK) << kilnrt_last_error();
  kilnrt_weights *w;
  ASSERT_EQ(kilnrt_weights_open(q.c_str(), &w), KILNRT_OK);
  for (auto [name, want, rows, cols] : {std::tuple<const char *, std::vector<float> *, int, int>{"a", &a, 3, 5},
                                        {"b", &b, 5, 3}, {"t", &t, 2, 3}}) {
    kilnrt_tensor got;
    ASSERT_EQ(kilnrt_weights_find(w, name, &got), KILNRT_OK);
    ASSERT_EQ(got.rank, 2);
    EXPECT_EQ(got.shape[0], rows);
    EXPECT_EQ(got.shape[1], cols);
    EXPECT_EQ(std::vector<float>((const float *)got.data, (const float *)got.data + rows * cols), *want) << name;
  }
  kilnrt_weights_close(w);
  // A file with the kept shape instead of the file's is mis-shaped, named with the shape expected.
  writeFile(p, safetensors(R"({"a":{"dtype":"F32","shape":[2,3,4],"data_offsets":[0,96]},)"
                           R"("b":{"dtype":"F32","shape":[5,3],"data_offsets":[96,156]},)"
                           R"("t":{"dtype":"F32","shape":[2,3],"data_offsets":[156,180]}})",
                           std::string(180, '\0')));
  EXPECT_EQ(kilnrt_session_load_weights(s, p.c_str()), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("a ([2, 3, 4] f32, expected [3, 5] f32)"));
  // Random weights are generated in the files' layout: the same numbers a plain [3, 5] gets.
  ASSERT_EQ(kilnrt_session_random_weights(s, 7), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_save_weights(s, q.c_str()), KILNRT_OK) << kilnrt_last_error();
  ASSERT_EQ(kilnrt_weights_open(q.c_str(), &w), KILNRT_OK);
  kilnrt_tensor ra;
  ASSERT_EQ(kilnrt_weights_find(w, "a", &ra), KILNRT_OK);
  ASSERT_EQ(kilnrt_session_run(s, "forward"), KILNRT_OK) << kilnrt_last_error();
  ASSERT_EQ(kilnrt_session_output(s, "a", &oa), KILNRT_OK);
  EXPECT_EQ(((const float *)oa->data)[1 * 4 + 2], ((const float *)ra.data)[1 * 5 + 2]);  // (k 1, c 2) in panel 0
  EXPECT_EQ(((const float *)oa->data)[(3 + 2) * 4 + 0], ((const float *)ra.data)[2 * 5 + 4]);  // (k 2, c 4) in panel 1
  kilnrt_weights_close(w);
  kilnrt_session_destroy(s);
}

TEST(Cpu, MissingFeaturesAreNamed) {
  EXPECT_EQ(kilnrt_cpu_check("sse4.1"), KILNRT_OK);
  EXPECT_EQ(kilnrt_cpu_check("sse4.1,no-such-feature"), KILNRT_USER_ERROR);
  EXPECT_THAT(kilnrt_last_error(), HasSubstr("lacks instruction set extensions the model was compiled for: no-such-feature"));
}

}  // namespace
