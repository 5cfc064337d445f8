// The GPU's primitives for the shared step runner (executor/step_runner.h):
// all threads of a block call each one together. Thread 0 alone polls and
// posts flags; barriers hand its result to the block and order the block's
// data moves before and after it. Flags use acquire/release at system scope,
// which is right for P2P peers, other processes and a proxy's host thread,
// and at GPU scope between ranks that are threads of one process on one GPU
// (KernelArgs::gpuScopePeers), whose releases then need not wait for the
// whole system.
#pragma once

#include <cstdint>
#include <cstring>

#include "executor/protocol.h"
#include "executor/reduce_ops.h"
#include "kernels/device_ops.cuh"
#include "kernels/launch.h"

namespace collie {

/// Element-wise moves by all threads of a block, with 16-byte vectors where
/// every pointer allows it (the common case: slots and cudaMalloc buffers are
/// aligned) and one element per thread otherwise.
///
/// Each thread issues kLoadsInFlight 16-byte loads before it stores anything.
/// A loop of one load and one store per pass keeps a single load per thread in
/// flight, because the compiler must assume the store may alias the next
/// pass's load: 8 KiB per 512-thread block at a time, which at device-memory
/// latency (under a microsecond) holds a channel to about 10 GB/s. Four loads,
/// not more: with eight, ptxas -v (sm_90) reports spilled registers in these
/// functions, with four none. Data travels as words (Raw): as arrays of 1-byte
/// elements the compiler splits each vector into bytes. Divisions (avg's last
/// writes) go one vector at a time.
template <typename T, ReduceOp Op>
struct BlockMoves {
  static constexpr int kPack = 16 / sizeof(T);
  static constexpr int kLoadsInFlight = 4;
  struct alignas(16) Raw {
    uint32_t w[4];
  };
  struct alignas(16) Pack {
    T v[kPack];
  };

