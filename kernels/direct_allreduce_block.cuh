// The direct kernels' bodies (kernels/direct_kernels.h), written in the device operations of
// kernels/device_ops.cuh only, so that the CPU emulation runs the same code (kernels/direct_emulated.cc,
// tests/unit/direct_kernels_test.cc). Every rank's launch of a call runs one of them over the same grid shape.
//
// One-shot allreduce (small calls): no barrier, no credit, no drain.
//
//   push   every line of this rank's input (8 bytes of data, flag = seq in both halves) into each peer's
//          scratch at [seq & 1][this rank]
//   take   poll this rank's own scratch for each peer's line; reduce the n contributions in rank order
//          (its own from its input); store the output
//
//   line (16 bytes, one vector store):  | data bytes 0-3 | seq | data bytes 4-7 | seq |
//   cost: one hop; each rank stores 2(n-1) x its bytes into peers and loads as much; no round trip
//
// Each half of a line is an untorn 8-byte access that carries the flag, so a line is valid by itself and needs
// no fence. A thread takes exactly the lines it pushed (the same grid-stride over lines), and takes its own
// contribution from its input right before it stores the output there, so in place needs no care.
//
// Every launch takes its call's number from the rank's counter as it starts and leaves it there for the next as
// its last block ends (direct_kernels.h, "The call number"), so every body reaches endLaunch on every path.
//
// Parities. Direct call f (every kernel here) uses the scratch of parity f & 1. A rank writes call f + 2 into a
// peer's slot only after its launch of call f + 1 has ended, and every direct call waits, on every rank, for
// something each peer did in that call (a line, or a barrier's arrival); the peer did it in its launch of f + 1,
// which began after its launch of f, the last reader of the slot, had ended. So two parities suffice, and a line's
// flag is the call's own number: a line left by an earlier call carries an older one (scratch starts zeroed, and
// calls are numbered from 1). A one-shot call of count 0 still sends one line, so that it synchronises too.
//
// Two-shot allreduce and reduce-scatter (large calls): a grid of many blocks.
//
//   entry  block b of each rank announces to block b of every peer that this call has begun on it (its input is
//          ready, its output free), with the addresses of its input and output, and waits for theirs
//   move   rank r's chunk, from all n inputs reduced in rank order, into all n outputs (reduce-scatter: into its
//          own only); 16-byte vectors, U of them per thread in flight at once (8 loads or more at any rank count)
//   exit   the same announcement and wait: no rank's stream moves on while a peer still reads its input or
//          writes its output (every block of every peer has passed its exit announcement once a rank's whole
//          grid has passed its exit wait)
//
//   cost: rank r loads n x count/n and stores n x count/n (allreduce: each input read once, each output written
//         once over all ranks: the byte floor); 2 barrier round trips
//
// The barrier is per block, each block with the same block of its peers, rather than grid-wide: it needs no
// counter shared by a rank's blocks and no second phase, and a rank's whole grid has synchronised with each peer's
// once all its blocks have. An epoch is the call's number (entry 2 seq - 1, exit 2 seq) in a slot [block][sender]
// of the receiver's flags that only that sender writes, so a wait is "at least this epoch": a block may skip
// calls (launched with fewer blocks) without a stale slot ever passing.
//
// Peers' buffers. A rank learns its peers' input and output of the call at the entry barrier: each sender writes
// them into its record [block][sender] of the receiver's flags before the entry epoch (release), and the receiver
// reads them from its own flags after it (acquire). A sender rewrites them only at its next call's entry, which
// comes after its exit wait of this call, so after the receiver's exit announcement, after its reads. So the host
// hands a launch its own buffers only, and a call whose peers' buffers change from call to call (a rank's stream
// moving on, a caching allocator) needs no host exchange before it. A peer in another process announces, beside
// each address, the window it lies in (collieCommWindowRegister; 0, the communicator's staging buffer, for a buffer
// outside every window): the receiver maps it through its table of the peers' windows (DirectArgs::peerMaps), which
// registration filled on every rank before any call could name the window.
//
// Allgather: the same barriers and move, one source (rank r's input) and n destinations (block r of every
// output), by the element size only. All-to-all: the same barriers; rank r stores block q of its input into block r
// of rank q's output, for q from r on (so the ranks store into different peers at any moment). All-to-all-v: the
// same with each pair's own count, rank r's block landing where rank q announced at the entry barrier. Broadcast:
// the same barriers; rank r copies its chunk of the root's input (the two-shot's chunks) into every rank's output,
// so each byte of the root's input is read once and each output written once, the byte floor (the direct broadcast
// program the verifier proves has every rank read the whole of the root's input instead; the results are the same).
//
// The two-shot allreduce's chunks are the direct two-shot program's (balanced over elements), so that the kernel
// moves what the verifier proved; a chunk off a 16-byte boundary starts with a scalar head of under 16 bytes, as
// every buffer of a move sits at the same address modulo 16 there. Where they do not, a move goes element by
// element (slow, correct): the reduce-scatter's and allgather's blocks r do unless count x the element size is a
// multiple of 16. Indices are 32-bit (kDirectMaxBytes).
//
// Every wait is bounded: every 1024 polls it reads the abort flag, this rank's error record (another thread of
// this rank gave up, so this one stops too) and the clock (a deadline of timeoutNs, set at the first check). The
// first thread that gives up records rank, peer, call and block (DirectError).
#pragma once

