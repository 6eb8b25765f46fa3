// kilnrt internal helpers shared by the runtime's translation units (not installed).
#pragma once
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
}  // namespace kilnrt