  __device__ static bool aligned(const void* a, const void* b, const void* c) {
    return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c)) & 15) ==
           0;
  }
  __device__ static T finish(T v, int divisor) { return divisor > 0 ? divideBy(v, divisor) : v; }

  // dst = src (/ divisor); dst may be src
  __device__ static COLLIE_NOINLINE void copy(T* dst, const T* src, uint64_t n, int divisor) {
    if (divisor <= 0 && dst == src) return;
    uint64_t i0 = 0;
    if (aligned(dst, src, src)) {
      const uint64_t packs = n / kPack;
      const Raw* s = reinterpret_cast<const Raw*>(src);
      Raw* d = reinterpret_cast<Raw*>(dst);
      if (divisor > 0) {
        for (uint64_t i = dev::tid(); i < packs; i += dev::nthreads()) d[i] = divide(s[i], divisor);
      } else {
        passes<kLoadsInFlight, Raw>(
            packs, [&](uint64_t i) { return s[i]; }, [&](uint64_t i, const Raw& r) { d[i] = r; });
      }
      i0 = packs * kPack;
    }
    for (uint64_t i = i0 + dev::tid(); i < n; i += dev::nthreads()) dst[i] = finish(src[i], divisor);
  }

  // dst1 = src, dst2 = src (/ divisor); without a division, one read of src for both. dst2 may be src (a
  // block already in place, as copy's dst): then only dst1 is written.
  __device__ static COLLIE_NOINLINE void copy2(T* dst1, T* dst2, const T* src, uint64_t n, int divisor) {
    if (divisor > 0 || dst2 == src || !aligned(dst1, dst2, src)) {
      copy(dst1, src, n, 0);
      copy(dst2, src, n, divisor);
      return;
    }
    const uint64_t packs = n / kPack;
    const Raw* s = reinterpret_cast<const Raw*>(src);
    Raw* d1 = reinterpret_cast<Raw*>(dst1);
    Raw* d2 = reinterpret_cast<Raw*>(dst2);
    passes<kLoadsInFlight, Raw>(
        packs, [&](uint64_t i) { return s[i]; },
        [&](uint64_t i, const Raw& r) {
          d1[i] = r;
          d2[i] = r;
        });
    for (uint64_t i = packs * kPack + dev::tid(); i < n; i += dev::nthreads()) {
      const T v = src[i];
      dst1[i] = v;
      dst2[i] = v;
    }
  }

  // dst = a (op) b (/ divisor); dst may be b
  __device__ static COLLIE_NOINLINE void reduce(T* dst, const T* a, const T* b, uint64_t n, int divisor) {
    uint64_t i0 = 0;
    if (aligned(dst, a, b)) {
      const uint64_t packs = n / kPack;
      const Raw* pa = reinterpret_cast<const Raw*>(a);
      const Raw* pb = reinterpret_cast<const Raw*>(b);
      Raw* d = reinterpret_cast<Raw*>(dst);
      if (divisor > 0) {
        for (uint64_t i = dev::tid(); i < packs; i += dev::nthreads()) d[i] = divide(apply(pa[i], pb[i]), divisor);
      } else {
        struct Operands {
          Raw x, y;
        };
        passes<kLoadsInFlight / 2, Operands>(  // two loads per result
            packs,
            [&](uint64_t i) {
              return Operands{pa[i], pb[i]};
            },
            [&](uint64_t i, const Operands& o) { d[i] = apply(o.x, o.y); });
      }
      i0 = packs * kPack;
    }
    for (uint64_t i = i0 + dev::tid(); i < n; i += dev::nthreads()) dst[i] = finish(applyOp<Op>(a[i], b[i]), divisor);
  }

  // dst = (((base (op) ins[0]) (op) ins[1]) ...) (/ divisor), m <= kMaxJoinedSteps inputs; base may be dst. The
  // operands in the order m reduce() calls of the steps one after another take them, so the same bits. Each
  // vector of base and of every input is loaded once and dst stored once: a group of joined steps (program.h)
  // moves m + 2 vectors per result where m reduces moved 3m. All m + 1 loads go out before the first operation,
  // as in passes().
  __device__ static COLLIE_NOINLINE void reduceMany(T* dst, const T* base, const T* const* ins, int m, uint64_t n,
                                                    int divisor) {
    bool vectors = aligned(dst, base, base);
    for (int j = 0; j < m; ++j) vectors = vectors && aligned(ins[j], ins[j], ins[j]);
    uint64_t i0 = 0;
    if (vectors) {
      const uint64_t packs = n / kPack;
      const Raw* b = reinterpret_cast<const Raw*>(base);
      Raw* d = reinterpret_cast<Raw*>(dst);
      for (uint64_t i = dev::tid(); i < packs; i += dev::nthreads()) {
        Raw v[kMaxJoinedSteps] = {};  // zeroed for GCC, as in passes()
        COLLIE_UNROLL
        for (int j = 0; j < kMaxJoinedSteps; ++j)
          if (j < m) v[j] = reinterpret_cast<const Raw*>(ins[j])[i];
        Raw acc = b[i];
        COLLIE_UNROLL
        for (int j = 0; j < kMaxJoinedSteps; ++j)
          if (j < m) acc = apply(v[j], acc);
        d[i] = divisor > 0 ? divide(acc, divisor) : acc;
      }
      i0 = packs * kPack;
    }
    for (uint64_t i = i0 + dev::tid(); i < n; i += dev::nthreads()) {
      T acc = base[i];
      for (int j = 0; j < m; ++j) acc = applyOp<Op>(ins[j][i], acc);
      dst[i] = finish(acc, divisor);
    }
  }

  // dst1 = dst2 = a (op) b (/ divisor); dst2 may be b. Without a division, one read of a and b for both writes.
  // Otherwise (avg's last write, or pointers not 16-byte aligned) two reductions, dst1's first: each thread then
  // reads only what no thread has written yet, so the two need no barrier between them whatever their vectors.
  __device__ static COLLIE_NOINLINE void reduce2(T* dst1, T* dst2, const T* a, const T* b, uint64_t n, int divisor) {
    if (divisor > 0 || !aligned(dst1, a, b) || !aligned(dst2, dst2, dst2)) {
      reduce(dst1, a, b, n, divisor);
      reduce(dst2, a, b, n, divisor);
      return;
    }
    struct Operands {
      Raw x, y;
    };
    const uint64_t packs = n / kPack;
    const Raw* pa = reinterpret_cast<const Raw*>(a);
    const Raw* pb = reinterpret_cast<const Raw*>(b);
    Raw* d1 = reinterpret_cast<Raw*>(dst1);
    Raw* d2 = reinterpret_cast<Raw*>(dst2);
    passes<kLoadsInFlight / 2, Operands>(
        packs,
        [&](uint64_t i) {
          return Operands{pa[i], pb[i]};
        },
        [&](uint64_t i, const Operands& o) {
          const Raw r = apply(o.x, o.y);
          d1[i] = r;
          d2[i] = r;
        });
    for (uint64_t i = packs * kPack + dev::tid(); i < n; i += dev::nthreads()) {
      const T v = applyOp<Op>(a[i], b[i]);
      dst1[i] = v;
      dst2[i] = v;
    }
  }

 private:
  // Vectors 0..packs-1 in passes of the block's threads: each thread loads U (load(i)) before it stores any
  // (store(i, v)), the same indices in both halves, so a store may overwrite what its own load read.
  template <int U, typename V, typename Load, typename Store>
  __device__ static void passes(uint64_t packs, Load load, Store store) {
    const uint64_t stride = static_cast<uint64_t>(dev::nthreads());
    for (uint64_t base = static_cast<uint64_t>(dev::tid()); base < packs; base += stride * U) {
      V v[U] = {};  // zeroed for GCC: it cannot see that the guards of both loops match
      COLLIE_UNROLL
      for (int u = 0; u < U; ++u)
        if (base + u * stride < packs) v[u] = load(base + u * stride);
      COLLIE_UNROLL
      for (int u = 0; u < U; ++u)
        if (base + u * stride < packs) store(base + u * stride, v[u]);
    }
  }
  __device__ static Raw apply(const Raw& rx, const Raw& ry) {
    Pack x, y;
    memcpy(&x, &rx, sizeof(x));
    memcpy(&y, &ry, sizeof(y));
    COLLIE_UNROLL
    for (int k = 0; k < kPack; ++k) y.v[k] = applyOp<Op>(x.v[k], y.v[k]);
    Raw out;
    memcpy(&out, &y, sizeof(out));
    return out;
  }
  __device__ static Raw divide(const Raw& r, int divisor) {
    Pack p;
    memcpy(&p, &r, sizeof(p));
    COLLIE_UNROLL
    for (int k = 0; k < kPack; ++k) p.v[k] = divideBy(p.v[k], divisor);
    Raw out;
    memcpy(&out, &p, sizeof(out));
    return out;
  }
};