#include <cstdint>
#include <cstring>

#include "executor/reduce_ops.h"
#include "kernels/device_ops.cuh"
#include "kernels/direct_kernels.h"

namespace collie {
namespace direct {

// ---------------------------------------------------------------- memory of another type

template <size_t S>
struct UintOf;
template <>
struct UintOf<1> {
  using type = uint8_t;
};
template <>
struct UintOf<2> {
  using type = uint16_t;
};
template <>
struct UintOf<4> {
  using type = uint32_t;
};
template <>
struct UintOf<8> {
  using type = uint64_t;
};
/// The unsigned integer of T's size: what the allgather moves, and how an element sits in a line.
template <typename T>
using WordOf = typename UintOf<sizeof(T)>::type;

/// 16 bytes as words: moved as one vector access (arrays of 1-byte elements were split into bytes).
struct alignas(16) Vec {
  uint32_t w[4];
};

/// An aligned access to memory holding another type: a typed access on the GPU (one vector instruction), memcpy on
/// the CPU, where reading through another type's pointer breaks C++'s aliasing rules. A misaligned one traps on
/// both, as the GPU's does ("misaligned address"): memcpy alone would hide it from the emulation.
template <typename V>
__device__ inline V loadAs(const void* p) {
#if defined(__CUDACC__)
  return *static_cast<const V*>(p);
#else
  if (reinterpret_cast<uintptr_t>(p) % alignof(V) != 0) __builtin_trap();
  V v;
  memcpy(&v, p, sizeof(V));
  return v;
#endif
}
template <typename V>
__device__ inline void storeAs(void* p, const V& v) {
#if defined(__CUDACC__)
  *static_cast<V*>(p) = v;
#else
  if (reinterpret_cast<uintptr_t>(p) % alignof(V) != 0) __builtin_trap();
  memcpy(p, &v, sizeof(V));
#endif
}

template <typename T>
__device__ inline WordOf<T> bitsOf(T x) {
  WordOf<T> b;
  memcpy(&b, &x, sizeof(T));
  return b;
}
template <typename T>
__device__ inline T fromBits(uint64_t b) {
  const WordOf<T> w = static_cast<WordOf<T>>(b);
  T x;
  memcpy(static_cast<void*>(&x), &w, sizeof(T));
  return x;
}

// ---------------------------------------------------------------- element-wise operations on 8 or 16 bytes

/// `bytes` bytes (8 or 16) as elements of T: acc = x (op) acc, element by element.
template <typename T, ReduceOp Op, typename B>
__device__ inline B combine(const B& x, const B& acc) {
  constexpr int kElems = sizeof(B) / sizeof(T);
  struct Pack {
    T v[kElems];
  };
  Pack px, pa;
  memcpy(&px, &x, sizeof(B));
  memcpy(&pa, &acc, sizeof(B));
  COLLIE_UNROLL
  for (int k = 0; k < kElems; ++k) pa.v[k] = applyOp<Op>(px.v[k], pa.v[k]);
  B out;
  memcpy(&out, &pa, sizeof(B));
  return out;
}
/// f applied to each element of type T in a vector B.
template <typename T, typename B, typename F>
__device__ inline B mapElems(const B& x, F f) {
  constexpr int kElems = sizeof(B) / sizeof(T);
  struct Pack {
    T v[kElems];
  };
  Pack p;
  memcpy(&p, &x, sizeof(B));
  COLLIE_UNROLL
  for (int k = 0; k < kElems; ++k) p.v[k] = f(p.v[k]);
  B out;
  memcpy(&out, &p, sizeof(B));
  return out;
}
/// Each element divided by `divisor` (avg's end), or multiplied by `scalar` (a pre-multiplied sum's start).
template <typename T, typename B>
__device__ inline B divideAll(const B& x, int divisor) {
  return mapElems<T>(x, [divisor](T v) { return divideBy(v, divisor); });
}
template <typename T, typename B>
__device__ inline B scaleAll(const B& x, T scalar) {
  return mapElems<T>(x, [scalar](T v) { return scaleBy(v, scalar); });
}

// ---------------------------------------------------------------- bounded waits

/// One wait's polls, and its deadline once the first check has set it.
struct Wait {
  uint32_t polls = 0;
  uint64_t deadline = 0;
};

/// Called at every poll that found nothing: every 1024th, why to stop waiting, or 0. The host's abort and another
/// thread of this rank that gave up (its record is raised) give collieRemoteError, the deadline collieTimeout.
__device__ inline int stopWaiting(const DirectArgs& a, Wait* w) {
  if ((++w->polls & 1023) != 0) return 0;
  if (a.abortFlag != nullptr && dev::loadFlag(a.abortFlag) != 0) return collieRemoteError;
  if (dev::loadFlag(&a.error->claimed) != 0) return collieRemoteError;
  const uint64_t now = dev::globalTimerNs();
  if (w->deadline == 0) w->deadline = now + a.timeoutNs;
  return now > w->deadline ? collieTimeout : 0;
}

/// Records why this rank's call `call` failed, unless another of its threads did first: the fields, then (after a
/// system fence, for a host that reads a mapped record) the code that says they are complete.
__device__ inline void recordFailure(const DirectArgs& a, uint64_t call, int block, int peer, int code,
                                     int reason = 0) {
  if (!dev::raiseFirst(&a.error->claimed)) return;
  a.error->rank = a.rank;
  a.error->peer = peer;
  a.error->call = call;
  a.error->block = block;
  a.error->reason = reason;
  dev::fenceSystem();
  dev::storeFlag(&a.error->code, static_cast<uint32_t>(code));
}

// ---------------------------------------------------------------- the call number (direct_kernels.h)

/// This launch's call number: the rank's calls so far, plus one. Read by every thread as its block starts.
__device__ inline uint64_t callNumber(const DirectArgs& a) { return a.counter->seq + 1; }

/// The block's end, reached by all its threads on every path: the launch's last block to end stores the call number
/// for the next launch (every block read it before it counted itself here). With `refused` a peer, the call is
/// refused with `reason` there: once every block of this rank has passed its exit barrier, since a raised record
/// ends this rank's waits (stopWaiting), and a block that left its exit wait early would let the rank's stream move
/// on while a peer still writes its output.
__device__ inline void endLaunch(const DirectArgs& a, uint64_t call, int nblocks, int refused = -1, int reason = 0) {
  dev::sync();
  if (dev::tid() != 0) return;
  if (dev::countOne(&a.counter->done) + 1 != static_cast<uint32_t>(nblocks)) return;
  if (refused >= 0) recordFailure(a, call, nblocks - 1, refused, collieInvalidUsage, reason);
  a.counter->done = 0;
  a.counter->seq = call;
}

// ---------------------------------------------------------------- timing (COLLIE_KERNEL_TIMING)

/// Thread 0 of block 0's stamps of one launch (direct_kernels.h, kDirectTimingWords); nothing when untimed.
struct Stamps {
  bool on = false;
  uint64_t start = 0, arrived = 0;
  __device__ Stamps(const DirectArgs& a, int block) : on(a.timing != nullptr && block == 0 && dev::tid() == 0) {
    if (on) start = dev::globalTimerNs();
  }
  __device__ void peersCame() {
    if (on && arrived == 0) arrived = dev::globalTimerNs();
  }
  /// The launch's end: its sums added (a rank's launches run one after another on its stream: one writer).
  __device__ void end(const DirectArgs& a) {
    if (!on) return;
    const uint64_t now = dev::globalTimerNs();
    a.timing[0] += 1;
    a.timing[1] += now - start;
    a.timing[2] += (arrived != 0 ? arrived : now) - start;
  }
};

// ---------------------------------------------------------------- one-shot allreduce with packets

/// Elements [first, first + 8 / sizeof(T)) of src as a line's 8 data bytes: those at or past `count` read as 0.
template <typename T>
__device__ inline uint64_t loadLine(const T* src, uint32_t first, uint32_t count) {
  constexpr uint32_t kPer = 8 / sizeof(T);
  const T* p = src + first;
  if (first + kPer <= count && (reinterpret_cast<uintptr_t>(p) & 7) == 0) return loadAs<uint64_t>(p);
  uint64_t v = 0;
  COLLIE_UNROLL
  for (uint32_t k = 0; k < kPer; ++k)
    if (first + k < count) v |= static_cast<uint64_t>(bitsOf(p[k])) << (8 * sizeof(T) * k);
  return v;
}
/// The inverse: a line's data bytes into elements [first, ...) of dst below `count`.
template <typename T>
__device__ inline void storeLine(T* dst, uint32_t first, uint32_t count, uint64_t v) {
  constexpr uint32_t kPer = 8 / sizeof(T);
  T* p = dst + first;
  if (first + kPer <= count && (reinterpret_cast<uintptr_t>(p) & 7) == 0) {
    storeAs<uint64_t>(p, v);
    return;
  }
  COLLIE_UNROLL
  for (uint32_t k = 0; k < kPer; ++k)
    if (first + k < count) p[k] = fromBits<T>(v >> (8 * sizeof(T) * k));
}

/// v, as a value the compiler cannot see into: a product rounded into v is then never fused with the sum that uses
/// it into one fma, which rounds once and gives other bits than the host's multiply, then add.
__device__ inline uint64_t opaque(uint64_t v) {
#if defined(__CUDACC__)
  asm volatile("" : "+l"(v));
#endif
  return v;
}

/// The scalar of a pre-multiplied sum: from device memory when the call has it there, else from the arguments.
template <typename T>
__device__ inline T premulScalar(const DirectArgs& a) {
  if (a.scalarDevice != nullptr) return *static_cast<const T*>(a.scalarDevice);
  return fromBits<T>(a.scalarBits);
}

/// Block `block` of `nblocks` of rank a.rank's one-shot allreduce. N: the rank count (Exact), or an upper bound
/// on the run-time a.nranks.
template <typename T, ReduceOp Op, int N, bool Exact>
__device__ void oneShotAllReduce(const DirectArgs& a, int block, int nblocks) {
  constexpr uint32_t kPer = 8 / sizeof(T);
  const int n = Exact ? N : a.nranks;
  const int r = a.rank;
  const uint32_t count = static_cast<uint32_t>(a.count);
  const uint32_t lines = static_cast<uint32_t>(directLines(a.count * sizeof(T)));
  Stamps stamps(a, block);
  const uint32_t g = static_cast<uint32_t>(block) * dev::nthreads() + dev::tid();
  const uint32_t stride = static_cast<uint32_t>(nblocks) * dev::nthreads();
  const T* const in = static_cast<const T*>(a.input);
  T* const out = static_cast<T*>(a.output);
  const uint64_t call = callNumber(a);
  if (call > kDirectMaxOneShotCalls) {  // its flags would repeat an old call's (direct_kernels.h)
    if (block == 0 && dev::tid() == 0) recordFailure(a, call, block, -1, collieInvalidUsage, kDirectPastOneShotCalls);
    endLaunch(a, call, nblocks);
    return;
  }
  const uint32_t seq = static_cast<uint32_t>(call);
  const uint64_t flag = static_cast<uint64_t>(seq) << 32;
  // Slot of sender s in any rank's scratch, for this call's parity, in bytes.
  const uint64_t slotBytes = static_cast<uint64_t>(a.slotLines) * kDirectLineBytes;
  const uint64_t parityAt = static_cast<uint64_t>(seq & 1) * n * slotBytes;
  auto own = [&](uint32_t w) {
    uint64_t v = loadLine(in, w * kPer, count);
    if constexpr (Op == ReduceOp::kSum)
      if (a.premul != 0) v = opaque(scaleAll<T>(v, premulScalar<T>(a)));
    return v;
  };

  // Push: every line to every peer, before any wait, so that no peer's wait depends on this rank's.
  for (uint32_t w = g; w < lines; w += stride) {
    const uint64_t v = own(w);
    const uint64_t lo = flag | (v & 0xffffffffu), hi = flag | (v >> 32);
    const uint64_t at = parityAt + r * slotBytes + w * kDirectLineBytes;
    COLLIE_UNROLL
    for (int q = 0; q < N; ++q)
      if (q < n && q != r) dev::storeVolatile128(a.scratch[q] + at, lo, hi);
  }

  // Take: the same lines from every peer, polled together; then the reduction in rank order.
  const uint8_t* const mine = a.scratch[r] + parityAt;
  bool failed = false;
  for (uint32_t w = g; w < lines && !failed; w += stride) {
    uint64_t got[N] = {};
    uint32_t pending = 0;
    COLLIE_UNROLL
    for (int p = 0; p < N; ++p)
      if (p < n) {
        if (p == r)
          got[p] = own(w);
        else
          pending |= 1u << p;
      }
    Wait wait;
    while (pending != 0) {
      COLLIE_UNROLL
      for (int p = 0; p < N; ++p) {
        if (((pending >> p) & 1) == 0) continue;
        uint64_t lo, hi;
        dev::loadVolatile128(mine + p * slotBytes + w * kDirectLineBytes, &lo, &hi);
        if ((lo >> 32) != seq || (hi >> 32) != seq) continue;
        got[p] = (lo & 0xffffffffu) | (hi << 32);
        pending &= ~(1u << p);
      }
      if (pending == 0) break;
      if (const int rc = stopWaiting(a, &wait)) {
        int late = 0;
        while (((pending >> late) & 1) == 0) ++late;
        recordFailure(a, call, block, late, rc);
        failed = true;  // the other threads stop at their own next check
        break;
      }
    }
    if (failed) break;
    stamps.peersCame();
    uint64_t acc = got[0];
    COLLIE_UNROLL
    for (int p = 1; p < N; ++p)
      if (p < n) acc = combine<T, Op>(got[p], acc);
    if (a.divisor > 0) acc = divideAll<T>(acc, a.divisor);
    storeLine(out, w * kPer, count, acc);
  }
  if (!failed) stamps.end(a);
  endLaunch(a, call, nblocks);
}

// ---------------------------------------------------------------- barriers among ranks, per block

/// Block `block`'s record of sender `sender` in rank `owner`'s barrier flags.
__device__ inline uint8_t* barrierRecord(const DirectArgs& a, int owner, int sender, int block) {
  return a.barriers[owner] + (static_cast<uint64_t>(block) * kDirectMaxRanks + sender) * kDirectBarrierRecord;
}

/// Block `block`'s barrier with the same block of every peer at `epoch`: all threads call it together. It announces
/// (release: the block's loads and stores before it are done first; with `publish`, the entry barrier's, this rank's
/// input and output addresses, its signature and its all-to-all-v exchange with the peer go first), then waits for
/// every peer's announcement (acquire: what the peers did before theirs is seen after it). False, with the failure of
/// call `call` recorded, when a wait gave up; the whole block then agrees.
__device__ inline bool rankBarrier(const DirectArgs& a, int n, int block, uint64_t call, uint64_t epoch, bool publish) {
  auto flagAt = [&](int owner, int sender) { return barrierRecord(a, owner, sender, block); };
  dev::sync();  // every thread's moves are done before any announces them
  for (int p = dev::tid(); p < n; p += dev::nthreads()) {
    if (p == a.rank) continue;
    if (publish) {
      storeAs<uint64_t>(flagAt(p, a.rank) + 8, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a.input)));
      storeAs<uint64_t>(flagAt(p, a.rank) + 16, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(a.output)));
      storeAs<uint64_t>(flagAt(p, a.rank) + 24, a.inWindow | static_cast<uint64_t>(a.outWindow) << 32);
      storeAs<uint64_t>(flagAt(p, a.rank) + 32, a.signature);
      storeAs<uint64_t>(flagAt(p, a.rank) + 40, a.recvDispl[p] | static_cast<uint64_t>(a.recvCount[p]) << 32);
      storeAs<uint64_t>(flagAt(p, a.rank) + 48, a.sendCount[p]);
    }
    if (a.gpuScope != 0)
      dev::storeReleaseGpu(flagAt(p, a.rank), epoch);
    else
      dev::storeReleaseSys(flagAt(p, a.rank), epoch);
  }
  // All announcements first, then the waits: a thread with several peers must not hold back its second
  // announcement while it waits for the first peer.
  bool failed = false;
  for (int p = dev::tid(); p < n && !failed; p += dev::nthreads()) {
    if (p == a.rank) continue;
    const uint8_t* const flag = flagAt(a.rank, p);
    Wait wait;
    while ((a.gpuScope != 0 ? dev::loadAcquireGpu(flag) : dev::loadAcquireSys(flag)) < epoch)
      if (const int rc = stopWaiting(a, &wait)) {
        recordFailure(a, call, block, p, rc);
        failed = true;
        break;
      }
  }
  return !dev::syncOr(failed);
}

