// FNV-1a, for names and secrets derived from other bytes (shm segment names,
// the secret of an environment init without COLLIE_SECRET). Not cryptographic:
// it only has to spread its input and not reveal it verbatim.
#pragma once

#include <cstddef>
#include <cstdint>

namespace collie {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;

/// Hash of `n` bytes at `data`, continuing from `h` (chain calls to hash several pieces).
inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace collie