/// A flag between us and `peer` (its ready or credit counter) at the narrowest scope both sides share: GPU scope
/// where the peer is a thread of this process on this GPU, or this rank (KernelArgs::gpuScopePeers).
__device__ inline bool gpuScope(const KernelArgs& a, int peer) {
  return peer < 64 && ((a.gpuScopePeers >> peer) & 1) != 0;
}
__device__ inline uint64_t acquireFlag(const KernelArgs& a, int peer, const uint8_t* p) {
  return gpuScope(a, peer) ? dev::loadAcquireGpu(p) : dev::loadAcquireSys(p);
}
__device__ inline void releaseFlag(const KernelArgs& a, int peer, uint8_t* p, uint64_t v) {
  if (gpuScope(a, peer)) {
    dev::storeReleaseGpu(p, v);
  } else {
    dev::storeReleaseSys(p, v);
  }
}

/// Whether `peer` refused a call (its window's kRefusedOffset, executor/protocol.h): it runs nothing more, so
/// nothing waited for from it comes. A proxy's outbox, which stands where a peer on another host's window would
/// be, reads 0 there.
__device__ inline bool peerRefused(const KernelArgs& a, int peer) {
  return peer >= 0 && peer != a.rank && dev::loadVolatile64(a.windows[peer] + kRefusedOffset) != 0;
}

/// Whether `peer`'s kernels failed a call (its window's kFailedOffset, executor/protocol.h): it runs nothing more.
/// A proxy's outbox reads 0 there.
__device__ inline bool peerFailed(const KernelArgs& a, int peer) {
  return peer >= 0 && peer != a.rank && dev::loadVolatile64(a.windows[peer] + kFailedOffset) != 0;
}

/// Thread 0, every 1024 polls of a wait on `peer` and `other` (-1: none), with either protocol: why it stops
/// waiting, or 0. In this order: one of them refused a call and runs nothing more (collieInvalidUsage, *refuser
/// names it); one of them failed first, its process exited (DeviceStatus::exited) or the proxy lost it, the
/// host aborted, or another block of this rank failed (collieRemoteError); the deadline passed
/// (collieTimeout). The loads are not free, hence not every poll.
__device__ inline int stopWaiting(const KernelArgs& a, uint64_t deadline, int peer, int other, int* refuser) {
  const int who[2] = {peer, other};
  for (int x : who)
    if (peerRefused(a, x)) {
      *refuser = x;
      return collieInvalidUsage;
    }
  const uint64_t exited = a.status->exited;
  for (int x : who)
    if (peerFailed(a, x) || (x >= 0 && x < 64 && ((exited >> x) & 1) != 0)) return collieRemoteError;
  if (dev::loadFlag(&a.status->abort) != 0 || dev::loadFlag(a.failed) != 0) return collieRemoteError;
  // A proxy's flags, one per peer on another host (null without a proxy, and so always with LL).
  if (a.lost != nullptr)
    for (int x : who)
      if (x >= 0 && dev::loadFlag(a.lost + x) != 0) return collieRemoteError;
  return dev::globalTimerNs() > deadline ? collieTimeout : 0;
}