/// After block `block`'s entry barrier: the first peer whose call's signature differs from this rank's (both
/// given), or -1.
__device__ inline int differingPeer(const DirectArgs& a, int n, int block) {
  if (a.signature == 0) return -1;
  for (int p = 0; p < n; ++p) {
    if (p == a.rank) continue;
    const uint64_t theirs = loadAs<uint64_t>(barrierRecord(a, a.rank, p, block) + 32);
    if (theirs != 0 && theirs != a.signature) return p;
  }
  return -1;
}

/// An address peer `p` announced inside its window `window`, as this rank addresses it (DirectArgs::peerMaps);
/// 0 where this rank has not mapped that window (and for 0: no buffer, a call of nothing).
__device__ inline uint64_t mappedAddress(const DirectArgs& a, int p, uint32_t window, uint64_t address) {
  if (address == 0 || window >= static_cast<uint32_t>(kDirectMaxWindows)) return 0;
  const DirectPeerMap* m = a.peerMaps + static_cast<uint64_t>(window) * kDirectMaxRanks + p;
  const uint64_t local = loadAs<uint64_t>(reinterpret_cast<const uint8_t*>(m) + 8);
  return local == 0 ? 0 : address - loadAs<uint64_t>(reinterpret_cast<const uint8_t*>(m)) + local;
}

