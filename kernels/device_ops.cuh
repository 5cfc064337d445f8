// The innermost device operations the kernels are written in: which thread of
// which block this is, block barriers, flag loads and stores at system or GPU
// scope, the clock. Compiled by nvcc they are the GPU's (PTX, threadIdx, __syncthreads);
// compiled by g++ they are the CPU emulation's (kernels/emulator.h), where a
// block is a group of host threads. Everything above this header, the device
// primitives and the program kernel's body, is then the same source on both,
// so the host suite and ThreadSanitizer run the kernels' own code.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#include "executor/host_flags.h"
#include "kernels/emulator.h"
#endif

// "Unroll the loop that follows": nvcc's spelling, or GCC's.
#if defined(__CUDACC__)
#define COLLIE_UNROLL _Pragma("unroll")
#else
#define COLLIE_UNROLL _Pragma("GCC unroll 16")
#endif

// A function compiled once per instantiation and called, not copied into each
// caller: the block-wide moves are unrolled loops that every kind of step uses,
// and inlined into each they made the kernels' compile three times longer
// (docs/cuda-executor.md, "Moving bytes").
#if defined(__CUDACC__)
#define COLLIE_NOINLINE __noinline__
#else
#define COLLIE_NOINLINE
#endif

namespace collie {
namespace dev {

#if defined(__CUDACC__)

__device__ __forceinline__ int tid() { return static_cast<int>(threadIdx.x); }
__device__ __forceinline__ int nthreads() { return static_cast<int>(blockDim.x); }
__device__ __forceinline__ void sync() { __syncthreads(); }
/// A block barrier that also tells every thread whether any thread passed a true `pred`.
__device__ __forceinline__ bool syncOr(bool pred) { return __syncthreads_or(pred ? 1 : 0) != 0; }
__device__ __forceinline__ void fenceSystem() { __threadfence_system(); }
/// Orders this thread's earlier stores before its later loads, among the GPU's threads (protocol.h, "Giving up").
__device__ __forceinline__ void fenceSeqCstGpu() { asm volatile("fence.sc.gpu;" ::: "memory"); }

__device__ __forceinline__ uint64_t loadAcquireSys(const uint8_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void storeReleaseSys(uint8_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// The same at GPU scope, for flags both of whose sides run on this GPU: the release then waits only until the
// block's writes are visible on this GPU (its L2), not system-wide (PCIe, the host, peer GPUs).
__device__ __forceinline__ uint64_t loadAcquireGpu(const uint8_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void storeReleaseGpu(uint8_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// LL lines: each is valid by its own flag, so no ordering, only one untorn 64-bit access.
__device__ __forceinline__ uint64_t loadVolatile64(const uint8_t* p) {
  uint64_t v;
  asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void storeVolatile64(uint8_t* p, uint64_t v) {
  asm volatile("st.volatile.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
// Packet lines of 16 bytes (kernels/direct_allreduce_block.cuh): one vector access, which the GPU performs as two
// untorn 8-byte ones in no set order; each half carries its own flag, so a reader needs nothing more.
__device__ __forceinline__ void storeVolatile128(uint8_t* p, uint64_t lo, uint64_t hi) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(lo), "l"(hi) : "memory");
}
__device__ __forceinline__ void loadVolatile128(const uint8_t* p, uint64_t* lo, uint64_t* hi) {
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(*lo), "=l"(*hi) : "l"(p) : "memory");
}
__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/// A 32-bit flag another agent (host, other block, proxy) may raise at any time.
__device__ __forceinline__ uint32_t loadFlag(const volatile uint32_t* p) { return *p; }
/// Sets a 32-bit flag the host reads; the caller fences first (fenceSystem) so
/// the fields written before it are visible with it.
__device__ __forceinline__ void storeFlag(volatile uint32_t* p, uint32_t v) { *p = v; }
/// Sets *p from 0 to 1; true for the one caller that did.
__device__ __forceinline__ bool raiseFirst(uint32_t* p) { return atomicCAS(p, 0u, 1u) == 0u; }
/// Sets *p (shared memory) from 0 to v; several threads may race, one wins.
__device__ __forceinline__ void keepFirst(int* p, int v) { (void)atomicCAS(p, 0, v); }
/// *p += 1 among the GPU's blocks (device memory); returns the value before. What the calling thread did before is
/// ordered before the add (a fence), so a block that sees the count complete follows every block's work.
__device__ __forceinline__ uint32_t countOne(uint32_t* p) {
  __threadfence();
  return atomicAdd(p, 1u);
}
/// *p += v, atomically among the GPU's blocks (device memory).
__device__ __forceinline__ void addCount(uint64_t* p, uint64_t v) {
  (void)atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}

#else  // the CPU emulation

inline int tid() { return emu::self().tid; }
inline int nthreads() { return emu::self().nthreads; }
inline void sync() { emu::self().barrier->arriveAndWait(false); }
inline bool syncOr(bool pred) { return emu::self().barrier->arriveAndWait(pred); }
// Nothing to order: on the GPU the fence makes the block's writes (ordered before it by a barrier) visible
// system-wide before a relaxed flag store. Here every such flag is a release store of the same thread, which
// orders everything the barrier ordered before it; and ThreadSanitizer does not model fences. Counted, so
// tests can see which paths take one.
inline void fenceSystem() { emu::countFence(); }
// A store before it and a load after it are not reordered (executor/host_flags.h).
inline void fenceSeqCstGpu() { fenceSeqCst(); }

// Both scopes are the same acquire and release here; the system-scope ones are counted, so tests can see
// which flags take them.
inline uint64_t loadAcquireGpu(const uint8_t* p) {
  // Every poll loop of the kernels goes through here: let the other emulated
  // threads (far more than cores) run now and then.
  emu::pollPause();
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
inline void storeReleaseGpu(uint8_t* p, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELEASE);
}
inline uint64_t loadAcquireSys(const uint8_t* p) {
  emu::countSystemScope();
  return loadAcquireGpu(p);
}
inline void storeReleaseSys(uint8_t* p, uint64_t v) {
  emu::countSystemScope();
  storeReleaseGpu(p, v);
}
// Relaxed, as the GPU's volatile accesses are: what the LL protocol relies on is
// exactly that each line is one untorn access.
inline uint64_t loadVolatile64(const uint8_t* p) {
  emu::pollPause();
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
}
inline void storeVolatile64(uint8_t* p, uint64_t v) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), v, __ATOMIC_RELAXED);
}
// Two relaxed 8-byte accesses, the GPU's vector access at its weakest: the halves may be seen apart.
inline void storeVolatile128(uint8_t* p, uint64_t lo, uint64_t hi) {
  __atomic_store_n(reinterpret_cast<uint64_t*>(p), lo, __ATOMIC_RELAXED);
  __atomic_store_n(reinterpret_cast<uint64_t*>(p + 8), hi, __ATOMIC_RELAXED);
}
inline void loadVolatile128(const uint8_t* p, uint64_t* lo, uint64_t* hi) {
  emu::pollPause();
  *lo = __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_RELAXED);
  *hi = __atomic_load_n(reinterpret_cast<const uint64_t*>(p + 8), __ATOMIC_RELAXED);
}
inline uint64_t globalTimerNs() { return emu::nowNs(); }
inline uint32_t loadFlag(const volatile uint32_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
// A release store: the host thread reading it with an acquire load (launchFailure) sees the fields before it.
inline void storeFlag(volatile uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
inline bool raiseFirst(uint32_t* p) {
  uint32_t expected = 0;
  return __atomic_compare_exchange_n(p, &expected, 1u, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}
inline void keepFirst(int* p, int v) {
  int expected = 0;
  (void)__atomic_compare_exchange_n(p, &expected, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
inline void addCount(uint64_t* p, uint64_t v) { (void)__atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline uint32_t countOne(uint32_t* p) { return __atomic_fetch_add(p, 1u, __ATOMIC_ACQ_REL); }

#endif

}  // namespace dev
}  // namespace collie