/// COLLIE_KERNEL_TIMING: thread 0 adds the time of each step, and the part of it spent waiting, to the launch's
/// sums (kernels/launch.h, kPhaseStepTime). Does nothing when the launch is not timed.
class StepClock {
 public:
  __device__ explicit StepClock(const KernelArgs& a) : sums_(dev::tid() == 0 ? a.phaseNs : nullptr) {
    if (sums_ != nullptr) last_ = dev::globalTimerNs();
  }
  /// `waitedNs`: thread 0's waiting so far, the primitives' waitedNs().
  __device__ void stepDone(int si, uint64_t waitedNs) {
    if (sums_ == nullptr) return;
    const uint64_t now = dev::globalTimerNs();
    const int k = si < kTimedSteps ? si : kTimedSteps - 1;
    dev::addCount(sums_ + kPhaseStepTime + k, now - last_);
    dev::addCount(sums_ + kPhaseStepWait + k, waitedNs - waitedBefore_);
    last_ = now;
    waitedBefore_ = waitedNs;
  }

 private:
  uint64_t* sums_;
  uint64_t last_ = 0, waitedBefore_ = 0;
};

/// COLLIE_KERNEL_TIMING: thread 0 adds the time of the enclosing scope, one primitive's call, to one of the
/// primitives' part sums (posting, taking, moving: kernels/launch.h, kPhasePost); the other threads and an untimed
/// launch read no clock.
class PhaseSpan {
 public:
  __device__ PhaseSpan(bool timed, uint64_t* sum) : sum_(timed ? sum : nullptr) {
    if (sum_ != nullptr) start_ = dev::globalTimerNs();
  }
  __device__ ~PhaseSpan() {
    if (sum_ != nullptr) *sum_ += dev::globalTimerNs() - start_;
  }
  PhaseSpan(const PhaseSpan&) = delete;
  PhaseSpan& operator=(const PhaseSpan&) = delete;

 private:
  uint64_t* sum_;
  uint64_t start_ = 0;
};

/// What both protocols' primitives share: the block's element moves, and thread 0's time in the primitives by
/// part (COLLIE_KERNEL_TIMING; kernels/launch.h, kPhasePost). DevicePrims and DevicePrimsLL derive from it and open
/// a span of their posting and taking calls.
template <typename T, ReduceOp Op>
class TimedMoves {
 public:
  __device__ explicit TimedMoves(const KernelArgs& a) : timed_(a.phaseNs != nullptr && dev::tid() == 0) {}

  /// Thread 0's time in posting, taking (its waiting included) and moving, with COLLIE_KERNEL_TIMING; else 0.
  __device__ uint64_t postNs() const { return postNs_; }
  __device__ uint64_t takeNs() const { return takeNs_; }
  __device__ uint64_t movesNs() const { return movesNs_; }

  __device__ void copy(T* dst, const T* src, uint64_t n, int divisor) {
    PhaseSpan span(timed_, &movesNs_);
    BlockMoves<T, Op>::copy(dst, src, n, divisor);
  }
  __device__ void reduce(T* dst, const T* a, const T* b, uint64_t n, int divisor) {
    PhaseSpan span(timed_, &movesNs_);
    BlockMoves<T, Op>::reduce(dst, a, b, n, divisor);
  }
  __device__ void copy2(T* dst1, T* dst2, const T* src, uint64_t n, int divisor) {
    PhaseSpan span(timed_, &movesNs_);
    BlockMoves<T, Op>::copy2(dst1, dst2, src, n, divisor);
  }
  __device__ void reduce2(T* dst1, T* dst2, const T* a, const T* b, uint64_t n, int divisor) {
    PhaseSpan span(timed_, &movesNs_);
    BlockMoves<T, Op>::reduce2(dst1, dst2, a, b, n, divisor);
  }
  __device__ void reduceMany(T* dst, const T* base, const T* const* ins, int m, uint64_t n, int divisor) {
    PhaseSpan span(timed_, &movesNs_);
    BlockMoves<T, Op>::reduceMany(dst, base, ins, m, n, divisor);
  }

 protected:
  /// A span of a posting call (room, post, sendTogether) or of a taking call (arrived, waitArrived, release).
  __device__ PhaseSpan posting() { return PhaseSpan(timed_, &postNs_); }
  __device__ PhaseSpan taking() { return PhaseSpan(timed_, &takeNs_); }

 private:
  bool timed_;  // thread 0 of a timed launch
  uint64_t postNs_ = 0, takeNs_ = 0, movesNs_ = 0;
};

/// Thread 0's `v` (a wait's result: 0 almost always), seen by every thread of
/// the block: one barrier when it is 0, three otherwise. `shared` is one int of
/// shared memory.
__device__ inline int fromThread0(int v, int* shared) {
  if (!dev::syncOr(dev::tid() == 0 && v != 0)) return 0;
  if (dev::tid() == 0) *shared = v;
  dev::sync();
  const int out = *shared;
  dev::sync();
  return out;
}