/// After block `block`'s entry barrier: every rank's input and output of the call, this rank's from its arguments,
/// its peers' from their records in this rank's flags (translated for peers in other processes). The first peer
/// whose buffers lie in a window this rank has not mapped, or -1. N: the rank count, or a bound on n.
template <int N>
__device__ inline int peerBuffers(const DirectArgs& a, int n, int block, const uint8_t* (&in)[N], uint8_t* (&out)[N]) {
  int unmapped = -1;
  COLLIE_UNROLL
  for (int p = 0; p < N; ++p) {
    if (p >= n) {
      in[p] = nullptr;
      out[p] = nullptr;
    } else if (p == a.rank) {
      in[p] = static_cast<const uint8_t*>(a.input);
      out[p] = static_cast<uint8_t*>(a.output);
    } else {
      const uint8_t* rec = barrierRecord(a, a.rank, p, block);
      uint64_t input = loadAs<uint64_t>(rec + 8), output = loadAs<uint64_t>(rec + 16);
      if ((a.remotePeers >> p & 1) != 0) {
        const uint64_t windows = loadAs<uint64_t>(rec + 24);
        const uint64_t mappedIn = mappedAddress(a, p, static_cast<uint32_t>(windows), input);
        const uint64_t mappedOut = mappedAddress(a, p, static_cast<uint32_t>(windows >> 32), output);
        if (((input != 0 && mappedIn == 0) || (output != 0 && mappedOut == 0)) && unmapped < 0) unmapped = p;
        input = mappedIn;
        output = mappedOut;
      }
      in[p] = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(input));
      out[p] = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(output));
    }
  }
  return unmapped;
}

