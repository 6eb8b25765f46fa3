// kilnrt .npy files: NumPy's format version 1/2/3, little-endian f4 / i4 / i8, C order only.
// Anything else (Fortran order, big-endian, object arrays, truncated data) is rejected by name.
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>
#include <vector>

#include "internal.h"

using namespace kilnrt;

static kilnrt_status bad(const std::string &path, const std::string &why) {
  return user_error(".npy file '" + path + "': " + why);
}

extern "C" kilnrt_status kilnrt_npy_read(const char *path, kilnrt_tensor *out) {
  *out = kilnrt_tensor{};
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return bad(path, std::string("cannot open: ") + strerror(errno));
  int64_t fsize = f.tellg();
  f.seekg(0);
  char magic[8];
  if (fsize < 10 || !f.read(magic, 8) || memcmp(magic, "\x93NUMPY", 6) != 0) return bad(path, "not a .npy file (bad magic)");
  int major = (uint8_t)magic[6];
  uint32_t hlen = 0;
  if (major == 1) {
    uint8_t b[2];
    f.read((char *)b, 2);
    hlen = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    uint8_t b[4];
    f.read((char *)b, 4);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | ((uint32_t)b[3] << 24);
  } else {
    return bad(path, "unsupported format version " + std::to_string(major));
  }
  if (!f || (int64_t)hlen > fsize - f.tellg()) return bad(path, "truncated header");
  std::string h(hlen, '\0');
  f.read(h.data(), hlen);
  // Compiled once: building a std::regex costs more than reading a small file.
  static const std::regex kDescr("'descr'\\s*:\\s*'([^']*)'"), kFortran("'fortran_order'\\s*:\\s*(True|False)"),
      kShape("'shape'\\s*:\\s*\\(([^)]*)\\)");
  std::smatch m;
  if (!std::regex_search(h, m, kDescr)) return bad(path, "header has no 'descr'");
  std::string descr = m[1];
  if (!std::regex_search(h, m, kFortran)) return bad(path, "header has no 'fortran_order'");
  if (m[1] == "True") return bad(path, "Fortran order is not supported; save a C-contiguous array");
  if (!std::regex_search(h, m, kShape)) return bad(path, "header has no 'shape'");
  std::string dims = m[1];
  kilnrt_tensor t{};
  std::stringstream ss(dims);
  for (std::string tok; std::getline(ss, tok, ',');) {
    tok.erase(0, tok.find_first_not_of(" \t"));
    tok.erase(tok.find_last_not_of(" \t") + 1);
    if (tok.empty()) continue;
    if (t.rank == KILN_MAX_RANK) return bad(path, "more than 4 dimensions");
    if (tok.find_first_not_of("0123456789") != std::string::npos || tok.size() > 15) return bad(path, "bad shape entry '" + tok + "'");
    t.shape[t.rank++] = std::stoll(tok);
  }
  // Every multiplication checked: the data can be no larger than the file.
  int64_t numel = checked_numel(t.shape, t.rank, fsize / 4);
  if (numel < 0)
    return bad(path, "shape " + shape_str(t.shape, t.rank) + " has more elements than the " + std::to_string(fsize) +
                         "-byte file can hold");
  size_t esize;
  bool is_i64 = false;
  if (descr == "<f4") { t.dtype = KILN_F32; esize = 4; }
  else if (descr == "<i4") { t.dtype = KILN_I32; esize = 4; }
  else if (descr == "<i8") { t.dtype = KILN_I32; esize = 8; is_i64 = true; }
  else return bad(path, "dtype '" + descr + "' is not supported (float32, int32 or int64, little-endian)");
  int64_t avail = fsize - (int64_t)f.tellg();
  if (numel * (int64_t)esize != avail)
    return bad(path, "shape " + shape_str(t.shape, t.rank) + " needs " + std::to_string(numel * (int64_t)esize) +
                         " data bytes but the file holds " + std::to_string(avail));
  std::vector<char> raw((size_t)avail);
  f.read(raw.data(), avail);
  void *data = malloc(numel ? (size_t)numel * 4 : 4);
  if (!data) return bad(path, "cannot allocate " + std::to_string(numel * 4) + " bytes");
  if (is_i64) {
    int32_t *dst = (int32_t *)data;
    for (int64_t i = 0; i < (int64_t)numel; ++i) {
      int64_t v;
      memcpy(&v, raw.data() + 8 * i, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        free(data);
        return bad(path, "int64 value " + std::to_string(v) + " at index " + std::to_string(i) + " does not fit in int32");
      }
      dst[i] = (int32_t)v;
    }
  } else if (!raw.empty()) {  // a zero-element array has no data (found by fuzz_npy)
    memcpy(data, raw.data(), raw.size());
  }
  t.data = data;
  *out = t;
  return KILNRT_OK;
}

extern "C" kilnrt_status kilnrt_npy_write(const char *path, const kilnrt_tensor *t) {
  std::string shape = "(";
  for (int i = 0; i < t->rank; ++i) shape += std::to_string(t->shape[i]) + (t->rank == 1 ? "," : i + 1 < t->rank ? ", " : "");
  shape += ")";
  std::string h = std::string("{'descr': '") + (t->dtype == KILN_F32 ? "<f4" : "<i4") +
                  "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64) h.push_back(' ');
  h.push_back('\n');
  int64_t n = kilnrt_tensor_numel(t);
  if (n < 0 || (t->dtype != KILN_F32 && t->dtype != KILN_I32))
    return user_error(std::string("cannot write '") + path + "': not a valid f32 or i32 tensor");
  uint16_t hl = (uint16_t)h.size();
  char le[2] = {(char)(hl & 0xff), (char)(hl >> 8)};
  AtomicFile f;
  kilnrt_status st = f.open(path, ".npy file");
  if (!st) st = f.write("\x93NUMPY\x01\x00", 8);
  if (!st) st = f.write(le, 2);
  if (!st) st = f.write(h.data(), h.size());
  if (!st) st = f.write(t->data, (size_t)n * 4);
  return st ? st : f.commit();
}

extern "C" void kilnrt_tensor_free(kilnrt_tensor *t) {
  free(t->data);
  t->data = nullptr;
}