template <typename T, ReduceOp Op>
class DevicePrims : public TimedMoves<T, Op> {
 public:
  // A peer that is a thread of this process on this GPU may read a slice in place, from the sender's buffer
  // (executor/direct_sends.h): each slice posted to it carries a source word (executor/protocol.h).
  static constexpr bool kReadsInPlace = true;
  // A group of joined steps (program.h) runs as one: every receive's slot stays until all have arrived.
  static constexpr bool kJoinsReceives = true;

  /// `counters` points at this block's shared copy: posted[n], consumed[n],
  /// the credits thread 0 has seen, then clean[n] (program_block.cuh). `shared`
  /// is one int of shared memory for handing thread 0's answers out.
  __device__ DevicePrims(const KernelArgs& a, int channel, uint64_t* counters, int* shared)
      : TimedMoves<T, Op>(a),
        a_(a),
        channel_(channel),
        posted_(counters),
        consumed_(counters + a.layout.nranks),
        credited_(counters + 2 * a.layout.nranks),
        clean_(counters + 3 * a.layout.nranks),
        shared_(shared),
        clock_(a) {}

  // The slice's size (n) is for LL, whose receiver waits on each line; here one flag says the whole slice is in.
  __device__ bool arrived(int p, uint64_t) {
    PhaseSpan span = this->taking();
    return dev::syncOr(dev::tid() == 0 && pollArrived(p));
  }
  __device__ bool room(int q) {
    PhaseSpan span = this->posting();
    return dev::syncOr(dev::tid() == 0 && pollRoom(q));
  }
  __device__ int waitArrived(int p, uint64_t) {
    PhaseSpan span = this->taking();
    return wait(false, 0, true, p);
  }
  __device__ int waitRoom(int q) { return wait(true, q, false, 0); }
  __device__ int waitEither(bool sending, int q, bool receiving, int p) { return wait(sending, q, receiving, p); }

  // Where the slice lies: in its slot, or where the sender's source word says. Every thread loads the word
  // itself, after the barrier that follows thread 0's acquire of the ready flag, as it loads slot data.
  __device__ const T* inSlot(int p) const {
    if (readsInPlace(p)) {
      const uint64_t source = dev::loadVolatile64(a_.inboxes[p] + a_.layout.sourceOffset(channel_, p, consumed_[p]));
      if (source != 0) return reinterpret_cast<const T*>(static_cast<uintptr_t>(source));
    }
    return reinterpret_cast<const T*>(a_.inboxes[p] + a_.layout.slotOffset(channel_, p, consumed_[p]));
  }
  // The next post to q hands over `data`, in our buffer, instead of a filled slot. The drain that ends the
  // launch waits until q has credited it, so the caller's next work cannot change it under q's loads.
  __device__ void expose(int, const T* data) { exposed_ = data; }
  __device__ T* outSlot(int q) const {
    return reinterpret_cast<T*>(a_.windows[q] + a_.layout.slotOffset(channel_, a_.rank, posted_[q]));
  }
  // The block's reads of the slot are done before thread 0 hands it back.
  __device__ void release(int p) {
    PhaseSpan span = this->taking();
    dev::sync();
    if (dev::tid() == 0) releaseFlag(a_, p, a_.windows[p] + a_.layout.creditOffset(channel_, a_.rank), ++consumed_[p]);
    dev::sync();
  }
  // The block's writes into the slot are done, and visible to q (system-wide,
  // or on this GPU for a peer here), before thread 0 publishes the slice. Half a period of LL flags after the
  // LL slots to q were last rewritten, they are rewritten again first
  // (device_prims_ll.cuh, "Stale lines"), so that a receiver's next LL slice
  // never finds a line old enough to repeat its flag.
  __device__ void post(int q, uint64_t n) {
    PhaseSpan span = this->posting();
    const uint64_t seq = posted_[q];  // read by every thread before the barrier after which thread 0 advances it
    const bool rewrite = a_.lost == nullptr && a_.layout.llSlotBytes > 0 &&  // LL off with a proxy
                         seq - clean_[q] >= llStaleAfter(a_.layout.llFlagPeriod);
    if (rewrite) {
      // Every LL slot to q is free: this launch runs Simple, and the last LL launch drained.
      // Tag 0: the slice part alone keeps every expected flag off these lines.
      const uint64_t line = static_cast<uint64_t>(llFlag(seq - 1, a_.layout.llFlagPeriod, 0)) << 32;
      const uint64_t lines = static_cast<uint64_t>(a_.layout.nslots) * (a_.layout.llSlotBytes / kLLLine);
      uint8_t* const slots = a_.windows[q] + a_.layout.llSlotOffset(channel_, a_.rank, 0);  // a connection's slots
      for (uint64_t w = dev::tid(); w < lines; w += dev::nthreads()) dev::storeVolatile64(slots + kLLLine * w, line);
    }
    dev::sync();
    if (dev::tid() == 0) {
      if (rewrite) clean_[q] = seq;
      // A proxy (peer on another host) sends only the bytes recorded here; null when there is none.
      if (a_.sliceBytes != nullptr)
        a_.sliceBytes[a_.layout.connection(channel_, q) * a_.layout.nslots + posted_[q] % a_.layout.nslots] =
            n * sizeof(T);
      // The release store is the fence: it is a fence.acq_rel (.sys, or .gpu to a peer on this GPU) and a
      // relaxed store, which orders the whole block's writes (handed to thread 0 by the barrier above) before
      // the counter, as NCCL's Simple posts do.
      // COLLIE_DEV_SYSTEM_FENCE=1 adds a full fence (membar.sys) before it, to measure what that would cost.
      // The source word goes before the flag that publishes it: 0 for a slice in the slot, which also
      // overwrites what an earlier slice through this slot handed over in place.
      // From the first slice handed over in place, every post of this launch to q says so (kFlagInPlace), so
      // that q announces its reading before it takes one (protocol.h, "Giving up").
      // The slice is signed with the launch's call, published by the same release (sameCall).
      // Not through a proxy, which forwards slots and counters only (its peer takes unsigned slices): the store
      // would cross PCIe into its pinned outbox for nothing.
      if (!viaProxy(q))
        dev::storeVolatile64(a_.windows[q] + a_.layout.signatureOffset(channel_, a_.rank, seq), a_.callSignature);
      if (readsInPlace(q)) {
        dev::storeVolatile64(a_.windows[q] + a_.layout.sourceOffset(channel_, a_.rank, seq),
                             static_cast<uint64_t>(reinterpret_cast<uintptr_t>(exposed_)));
        if (exposed_ != nullptr) exposedTo_ |= uint64_t{1} << q;
      }
      if (a_.systemFence) dev::fenceSystem();
      const uint64_t inPlace = ((exposedTo_ >> q) & 1) != 0 ? kFlagInPlace : 0;
      releaseFlag(a_, q, a_.windows[q] + a_.layout.readyOffset(channel_, a_.rank), ++posted_[q] | inPlace);
    }
    exposed_ = nullptr;
    dev::sync();
  }