/// A barrier kernel's block, on every path to the launch's end: the call's number, the entry barrier (the peers'
/// buffers learnt), `move(ins, outs)`, the exit barrier. N: the rank count, or a bound on n. A move that sets
/// *refused to a peer has the call refused there (kDirectCountsDiffer) once the rank's blocks are all through.
template <int N, typename Move>
__device__ inline void barrierCall(const DirectArgs& a, int n, int block, int nblocks, Move move,
                                   const int* refused = nullptr) {
  const uint64_t call = callNumber(a);
  Stamps stamps(a, block);
  if (rankBarrier(a, n, block, call, 2 * call - 1, true)) {
    stamps.peersCame();
    const uint8_t* ins[N];
    uint8_t* outs[N];
    const int unmapped = peerBuffers<N>(a, n, block, ins, outs);
    const int differs = differingPeer(a, n, block);
    if (differs >= 0) {
      // Every rank compares every peer, so where two calls differ every rank stops here: no move, no exit
      // announcement, no wait.
      if (dev::tid() == 0) recordFailure(a, call, block, differs, collieInvalidUsage, kDirectCallsDiffer);
    } else if (unmapped >= 0) {
      // No move and no exit announcement: the peers' waits for it fail the call on every rank (a move without
      // this rank's part would leave their outputs silently wrong).
      if (dev::tid() == 0) recordFailure(a, call, block, unmapped, collieInvalidUsage, kDirectUnmappedWindow);
    } else {
      move(ins, outs);
      if (rankBarrier(a, n, block, call, 2 * call, false)) {
        stamps.end(a);
        if (refused != nullptr && *refused >= 0) {
          endLaunch(a, call, nblocks, *refused, kDirectCountsDiffer);
          return;
        }
      }
    }
  }
  endLaunch(a, call, nblocks);
}

