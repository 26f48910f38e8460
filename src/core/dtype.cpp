#include "dtype.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "errors.hpp"

namespace dlb {
namespace {

// Type codes by number (DLPack 1.3), with their numpy-style base name and
// the bit widths DLPack allows for them.
struct CodeInfo {
  const char* name;   // base name; the width is appended where `widths` has several
  std::uint8_t widths[6];  // legal bit widths, 0-terminated
  bool name_has_width;
};

constexpr CodeInfo kCodes[] = {
    /* 0 Int */ {"int", {2, 4, 8, 16, 32, 64}, true},  // 2 and 4: sub-byte (DLPack 1.1)
    /* 1 UInt */ {"uint", {2, 4, 8, 16, 32, 64}, true},
    /* 2 Float */ {"float", {16, 32, 64, 0}, true},
    /* 3 OpaqueHandle */ {"handle", {8, 16, 32, 64}, true},
    /* 4 Bfloat */ {"bfloat", {16, 0, 0, 0}, true},
    /* 5 Complex */ {"complex", {32, 64, 128, 0}, true},
    /* 6 Bool */ {"bool", {8, 0, 0, 0}, false},
    /* 7 */ {"float8_e3m4", {8, 0, 0, 0}, false},
    /* 8 */ {"float8_e4m3", {8, 0, 0, 0}, false},
    /* 9 */ {"float8_e4m3b11fnuz", {8, 0, 0, 0}, false},
    /* 10 */ {"float8_e4m3fn", {8, 0, 0, 0}, false},
    /* 11 */ {"float8_e4m3fnuz", {8, 0, 0, 0}, false},
    /* 12 */ {"float8_e5m2", {8, 0, 0, 0}, false},
    /* 13 */ {"float8_e5m2fnuz", {8, 0, 0, 0}, false},
    /* 14 */ {"float8_e8m0fnu", {8, 0, 0, 0}, false},
    /* 15 */ {"float6_e2m3fn", {6, 0, 0, 0}, false},
    /* 16 */ {"float6_e3m2fn", {6, 0, 0, 0}, false},
    /* 17 */ {"float4_e2m1fn", {4, 0, 0, 0}, false},
};
constexpr unsigned kCodeCount = sizeof kCodes / sizeof kCodes[0];

bool width_legal(const CodeInfo& info, unsigned bits) noexcept {
  for (std::uint8_t w : info.widths)
    if (w != 0 && w == bits) return true;
  return false;
}

bool match_base_name(const char* text, std::uint16_t lanes, DLDataType* out) noexcept {
  for (unsigned code = 0; code < kCodeCount; ++code) {
    const CodeInfo& info = kCodes[code];
    const std::size_t len = std::strlen(info.name);
    if (std::strncmp(text, info.name, len) != 0) continue;
    const char* rest = text + len;
    unsigned bits = 0;
    if (info.name_has_width) {
      char* end = nullptr;
      if (*rest < '0' || *rest > '9') continue;
      bits = static_cast<unsigned>(std::strtoul(rest, &end, 10));
      if (*end != '\0') continue;
    } else {
      if (*rest != '\0') continue;
      bits = info.widths[0];
    }
    if (!width_legal(info, bits)) continue;
    out->code = static_cast<std::uint8_t>(code);
    out->bits = static_cast<std::uint8_t>(bits);
    out->lanes = lanes;
    return true;
  }
  return false;
}

}  // namespace

dlb_status check_dtype(DLDataType dtype) noexcept {
  if (dtype.code >= kCodeCount)
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "dtype code %u is not a DLPack type code (known: 0..%u)",
                     static_cast<unsigned>(dtype.code), kCodeCount - 1);
  const CodeInfo& info = kCodes[dtype.code];
  if (!width_legal(info, dtype.bits))
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "dtype bits %u is not legal for type code %u (%s)",
                     static_cast<unsigned>(dtype.bits), static_cast<unsigned>(dtype.code), info.name);
  if (dtype.lanes == 0)
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "dtype lanes is 0 (must be at least 1)");
  return DLB_OK;
}

dlb_status format_dtype_name(DLDataType dtype, char* out, std::size_t out_size) noexcept {
  DLB_TRY(check_dtype(dtype));
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  const CodeInfo& info = kCodes[dtype.code];
  char buf[48];
  int n;
  if (info.name_has_width)
    n = std::snprintf(buf, sizeof buf, "%s%u", info.name, static_cast<unsigned>(dtype.bits));
  else
    n = std::snprintf(buf, sizeof buf, "%s", info.name);
  if (dtype.lanes != 1)
    n += std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), "x%u",
                       static_cast<unsigned>(dtype.lanes));
  if (static_cast<std::size_t>(n) + 1 > out_size)
    return set_error(DLB_ERR_INVALID_ARGUMENT, "out_size %zu is too small for dtype name '%s' (needs %d)",
                     out_size, buf, n + 1);
  std::memcpy(out, buf, static_cast<std::size_t>(n) + 1);
  return DLB_OK;
}

dlb_status parse_dtype_name(const char* name, DLDataType* out) noexcept {
  if (name == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "name is NULL");
  if (out == nullptr) return set_error(DLB_ERR_INVALID_ARGUMENT, "out is NULL");
  struct Alias {
    const char* alias;
    const char* canonical;
  };
  static constexpr Alias kAliases[] = {
      {"float", "float64"}, {"double", "float64"}, {"half", "float16"}, {"int", "int64"},
      {"complex", "complex128"}, {"bfloat", "bfloat16"}, {"uint", "uint64"},
  };
  char text[64];
  if (std::snprintf(text, sizeof text, "%s", name) >= static_cast<int>(sizeof text))
    return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "dtype name is too long");
  for (const Alias& a : kAliases)
    if (std::strcmp(text, a.alias) == 0) std::snprintf(text, sizeof text, "%s", a.canonical);

  // The whole text as a base name; failing that, a base name with a lane
  // suffix "xN" ("float32x4"; "complex64" is a base name, not "complE" x 64).
  if (match_base_name(text, 1, out)) return DLB_OK;
  char* x = std::strrchr(text, 'x');
  if (x != nullptr && x[1] >= '0' && x[1] <= '9') {
    char* end = nullptr;
    const unsigned long lanes = std::strtoul(x + 1, &end, 10);
    if (*end == '\0' && lanes >= 1 && lanes <= 65535) {
      *x = '\0';
      if (match_base_name(text, static_cast<std::uint16_t>(lanes), out)) return DLB_OK;
    }
  }
  return set_error(DLB_ERR_UNSUPPORTED_DTYPE, "'%s' is not a dtype name dlbridge knows", name);
}

}  // namespace dlb