  /// Waits until every slice this block posted has been consumed (credited).
  /// A launch ends with it, so once a rank's last launch has finished no peer
  /// will write into its window again and destroy can free it without asking
  /// the peers. 0, or collieTimeout / collieRemoteError; `*peer` names the late one. Peers whose credits
  /// thread 0 has already seen cover everything posted to them (every peer this launch sent nothing to) cost no
  /// load, so a drain does not pay one system-scope load per rank of the communicator, in sequence, every call.
  __device__ int drain(int* peer) {
    int rc = 0;
    if (dev::tid() == 0) {
      for (int q = 0; q < static_cast<int>(a_.layout.nranks) && rc == 0; ++q) {
        if (credited_[q] >= posted_[q]) continue;
        const uint8_t* credit = a_.inboxes[q] + a_.layout.creditOffset(channel_, q);
        // A credit with kFlagWithdrawn (a reader that gave up and reads nothing more) passes too: what is
        // drained is every read of what we posted, not the peer's success.
        if ((credited_[q] = acquireFlag(a_, q, credit)) >= posted_[q]) continue;
        const uint64_t deadline = dev::globalTimerNs() + a_.timeoutNs;
        for (uint32_t i = 0; acquireFlag(a_, q, credit) < posted_[q]; ++i) {
          if ((i & 1023) != 1023) continue;
          if ((rc = stop(deadline, q, -1)) != 0) {
            *peer = q;
            break;
          }
        }
      }
    }
    return fromThread0(rc, shared_);
  }

