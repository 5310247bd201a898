// A fast 64-bit content hash (FNV-1a over 8-byte words with a xor-shift), for digests that identify files,
// models and data streams. Not cryptographic.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace mimic {

struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void bytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
  std::string hex() const {
    char buf[20];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }
};

}  // namespace mimic