// ---------------------------------------------------------------- moves over many blocks

/// len elements at src(p) for p < ns (at most NS), reduced in rank order, (/ divisor), stored at dst(q) for q < nd
/// (at most ND); NS == 1 copies. Thread g of `stride` threads in all takes every stride-th vector, U vectors at a
/// time, all U x NS loads issued before the first operation. The scalar head (up to the first 16-byte boundary) and
/// tail go element by element, as does all of it when the buffers' addresses differ modulo 16.
template <typename T, ReduceOp Op, int NS, int ND, typename Src, typename Dst>
__device__ inline void moveRange(Src src, int ns, Dst dst, int nd, uint32_t len, int divisor, uint32_t g,
                                 uint32_t stride) {
  constexpr uint32_t kPack = 16 / sizeof(T);
  constexpr int U = NS >= 8 ? 1 : (8 + NS - 1) / NS;
  const uintptr_t mis = reinterpret_cast<uintptr_t>(src(0)) & 15;
  bool same = mis % sizeof(T) == 0;
  COLLIE_UNROLL
  for (int p = 1; p < NS; ++p)
    if (p < ns) same = same && (reinterpret_cast<uintptr_t>(src(p)) & 15) == mis;
  COLLIE_UNROLL
  for (int q = 0; q < ND; ++q)
    if (q < nd) same = same && (reinterpret_cast<uintptr_t>(dst(q)) & 15) == mis;
  uint32_t head = len;
  if (same) {
    const uint32_t toBoundary = static_cast<uint32_t>(((16 - mis) & 15) / sizeof(T));
    head = toBoundary < len ? toBoundary : len;
  }
  const uint32_t vectors = (len - head) / kPack;
  const uint32_t tail = head + vectors * kPack;

  for (uint32_t base = g; base < vectors; base += stride * U) {
    Vec v[U][NS] = {};  // zeroed for GCC: it cannot see that the guards of both loops match
    COLLIE_UNROLL
    for (int u = 0; u < U; ++u) {
      const uint32_t i = base + u * stride;
      COLLIE_UNROLL
      for (int p = 0; p < NS; ++p)
        if (i < vectors && p < ns) v[u][p] = loadAs<Vec>(src(p) + head + i * kPack);
    }
    COLLIE_UNROLL
    for (int u = 0; u < U; ++u) {
      const uint32_t i = base + u * stride;
      if (i >= vectors) break;
      Vec acc = v[u][0];
      COLLIE_UNROLL
      for (int p = 1; p < NS; ++p)
        if (p < ns) acc = combine<T, Op>(v[u][p], acc);
      if (divisor > 0) acc = divideAll<T>(acc, divisor);
      COLLIE_UNROLL
      for (int q = 0; q < ND; ++q)
        if (q < nd) storeAs<Vec>(dst(q) + head + i * kPack, acc);
    }
  }

  const uint32_t extra = head + (len - tail);
  for (uint32_t e = g; e < extra; e += stride) {
    const uint32_t i = e < head ? e : tail + (e - head);
    T acc = src(0)[i];
    COLLIE_UNROLL
    for (int p = 1; p < NS; ++p)
      if (p < ns) acc = applyOp<Op>(src(p)[i], acc);
    if (divisor > 0) acc = divideBy(acc, divisor);
    COLLIE_UNROLL
    for (int q = 0; q < ND; ++q)
      if (q < nd) dst(q)[i] = acc;
  }
}

