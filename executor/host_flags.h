// How host code (the host executor, the proxy thread) reads and writes the
// protocol's u64 flags in windows that other threads, processes or a GPU
// also touch, and how it idles between polls.
#pragma once

#include <atomic>
#include <cstdint>

namespace collie {

inline uint64_t loadAcquire(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
inline void storeRelease(uint8_t* p, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
}

/// Orders this thread's earlier stores before its later loads, against any thread that does the same (protocol.h,
/// "Giving up": of two threads that each store, fence, then load what the other stored, one sees the other's
/// store). A sequentially consistent read-modify-write of one word every caller shares: a standalone C++ fence
/// would order as much, but ThreadSanitizer does not model those (GCC warns, -Wtsan).
inline void fenceSeqCst() {
  static std::atomic<uint64_t> word{0};
  word.fetch_add(1, std::memory_order_seq_cst);
}

/// One polite spin: tells the core a poll loop runs (frees the sibling hyperthread).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace collie