  /// Thread 0 only, once the block has failed (its other threads are past their last read): the block gives up
  /// its part of the launch without leaving a peer that reads in place in memory its owner may free now
  /// (protocol.h, "Giving up"). First it tells each such peer that it reads nothing more of what the peer
  /// posted, so that a peer giving up as well never waits for it; then it withdraws what it posted to each,
  /// and waits, up to COLLIE_TIMEOUT, for every peer that may be reading one of this launch's slices in place
  /// to credit what it takes or give up in turn. Its own abort does not cut that wait short: the wait is what
  /// keeps the peer off freed memory.
  __device__ void giveUp() {
    const int n = static_cast<int>(a_.layout.nranks);
    for (int p = 0; p < n; ++p)
      if (p != a_.rank && readsInPlace(p))
        dev::storeReleaseGpu(a_.windows[p] + a_.layout.creditOffset(channel_, a_.rank), consumed_[p] | kFlagWithdrawn);
    for (int q = 0; q < n; ++q)
      if (q != a_.rank && readsInPlace(q))
        dev::storeReleaseGpu(a_.windows[q] + a_.layout.readyOffset(channel_, a_.rank), posted_[q] | kFlagWithdrawn);
    dev::fenceSeqCstGpu();
    const uint64_t deadline = dev::globalTimerNs() + a_.timeoutNs;
    for (int q = 0; q < n; ++q) {
      if (q == a_.rank || !readsInPlace(q)) continue;
      // The launch's slices to q are numbered from what the block posted before it (the counters in device
      // memory are written back only by a launch that succeeds); q's mark names one of them once q reads.
      const uint64_t before = a_.counters[static_cast<size_t>(channel_) * n + q];
      const uint8_t* mine = a_.windows[a_.rank];
      if (dev::loadAcquireGpu(mine + a_.layout.readingOffset(channel_, q)) <= before) continue;
      for (;;) {
        const uint64_t credit = dev::loadAcquireGpu(mine + a_.layout.creditOffset(channel_, q));
        if ((credit & kFlagWithdrawn) != 0 || credit >= posted_[q] || dev::globalTimerNs() > deadline) break;
      }
    }
  }
  /// Thread 0 only: whether `peer` gave up (withdrew what it posted to this block, or stopped reading what this
  /// block posted) as this block's waits saw.
  __device__ bool gaveUp(int peer) const { return peer >= 0 && peer < 64 && ((gone_ >> peer) & 1) != 0; }
  /// Thread 0 only, after a wait failed with collieInvalidUsage: the signature of the slice that belonged to
  /// another call (sameCall), or 0 where the peer had refused first (refused).
  __device__ uint64_t theirs(int) const { return theirs_; }

  /// Thread 0's time polling in wait(), with COLLIE_KERNEL_TIMING (kernels/launch.h, KernelPhase); else 0.
  __device__ uint64_t waitedNs() const { return waitedNs_; }
  __device__ void localDone() { dev::sync(); }
  __device__ void stepDone(int si) { clock_.stepDone(si, waitedNs_); }