/// Rank r's chunk of a two-shot allreduce of `count` elements: count / n, the first count % n ranks one more, as
/// balancedChunk (algorithms/program.h) cuts the direct two-shot program the verifier proves.
__device__ inline void twoShotChunk(uint64_t count, int n, int r, uint64_t* begin, uint32_t* len) {
  const uint64_t each = count / n, extra = count % n, rr = static_cast<uint64_t>(r);
  *begin = each * rr + (rr < extra ? rr : extra);
  *len = static_cast<uint32_t>(each + (rr < extra ? 1 : 0));
}

/// Block `block` of `nblocks` of rank a.rank's two-shot allreduce, or with `scatter` its reduce-scatter.
template <typename T, ReduceOp Op, int N, bool Exact>
__device__ void reduceStore(const DirectArgs& a, bool scatter, int block, int nblocks) {
  const int n = Exact ? N : a.nranks;
  const int r = a.rank;
  barrierCall<N>(a, n, block, nblocks, [&](const uint8_t*(&ins)[N], uint8_t*(&outs)[N]) {
    uint64_t srcAt = 0, dstAt = 0;
    uint32_t len = static_cast<uint32_t>(a.count);
    if (scatter) {
      srcAt = static_cast<uint64_t>(r) * a.count;
    } else {
      twoShotChunk(a.count, n, r, &srcAt, &len);
      dstAt = srcAt;
    }
    T* const ownOut = static_cast<T*>(a.output);
    auto src = [&](int p) { return reinterpret_cast<const T*>(ins[p]) + srcAt; };
    auto dst = [&](int q) { return scatter ? ownOut : reinterpret_cast<T*>(outs[q]) + dstAt; };
    moveRange<T, Op, N, N>(src, n, dst, scatter ? 1 : n, len, a.divisor,
                           static_cast<uint32_t>(block) * dev::nthreads() + dev::tid(),
                           static_cast<uint32_t>(nblocks) * dev::nthreads());
  });
}

/// Block `block` of `nblocks` of rank a.rank's allgather, elements moved as words W of their size.
template <typename W, int N>
__device__ void allGather(const DirectArgs& a, int block, int nblocks) {
  barrierCall<N>(a, N, block, nblocks, [&](const uint8_t*(&)[N], uint8_t*(&outs)[N]) {
    const W* const in = static_cast<const W*>(a.input);
    const uint64_t dstAt = static_cast<uint64_t>(a.rank) * a.count;
    auto src = [&](int) { return in; };
    auto dst = [&](int q) { return reinterpret_cast<W*>(outs[q]) + dstAt; };
    moveRange<W, ReduceOp::kSum, 1, N>(src, 1, dst, N, static_cast<uint32_t>(a.count), 0,
                                       static_cast<uint32_t>(block) * dev::nthreads() + dev::tid(),
                                       static_cast<uint32_t>(nblocks) * dev::nthreads());
  });
}

