// Helpers of the sharing tests: counting this process's file descriptors
// and shared mappings, and editing descriptions field by field (with the
// checksum recomputed, so that a test reaches the check it aims at).
#ifndef DLBRIDGE_TESTS_SHARE_SHARE_TESTING_HPP_
#define DLBRIDGE_TESTS_SHARE_SHARE_TESTING_HPP_

#include <dlbridge/dlbridge.h>

#include <dirent.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

namespace sharetest {

// Entries of /proc/self/fd (the directory's own descriptor not counted).
inline int open_fds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;
}

// Lines of /proc/self/maps that map one of the library's memory files.
inline int shared_maps() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line))
    if (line.find("memfd:dlbridge-shared") != std::string::npos) ++n;
  return n;
}

inline void put_le(unsigned char* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint64_t get_le(const unsigned char* p, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

// FNV-1a over the bytes with the checksum field (bytes 12..15) as zero,
// written into that field: the format's rule, restated independently.
inline void reseal(unsigned char* p, std::size_t n) {
  std::uint32_t h = 2166136261u;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ ((i >= 12 && i < 16) ? 0 : p[i])) * 16777619u;
  put_le(p + 12, h, 4);
}

// Field offsets of description version 1.
enum Field : int {
  kVersion = 4,
  kReserved = 6,
  kSize = 8,
  kChecksum = 12,
  kFlags = 16,
  kFileSize = 24,
  kByteOffset = 32,
  kDeviceType = 40,
  kDeviceId = 44,
  kDtypeCode = 48,
  kDtypeBits = 49,
  kNdim = 52,
  kShape = 56,
};

}  // namespace sharetest

#endif
