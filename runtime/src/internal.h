// kilnrt internal helpers shared by the runtime's translation units (not installed).
#pragma once
#include <cstdint>
#include <string>
#include "kilnrt/api.h"

namespace kilnrt {
// Records the message for kilnrt_last_error() and returns `code`.
kilnrt_status fail(kilnrt_status code, std::string message);
inline kilnrt_status user_error(std::string m) { return fail(KILNRT_USER_ERROR, std::move(m)); }
inline kilnrt_status internal_error(std::string m) { return fail(KILNRT_INTERNAL_ERROR, std::move(m)); }
size_t dtype_size(kiln_dtype t);
const char *dtype_name(kiln_dtype t);
std::string shape_str(const int64_t *shape, int rank);
// The product of `shape`, or -1 when it exceeds `limit` (or a dimension is negative): every
// multiplication is checked, so no shape can wrap around to a small element count.
int64_t checked_numel(const int64_t *shape, int rank, int64_t limit = INT64_MAX);

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
}  // namespace kilnrt