 private:
  // Thread 0 only. From a peer that may hand slices over in place, a withdrawn counter is never a slice (the
  // wait that polled fails), and the first slice taken while the launch's counter says kFlagInPlace is taken
  // only after the mark (protocol.h, "Giving up"): the peer, giving up, then waits for its credit.
  __device__ bool pollArrived(int p) {
    const uint8_t* ready = a_.inboxes[p] + a_.layout.readyOffset(channel_, p);
    const uint64_t v = acquireFlag(a_, p, ready);
    if (postedWithOtherProtocol(consumed_[p], v, false)) {
      // p's call posted this slice as LL (protocol.h, kFlagLL): its size differs. The slot holds nothing of it,
      // and a signature left there by an earlier Simple slice could even pass sameCall.
      differs_ = p;
      theirs_ = kAnotherCall;
      return false;
    }
    if (!readsInPlace(p)) return sliceReady(consumed_[p], v & kFlagCount) && sameCall(p);
    const uint64_t bit = uint64_t{1} << p;
    if ((v & kFlagWithdrawn) != 0) gone_ |= bit;
    if ((gone_ & bit) != 0 || !sliceReady(consumed_[p], v & kFlagCount) || !sameCall(p)) return false;
    if ((v & kFlagInPlace) != 0 && (marked_ & bit) == 0) {
      marked_ |= bit;
      dev::storeReleaseGpu(a_.windows[p] + a_.layout.readingOffset(channel_, a_.rank), consumed_[p] + 1);
      dev::fenceSeqCstGpu();
      if ((dev::loadAcquireGpu(ready) & kFlagWithdrawn) != 0) {
        gone_ |= bit;
        return false;
      }
    }
    return true;
  }
  // Thread 0 only, once p's next slice has arrived: whether it belongs to this launch's call. Only the first
  // slice a block takes from each peer in a launch is compared. Ranks whose first slices agree made the same
  // call (collective, type, operator, count, root and algorithm), so they cut it into the same slices, and every
  // later slice of the launch from that peer belongs to it too: the check costs one load per peer and launch,
  // not one per slice. A slice signed 0 comes through a proxy's inbox (never signed) or a slot nothing has
  // signed yet, and is taken as the host executor takes it. (An LL post signs nothing: a Simple receiver that
  // meets one, as only ranks whose calls differ do, reads whatever an earlier slice left in the word, and refuses
  // unless that is 0.) Else the slice is left untaken, and the wait fails with collieInvalidUsage.
  __device__ bool sameCall(int p) {
    if (differs_ >= 0) return false;
    if (a_.callSignature == kPointToPoint) return true;
    if (p < 64 && ((checked_ >> p) & 1) != 0) return true;
    const uint64_t theirs = dev::loadVolatile64(a_.inboxes[p] + a_.layout.signatureOffset(channel_, p, consumed_[p]));
    if (theirs != 0 && theirs != a_.callSignature) {
      differs_ = p;
      theirs_ = theirs;
      return false;
    }
    if (p < 64) checked_ |= uint64_t{1} << p;
    return true;
  }
  // Thread 0 only: whether `peer` refused a call (peerRefused); if so, the failure names it.
  __device__ bool refused(int peer) {
    if (!peerRefused(a_, peer)) return false;
    differs_ = peer;
    theirs_ = 0;
    return true;
  }
  // Thread 0 only. Room the credits seen before already show (the last launch's drain saw every slice
  // credited) needs no load: one round trip fewer for most sends. A reader that gave up has no room.
  __device__ bool pollRoom(int q) {
    if (slotFree(posted_[q], credited_[q], a_.layout.nslots)) return true;
    const uint64_t credit = acquireFlag(a_, q, a_.inboxes[q] + a_.layout.creditOffset(channel_, q));
    if (readsInPlace(q) && (credit & kFlagWithdrawn) != 0) {
      gone_ |= uint64_t{1} << q;
      return false;
    }
    credited_[q] = credit;
    return slotFree(posted_[q], credited_[q], a_.layout.nslots);
  }
  // Whether slices between us and `peer` carry a source word (KernelArgs::readsInPlace).
  __device__ bool readsInPlace(int peer) const { return peer < 64 && ((a_.readsInPlace >> peer) & 1) != 0; }
  // Whether `peer` is on another host: its slices go through the proxy's outbox, its own through the proxy's
  // inbox instead of our window. No load without a proxy.
  __device__ bool viaProxy(int peer) const { return a_.lost != nullptr && a_.inboxes[peer] != a_.windows[a_.rank]; }
  // Thread 0: stopWaiting, with the peer that refused first named in the failure (theirs() 0).
  __device__ int stop(uint64_t deadline, int peer, int other) {
    int refuser = -1;
    const int rc = stopWaiting(a_, deadline, peer, other, &refuser);
    if (rc == collieInvalidUsage) {
      differs_ = refuser;
      theirs_ = 0;
    }
    return rc;
  }
  // Thread 0 spins until a direction can progress, the deadline passes, the
  // host aborts, or another block of this rank has failed.
  __device__ int wait(bool sending, int q, bool receiving, int p) {
    int rc = 0;
    if (dev::tid() == 0) {
      const uint64_t start = dev::globalTimerNs(), deadline = start + a_.timeoutNs;
      for (uint32_t i = 0;; ++i) {
        if ((sending && pollRoom(q)) || (receiving && pollArrived(p))) break;
        if (differs_ >= 0) {
          rc = collieInvalidUsage;
          break;
        }
        if ((sending && gaveUp(q)) || (receiving && gaveUp(p))) {
          // A peer that refused its call gave up on it: say why.
          rc = (sending && refused(q)) || (receiving && refused(p)) ? collieInvalidUsage : collieRemoteError;
          break;
        }
        if ((i & 1023) == 1023 && (rc = stop(deadline, sending ? q : -1, receiving ? p : -1)) != 0) break;
      }
      if (a_.phaseNs != nullptr) waitedNs_ += dev::globalTimerNs() - start;
    }
    return fromThread0(rc, shared_);
  }

  const KernelArgs& a_;
  int channel_;
  uint64_t* posted_;
  uint64_t* consumed_;
  uint64_t* credited_;
  uint64_t* clean_;  // device_prims_ll.cuh, "Stale lines"
  int* shared_;
  const T* exposed_ = nullptr;  // what the next post hands over in place (expose), if anything
  // Thread 0's, bit p for peer p (protocol.h, "Giving up"): this launch handed p a slice in place; this launch
  // marked that it reads p's; p gave up.
  uint64_t exposedTo_ = 0, marked_ = 0, gone_ = 0;
  // Thread 0's call check (sameCall): bit p, p's first slice of the launch was compared; the peer whose slice
  // belonged to another call, or that refused first, and that slice's signature (0: refused).
  uint64_t checked_ = 0;
  int differs_ = -1;
  uint64_t theirs_ = 0;
  uint64_t waitedNs_ = 0;  // thread 0's
  StepClock clock_;
};

}  // namespace collie