/// Block `block` of `nblocks` of rank a.rank's all-to-all, elements moved as words W of their size: a.count per
/// block, a.nranks blocks in the input and the output.
template <typename W, int N>
__device__ void allToAll(const DirectArgs& a, int block, int nblocks) {
  barrierCall<N>(a, N, block, nblocks, [&](const uint8_t*(&)[N], uint8_t*(&outs)[N]) {
    const int r = a.rank;
    const uint32_t g = static_cast<uint32_t>(block) * dev::nthreads() + dev::tid();
    const uint32_t stride = static_cast<uint32_t>(nblocks) * dev::nthreads();
    COLLIE_UNROLL
    for (int k = 0; k < N; ++k) {
      const int q = r + k < N ? r + k : r + k - N;
      const W* const from = static_cast<const W*>(a.input) + static_cast<uint64_t>(q) * a.count;
      W* const to = reinterpret_cast<W*>(outs[q]) + static_cast<uint64_t>(r) * a.count;
      moveRange<W, ReduceOp::kSum, 1, 1>([&](int) { return from; }, 1, [&](int) { return to; }, 1,
                                         static_cast<uint32_t>(a.count), 0, g, stride);
    }
  });
}

/// Block `block` of `nblocks` of rank a.rank's all-to-all-v, elements moved as words W of their size: rank r stores
/// its block for rank q (a.sendDispl[q], a.sendCount[q] elements) where q announced it lands in its output, for q
/// from r on. A peer whose announced counts differ from this rank's (what it receives from r against
/// a.sendCount[q], what it sends r against a.recvCount[q]) gets nothing from r, and both ranks of that pair refuse
/// the call after the exit barrier; the other pairs' blocks all arrive, as a rank outside the pair cannot know.
template <typename W, int N>
__device__ void allToAllv(const DirectArgs& a, int block, int nblocks) {
  int refused = -1;
  barrierCall<N>(
      a, N, block, nblocks,
      [&](const uint8_t*(&)[N], uint8_t*(&outs)[N]) {
        // a.rank < N (checkDirectLaunch); taken modulo N, a compiler can see that it indexes within bounds.
        const int r = static_cast<int>(static_cast<unsigned>(a.rank) % N);
        const uint32_t g = static_cast<uint32_t>(block) * dev::nthreads() + dev::tid();
        const uint32_t stride = static_cast<uint32_t>(nblocks) * dev::nthreads();
        COLLIE_UNROLL
        for (int k = 0; k < N; ++k) {
          const int q = r + k < N ? r + k : r + k - N;
          uint32_t at = a.recvDispl[r];  // its own block
          if (q != r) {
            const uint8_t* rec = barrierRecord(a, r, q, block);
            const uint64_t theirs = loadAs<uint64_t>(rec + 40);
            const uint32_t theirRecvCount = static_cast<uint32_t>(theirs >> 32);
            const uint32_t theirSendCount = static_cast<uint32_t>(loadAs<uint64_t>(rec + 48));
            if (theirRecvCount != a.sendCount[q] || theirSendCount != a.recvCount[q]) {
              if (refused < 0) refused = q;
              continue;
            }
            at = static_cast<uint32_t>(theirs);
          }
          const W* const from = static_cast<const W*>(a.input) + a.sendDispl[q];
          W* const to = reinterpret_cast<W*>(outs[q]) + at;
          moveRange<W, ReduceOp::kSum, 1, 1>([&](int) { return from; }, 1, [&](int) { return to; }, 1, a.sendCount[q],
                                             0, g, stride);
        }
      },
      &refused);
}

/// Block `block` of `nblocks` of rank a.rank's broadcast from rank a.root, elements moved as words W of their size.
template <typename W, int N>
__device__ void broadcast(const DirectArgs& a, int block, int nblocks) {
  barrierCall<N>(a, N, block, nblocks, [&](const uint8_t*(&ins)[N], uint8_t*(&outs)[N]) {
    uint64_t begin = 0;
    uint32_t len = 0;
    twoShotChunk(a.count, N, a.rank, &begin, &len);
    const W* const from = reinterpret_cast<const W*>(ins[a.root]) + begin;
    // A root in place already holds its chunk: its output is left out rather than rewritten with the same bytes.
    const int skip = ins[a.root] == outs[a.root] ? a.root : N;
    auto to = [&](int i) { return reinterpret_cast<W*>(outs[i < skip ? i : i + 1]) + begin; };
    moveRange<W, ReduceOp::kSum, 1, N>([&](int) { return from; }, 1, to, skip < N ? N - 1 : N, len, 0,
                                       static_cast<uint32_t>(block) * dev::nthreads() + dev::tid(),
                                       static_cast<uint32_t>(nblocks) * dev::nthreads());
  });
}

/// The kinds that move words (direct_kernels.h, directMovesWords), by `kind`: one body for the GPU's kernel per
/// element size and the emulation alike.
template <typename W, int N>
__device__ void moveWords(const DirectArgs& a, DirectKind kind, int block, int nblocks) {
  if (kind == DirectKind::kAllGather)
    allGather<W, N>(a, block, nblocks);
  else if (kind == DirectKind::kAllToAll)
    allToAll<W, N>(a, block, nblocks);
  else if (kind == DirectKind::kAllToAllv)
    allToAllv<W, N>(a, block, nblocks);
  else
    broadcast<W, N>(a, block, nblocks);
}

}  // namespace direct
}  // namespace collie
