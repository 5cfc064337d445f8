// How host code (the host executor, the proxy thread) reads and writes the
// protocol's u64 flags in windows that other threads, processes or a GPU
// also touch, and how it idles between polls.
#pragma once

#include <cstdint>

namespace collie {

inline uint64_t loadAcquire(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
inline void storeRelease(uint8_t* p, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
}

// ThreadSanitizer sees the flags' ordering only per virtual address, and every rank maps each window
// itself: ranks that are threads of one process store a flag at one address and load it at another. So the
// happens-before that a flag carries between them is invisible to it, and so is the slot data it orders.
// A slice read in place lies in the sender's own memory, at one address for both: the executor names that
// address to TSan as the place where the flag's release and acquire meet (tsanRelease / tsanAcquire), so a
// read that no flag orders is still reported. Nothing without TSan.
#if defined(__SANITIZE_THREAD__)
#define COLLIE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COLLIE_TSAN 1
#endif
#endif
#ifdef COLLIE_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
inline void tsanAcquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
inline void tsanRelease(const void* p) { __tsan_release(const_cast<void*>(p)); }
#else
inline void tsanAcquire(const void*) {}
inline void tsanRelease(const void*) {}
#endif

/// One polite spin: tells the core a poll loop runs (frees the sibling hyperthread).
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace collie
