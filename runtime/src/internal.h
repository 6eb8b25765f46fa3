// kilnrt internal helpers shared by the runtime's translation units (not installed).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>
#include "kilnrt/api.h"

namespace kilnrt {
// Serves the Halide runtime's allocations from kilnrt's scratch pool (scratch.cpp); idempotent.
void scratch_install();
void scratch_threads(int n);  // the kernels' thread count (kilnrt_threads_set)
void scratch_prefault_stacks();  // every kernel thread touches the top MiB of its stack once
// fn(ctx, i) for every i in [0, n), on the kernels' threads (Halide's pool, sized by
// kilnrt_threads_set), or in order on the caller where no Halide runtime is linked.
void parallel_for(int n, void (*fn)(void *ctx, int i), void *ctx);
template <class F>
void parallel_for(int n, F &&f) {
  parallel_for(n, [](void *c, int i) { (*(std::remove_reference_t<F> *)c)(i); }, (void *)&f);
}
// The tensor last set for input `name` (null when none was set): generation reads the prompt's
// length from it.
const kilnrt_tensor *session_input(const kilnrt_session *s, const char *name);
// Parameter i's values as the session keeps them (null before weights are set).
const void *session_param(const kilnrt_session *s, int i);
// A parameter's rank and shape in weights files (a transposed or panel parameter's dims are the
// layout the model keeps).
int param_file_shape(const kiln_tensor_info &p, int64_t *shape);
// Whether symbol `sym` is a batch (the first factor of a batch's rows, kiln_model_info.sym_factors).
inline bool is_batch_sym(const kiln_model_info *m, int sym) {
  if (sym < 0 || !m->sym_factors) return false;
  for (int i = 0; i < m->n_syms; ++i)
    if (m->sym_factors[2 * i] == sym) return true;
  return false;
}
// Records the message for kilnrt_last_error() and returns `code`.
kilnrt_status fail(kilnrt_status code, std::string message);
inline kilnrt_status user_error(std::string m) { return fail(KILNRT_USER_ERROR, std::move(m)); }
inline kilnrt_status internal_error(std::string m) { return fail(KILNRT_INTERNAL_ERROR, std::move(m)); }
size_t dtype_size(kiln_dtype t);
const char *dtype_name(kiln_dtype t);
// quant.cpp: ggml's block formats (Q8_0, Q4_0, Q4_1): bytes per block of 32 (0: not one),
// a tensor's bytes, decoding to f32, encoding from f32 as llama.cpp's reference quantizer does,
// and the first block whose scale (or minimum) is not finite (-1: none).
int quant_block_bytes(kiln_dtype t);
bool is_quantized(kiln_dtype t);
size_t tensor_bytes(kiln_dtype t, int64_t numel);
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
void dequantize_blocks(kiln_dtype t, const uint8_t *src, float *dst, int64_t count);
void quantize_blocks(kiln_dtype t, const float *src, uint8_t *dst, int64_t count);
int64_t first_non_finite_block(kiln_dtype t, const uint8_t *src, int64_t count);
std::string shape_str(const int64_t *shape, int rank);
// The product of `shape`, or -1 when it exceeds `limit` (or a dimension is negative): every
// multiplication is checked, so no shape can wrap around to a small element count.
int64_t checked_numel(const int64_t *shape, int rank, int64_t limit = INT64_MAX);

// splitmix64: a stateless, platform-independent stream, so a seed names one set of weights
// (random weights) or one text (sampling).
inline uint64_t splitmix64(uint64_t &x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool is_dir(const std::string &path);
bool path_exists(const std::string &path);
// The whole file into `out`; a USER_ERROR "<what> '<path>': cannot open: ..." (or "is a folder").
kilnrt_status read_file(const std::string &path, const std::string &what, std::string &out);

// A file written through a temporary name in the same folder and renamed over `path` only
// once every byte is written: a full disk, a size limit or a killed process never leaves a
// truncated file under the final name (it keeps its previous content, or does not exist).
// Not thread-safe; one writer per file.
class AtomicFile {
 public:
  // `what` names the file in messages ("weights file", ".npy file").
  kilnrt_status open(const std::string &path, const std::string &what);
  kilnrt_status write(const void *data, size_t bytes);
  kilnrt_status commit();  // closes and renames; the temporary file is removed on any failure
  ~AtomicFile();

 private:
  kilnrt_status failed(const std::string &why);
  std::string path_, tmp_, what_;
  int fd_ = -1;
};
// The model's optimizer states (optimizer.*) that the last weights file loaded did not hold.
std::vector<std::string> optimizer_states_not_loaded(const kilnrt_session *s);
// Text pairs for a safetensors file's __metadata__ (beside "format" and "producer").
using FileMetadata = std::map<std::string, std::string>;
// kilnrt_weights_save with `meta` in the header's __metadata__.
kilnrt_status save_weights(const char *path, int32_t n, const char *const *names, const kilnrt_tensor *ts,
                           const FileMetadata &meta);
// kilnrt_session_save_weights with `meta` in the header's __metadata__ (a training checkpoint's run).
kilnrt_status session_save_weights(kilnrt_session *s, const char *path, const FileMetadata &meta);
// The text entries of the __metadata__ of the weights file the session loaded last (a
// safetensors file's; none for others).
FileMetadata session_weights_metadata(const kilnrt_session *s);
}  // namespace kilnrt
