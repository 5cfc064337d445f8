// Runs the direct kernels' bodies (kernels/direct_allreduce_block.cuh) under the CPU emulation for n ranks, each
// a host thread playing its launch's blocks, and compares every byte of every rank's buffers after each call with
// an independent reference: the reduction in rank order with the shared operators (executor/reduce_ops.h),
// acc = x0, then acc = x_j (op) acc for j = 1..n-1, as the host executor's one-shot program reduces
// (algorithms/direct_exchange.h), avg dividing once at the end; a pre-multiplied sum first scales each rank's
// input by its own scalar (scaleBy).
// Bytes outside a call's output keep what they held before it (the poison, or in place the input).
//
// A sequence of calls runs without a join between calls: each rank prepares its buffers for the next call (poison,
// then its input) as soon as its own launch of the last one has returned, while its peers may still be in theirs,
// as a rank's stream moves on on the GPU. What makes that safe is the kernels' business (the exit barriers, the
// parities of the one-shot's scratch), and ThreadSanitizer sees it.
//
// Shared by tests/unit/direct_kernels_test.cc and the differential fuzz target (tests/fuzz/fuzz_direct_kernels.cc).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "collie.h"
#include "executor/reduce_ops.h"
#include "kernels/direct_kernels.h"
#include "kernels/emulator.h"

namespace collie {
namespace test {
namespace direct {

/// The operators a call may take: the five built-in ones, and a pre-multiplied sum (one-shot only).
enum class TestOp : int { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
constexpr int kTestOps = 6;

inline const char* testOpName(TestOp op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return kNames[static_cast<int>(op)];
}
inline const char* kindName(DirectKind k) {
  static const char* const kNames[] = {"oneshot",  "twoshot",   "reducescatter", "allgather",
                                       "alltoall", "broadcast", "alltoallv"};
  return kNames[static_cast<int>(k)];
}
inline ReduceOp reduceOpOf(TestOp op) {
  switch (op) {
    case TestOp::kProd:
      return ReduceOp::kProd;
    case TestOp::kMax:
      return ReduceOp::kMax;
    case TestOp::kMin:
      return ReduceOp::kMin;
    default:
      return ReduceOp::kSum;
  }
}

/// One call of every rank. Offsets are in elements, from a 64-byte aligned base: equal on every rank, the moves go
/// by vectors after a scalar head; different, element by element.
struct Call {
  DirectKind kind = DirectKind::kOneShotAllReduce;
  collieDataType_t type = collieFloat32;
  TestOp op = TestOp::kSum;
  uint64_t count = 0;
  bool inPlace = false;  // never for all-to-all(-v), which has no in-place form
  int root = 0;          // broadcast
  uint32_t inOffset[kDirectMaxRanks] = {};
  uint32_t outOffset[kDirectMaxRanks] = {};
  std::vector<std::vector<uint8_t>> inputs;  // [rank]: inputCount elements
  std::vector<uint64_t> scalars;             // [rank]: a pre-multiplied sum's scalar, in the low bytes
  // All-to-all-v: [rank][peer], in elements (count bounds each pair's); sendCounts[r][q] == recvCounts[q][r] unless
  // a test makes them differ.
  std::vector<std::vector<uint32_t>> sendCounts, sendDispls, recvCounts, recvDispls;
  // [rank]: a rank's own count, at most `count`, where a test makes the ranks' calls differ (allreduce only);
  // empty: `count` on every rank.
  std::vector<uint64_t> counts;

  std::string describe() const {
    std::ostringstream s;
    s << kindName(kind) << " " << typeName(type) << " " << testOpName(op) << " count " << count
      << (inPlace ? " in place" : " out of place") << ", offsets in/out of rank 0: " << inOffset[0] << "/"
      << outOffset[0];
    if (kind == DirectKind::kBroadcast) s << ", root " << root;
    return s.str();
  }
};

/// How far blocks at `displs` of `counts` elements reach.
inline uint64_t extentOf(const std::vector<uint32_t>& counts, const std::vector<uint32_t>& displs) {
  uint64_t most = 0;
  for (size_t q = 0; q < counts.size(); ++q)
    if (counts[q] > 0 && uint64_t{displs[q]} + counts[q] > most) most = uint64_t{displs[q]} + counts[q];
  return most;
}
/// Elements of rank r's input and output for `call` on n ranks.
inline uint64_t inputCount(const Call& c, int n, int r) {
  if (c.kind == DirectKind::kAllToAllv)
    return extentOf(c.sendCounts[static_cast<size_t>(r)], c.sendDispls[static_cast<size_t>(r)]);
  const bool blocks = c.kind == DirectKind::kReduceScatter || c.kind == DirectKind::kAllToAll;
  return blocks ? c.count * static_cast<uint64_t>(n) : c.count;
}
inline uint64_t outputCount(const Call& c, int n, int r) {
  if (c.kind == DirectKind::kAllToAllv)
    return extentOf(c.recvCounts[static_cast<size_t>(r)], c.recvDispls[static_cast<size_t>(r)]);
  const bool blocks = c.kind == DirectKind::kAllGather || c.kind == DirectKind::kAllToAll;
  return blocks ? c.count * static_cast<uint64_t>(n) : c.count;
}

/// Random elements of `type`: integers of any bits; floating values in [-4, 4), so that sums are inexact (an
/// order other than the reference's shows) but rarely overflow.
inline void fillRandom(collieDataType_t type, std::mt19937_64* rng, uint8_t* out, uint64_t count) {
  visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = reinterpret_cast<T*>(out);
    for (uint64_t i = 0; i < count; ++i) {
      if constexpr (std::is_integral<T>::value) {
        const uint64_t bits = (*rng)();
        memcpy(&p[i], &bits, sizeof(T));
      } else {
        const double u = static_cast<double>((*rng)() >> 11) / 9007199254740992.0;  // [0, 1)
        p[i] = narrow<T>(static_cast<float>(u * 8.0 - 4.0));
      }
    }
  });
}

/// The expected value of element i of a reduction of `contribution(p)` over n ranks.
template <typename T, ReduceOp Op, typename F>
T referenceOf(int n, int divisor, F contribution) {
  T acc = contribution(0);
  for (int p = 1; p < n; ++p) acc = applyOp<Op>(contribution(p), acc);
  return divisor > 0 ? divideBy(acc, divisor) : acc;
}

class World {
 public:
  /// n ranks, each launch on `blocks` blocks of `threads` emulated threads; buffers of `capacityBytes` per rank
  /// and one-shot slots of `slotLines` lines.
  World(int n, int blocks, int threads, uint64_t capacityBytes, uint32_t slotLines, uint64_t timeoutNs)
      : n_(n), blocks_(blocks), capacity_(capacityBytes + 2 * kMargin), slotLines_(slotLines), timeoutNs_(timeoutNs) {
    for (int r = 0; r < n; ++r) {
      Rank& k = ranks_.emplace_back();
      k.in = alloc(capacity_);
      k.out = alloc(capacity_);
      k.scratch = alloc(directScratchBytes(n, slotLines));
      k.barriers = alloc(kDirectBarrierBytes);
      memset(k.scratch.get(), 0, directScratchBytes(n, slotLines));
      memset(k.barriers.get(), 0, kDirectBarrierBytes);
      k.launcher = std::make_unique<emu::Launcher>(blocks, threads);
    }
    groupLauncher_ = std::make_unique<emu::Launcher>(n * blocks, threads);
  }
  int nranks() const { return n_; }
  /// Rank r's call counter (DirectArgs::counter): its calls so far, as its launches left it.
  const DirectCounter& counter(int r) const { return ranks_[static_cast<size_t>(r)].counter; }
  /// Rank r's counter set as if it had made `calls` calls (a test of what comes after many).
  void setCalls(int r, uint64_t calls) { ranks_[static_cast<size_t>(r)].counter.seq = calls; }
  /// Raised by a test to make every wait give up (DirectArgs::abortFlag).
  void raiseAbort() { __atomic_store_n(&abort_, 1u, __ATOMIC_RELEASE); }
  const DirectError& error(int r) const { return ranks_[static_cast<size_t>(r)].error; }
  /// COLLIE_KERNEL_TIMING's sums (DirectArgs::timing) from now on: each rank's own, read by timing(r).
  void timeLaunches() { timing_.assign(static_cast<size_t>(n_) * kDirectTimingWords, 0); }
  const uint64_t* timing(int r) const { return timing_.data() + static_cast<size_t>(r) * kDirectTimingWords; }
  /// Rank r's one-shot scratch ([parity][sender][slotLines() lines]), for a test that plays a peer itself.
  uint8_t* scratch(int r) { return ranks_[static_cast<size_t>(r)].scratch.get(); }
  uint32_t slotLines() const { return slotLines_; }
  /// From now on every rank's peers count as other processes (DirectArgs::remotePeers), each announcing its input in
  /// window 1 and its output in window 2, reached through `maps(r)`: rank r's table [window][rank], identity
  /// entries (a - 1 + 1) for windows 1 and 2 of every peer until a test clears one.
  void mapAsProcesses() {
    maps_.assign(static_cast<size_t>(n_) * kDirectMaxWindows * kDirectMaxRanks, DirectPeerMap{});
    for (int r = 0; r < n_; ++r)
      for (int w : {1, 2})
        for (int p = 0; p < n_; ++p) maps(r)[w * kDirectMaxRanks + p] = DirectPeerMap{1, 1};
  }
  /// From now on rank r's launches carry signatures[r] (DirectArgs::signature).
  void signCalls(std::vector<uint64_t> signatures) { signatures_ = std::move(signatures); }
  DirectPeerMap* maps(int r) { return maps_.data() + static_cast<size_t>(r) * kDirectMaxWindows * kDirectMaxRanks; }

  /// Runs `calls` in order on the ranks listed (all when empty; a rank left out never comes) and returns a line
  /// per wrong result or failed call (empty: every byte as expected). Each rank's launches number the calls on from
  /// its counter (lines name them by the ranks' common count).
  /// Each rank checks its own buffers as soon as its launch has returned.
  std::vector<std::string> run(const std::vector<Call>& calls, const std::vector<int>& only = {}) {
    std::vector<int> who = only;
    if (who.empty())
      for (int r = 0; r < n_; ++r) who.push_back(r);
    const uint32_t first = seq_ + 1;
    seq_ += static_cast<uint32_t>(calls.size());
    std::vector<std::vector<std::string>> found(static_cast<size_t>(n_));  // [rank]: what it found wrong
    std::vector<std::thread> threads;
    for (int r : who)
      threads.emplace_back([&, r] {
        std::vector<std::string>& mine = found[static_cast<size_t>(r)];
        for (size_t k = 0; k < calls.size() && mine.size() < 4; ++k) {
          const std::string bad = runOne(calls[k], r, k);
          if (!bad.empty())
            mine.push_back("call " + std::to_string(first + k) + " (" + calls[k].describe() + "), rank " +
                           std::to_string(r) + " of " + std::to_string(n_) + ": " + bad);
        }
      });
    for (std::thread& t : threads) t.join();
    std::vector<std::string> wrong;
    for (const std::vector<std::string>& f : found) wrong.insert(wrong.end(), f.begin(), f.end());
    return wrong;
  }

  /// Runs one-shot `calls` as run() does, each in one launch serving every rank (emu::launchDirectGroup, from this
  /// thread: n x blocks blocks, rank r's the r-th run of them), with every rank's call numbered on from its counter.
  std::vector<std::string> runGrouped(const std::vector<Call>& calls) {
    const uint32_t first = seq_ + 1;
    seq_ += static_cast<uint32_t>(calls.size());
    std::vector<std::string> wrong;
    for (size_t k = 0; k < calls.size() && wrong.size() < 4; ++k) {
      const Call& c = calls[k];
      std::vector<Prepared> prepared;
      DirectGroupArgs g;
      g.nranks = n_;
      g.blocks = blocks_;
      for (int r = 0; r < n_; ++r) {
        prepared.push_back(prepare(c, r, k));
        g.args[r] = argsOf(c, r);
      }
      const bool refused = emu::launchDirectGroup(g, c.type, reduceOpOf(c.op), groupLauncher_.get()) != 0;
      for (int r = 0; r < n_; ++r) {
        const std::string bad = refused ? "launch refused" : check(c, r, prepared[static_cast<size_t>(r)]);
        if (!bad.empty())
          wrong.push_back("grouped call " + std::to_string(first + k) + " (" + c.describe() + "), rank " +
                          std::to_string(r) + " of " + std::to_string(n_) + ": " + bad);
      }
    }
    return wrong;
  }

 private:
  static constexpr uint64_t kMargin = 64;
  struct Free {
    void operator()(uint8_t* p) const { free(p); }
  };
  using Buffer = std::unique_ptr<uint8_t, Free>;
  static Buffer alloc(uint64_t bytes) {
    return Buffer(static_cast<uint8_t*>(aligned_alloc(64, (bytes + 63) / 64 * 64)));
  }
  struct Rank {
    Buffer in, out, scratch, barriers;
    DirectError error;
    DirectCounter counter;
    std::unique_ptr<emu::Launcher> launcher;
  };

  // Byte positions in a rank's buffers: in place, one buffer holds both (reduce-scatter's output is block r of
  // its input, allgather's input block r of its output, as NCCL's in-place forms).
  uint64_t outAt(const Call& c, int r) const {
    const uint64_t size = typeSize(c.type), base = kMargin + c.outOffset[r] * size;
    return c.inPlace && c.kind == DirectKind::kReduceScatter ? base + r * c.count * size : base;
  }
  uint64_t inAt(const Call& c, int r) const {
    const uint64_t size = typeSize(c.type);
    if (!c.inPlace) return kMargin + c.inOffset[r] * size;
    const uint64_t base = kMargin + c.outOffset[r] * size;
    return c.kind == DirectKind::kAllGather ? base + r * c.count * size : base;
  }

  // The bytes of a rank's buffers call c may touch, and then some.
  uint64_t extent(const Call& c) const {
    const uint64_t size = typeSize(c.type);
    uint64_t most = 0;
    for (int r = 0; r < n_; ++r) most = std::max({most, inputCount(c, n_, r), outputCount(c, n_, r)});
    const uint64_t bytes = kMargin + 16 * 8 + most * size + kMargin;
    return bytes < capacity_ ? bytes : capacity_;
  }
  std::vector<uint8_t> poisoned(const Call& c, size_t k, int r) const {
    std::vector<uint8_t> b(extent(c));
    for (uint64_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(0xa5 ^ (i * 131 + k * 29 + r * 7));
    return b;
  }

  // A rank's buffers as prepared for a call: what they held before it.
  struct Prepared {
    std::vector<uint8_t> in, out;
  };
  // Rank r's buffers for call k: poison, then its input.
  Prepared prepare(const Call& c, int r, size_t k) {
    Rank& me = ranks_[static_cast<size_t>(r)];
    const std::vector<uint8_t>& input = c.inputs[static_cast<size_t>(r)];
    Prepared p;
    p.out = poisoned(c, k, r);
    // (An empty input's data() may be null, which memcpy must not be given even for 0 bytes.)
    if (c.inPlace) {
      if (!input.empty()) memcpy(p.out.data() + inAt(c, r), input.data(), input.size());
    } else {
      p.in = poisoned(c, k, r);
      if (!input.empty()) memcpy(p.in.data() + inAt(c, r), input.data(), input.size());
      memcpy(me.in.get(), p.in.data(), p.in.size());
    }
    memcpy(me.out.get(), p.out.data(), p.out.size());
    return p;
  }

  // Rank r's part of call k: its buffers prepared, its launch, and what it finds wrong in them afterwards ("" when
  // nothing).
  std::string runOne(const Call& c, int r, size_t k) {
    Prepared p = prepare(c, r, k);
    const DirectArgs a = argsOf(c, r);
    if (emu::launchDirect(a, c.kind, c.type, reduceOpOf(c.op), ranks_[static_cast<size_t>(r)].launcher.get()) != 0)
      return "launch refused";
    return check(c, r, p);
  }

  // What rank r finds wrong in its buffers after call c, prepared as `p` ("" when nothing).
  std::string check(const Call& c, int r, Prepared& p) {
    Rank& me = ranks_[static_cast<size_t>(r)];
    std::vector<uint8_t>& out = p.out;
    const std::vector<uint8_t>& in = p.in;
    if (me.error.code != 0)
      return "failed with code " + std::to_string(me.error.code) + " waiting for rank " +
             std::to_string(me.error.peer) + " in call " + std::to_string(me.error.call);
    // Every byte: the output where it belongs, the rest as prepared.
    writeReference(c, r, out.data() + outAt(c, r));
    const std::string bad = firstDifference(c.type, out, me.out.get(), outAt(c, r));
    if (!bad.empty()) return bad;
    if (!c.inPlace && memcmp(in.data(), me.in.get(), in.size()) != 0) return "the input buffer changed";
    return "";
  }

  DirectArgs argsOf(const Call& c, int r) {
    DirectArgs a;
    a.rank = r;
    a.nranks = n_;
    a.counter = &ranks_[static_cast<size_t>(r)].counter;
    a.slotLines = slotLines_;
    a.count = c.counts.empty() ? c.count : c.counts[static_cast<size_t>(r)];
    a.root = c.root;
    if (c.kind == DirectKind::kAllToAllv) {
      const size_t ur = static_cast<size_t>(r);
      a.count = std::max(inputCount(c, n_, r), outputCount(c, n_, r));
      for (int p = 0; p < n_; ++p) {
        const size_t up = static_cast<size_t>(p);
        a.sendCount[p] = c.sendCounts[ur][up];
        a.sendDispl[p] = c.sendDispls[ur][up];
        a.recvCount[p] = c.recvCounts[ur][up];
        a.recvDispl[p] = c.recvDispls[ur][up];
      }
    }
    // Its own buffers only: the peers' it learns at the entry barrier.
    Rank& me = ranks_[static_cast<size_t>(r)];
    a.input = (c.inPlace ? me.out.get() : me.in.get()) + inAt(c, r);
    a.output = me.out.get() + outAt(c, r);
    for (int p = 0; p < n_; ++p) {
      Rank& k = ranks_[static_cast<size_t>(p)];
      a.scratch[p] = k.scratch.get();
      a.barriers[p] = k.barriers.get();
    }
    a.abortFlag = &abort_;
    a.error = &ranks_[static_cast<size_t>(r)].error;
    a.timeoutNs = timeoutNs_;
    if (!timing_.empty()) a.timing = timing_.data() + static_cast<size_t>(r) * kDirectTimingWords;
    if (!maps_.empty()) {
      a.remotePeers = ((1u << n_) - 1) & ~(1u << r);
      a.peerMaps = maps(r);
      a.inWindow = 1;
      a.outWindow = 2;
    }
    if (!signatures_.empty()) a.signature = signatures_[static_cast<size_t>(r)];
    a.divisor = c.op == TestOp::kAvg ? n_ : 0;
    if (c.op == TestOp::kPreMulSum) {
      a.premul = 1;
      a.scalarBits = c.scalars[static_cast<size_t>(r)];
    }
    return a;
  }

  // Rank r's expected output of call c at `out`.
  void writeReference(const Call& c, int r, uint8_t* out) const {
    visitType(c.type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto in = [&](int p) { return reinterpret_cast<const T*>(c.inputs[static_cast<size_t>(p)].data()); };
      T* o = reinterpret_cast<T*>(out);
      if (c.kind == DirectKind::kAllGather) {
        for (int q = 0; q < n_ && c.count > 0; ++q) memcpy(o + q * c.count, in(q), c.count * sizeof(T));
        return;
      }
      if (c.kind == DirectKind::kAllToAll) {
        for (int q = 0; q < n_ && c.count > 0; ++q) memcpy(o + q * c.count, in(q) + r * c.count, c.count * sizeof(T));
        return;
      }
      if (c.kind == DirectKind::kAllToAllv) {
        // A block whose pair's counts differ stays as it was (the call is refused on both ranks of the pair).
        const size_t ur = static_cast<size_t>(r);
        for (int q = 0; q < n_; ++q) {
          const size_t uq = static_cast<size_t>(q);
          const uint32_t len = c.recvCounts[ur][uq];
          if (len > 0 && len == c.sendCounts[uq][ur])
            memcpy(o + c.recvDispls[ur][uq], in(q) + c.sendDispls[uq][ur], len * sizeof(T));
        }
        return;
      }
      if (c.kind == DirectKind::kBroadcast) {
        if (c.count > 0) memcpy(o, in(c.root), c.count * sizeof(T));
        return;
      }
      const uint64_t from = c.kind == DirectKind::kReduceScatter ? r * c.count : 0;
      const int divisor = c.op == TestOp::kAvg ? n_ : 0;
      visitOp(reduceOpOf(c.op), [&](auto opc) {
        constexpr ReduceOp kOp = decltype(opc)::value;
        const uint64_t count = c.counts.empty() ? c.count : c.counts[static_cast<size_t>(r)];
        for (uint64_t i = 0; i < count; ++i)
          o[i] = referenceOf<T, kOp>(n_, divisor, [&](int p) {
            const T x = in(p)[from + i];
            if (c.op != TestOp::kPreMulSum) return x;
            T s;
            memcpy(static_cast<void*>(&s), &c.scalars[static_cast<size_t>(p)], sizeof(T));
            return scaleBy(x, s);
          });
      });
    });
  }

  static std::string firstDifference(collieDataType_t type, const std::vector<uint8_t>& expected, const uint8_t* got,
                                     uint64_t outAt) {
    const size_t size = typeSize(type);
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i] == got[i]) continue;
      std::ostringstream s;
      if (i < outAt) {
        s << "byte " << (outAt - i) << " before the output changed";
      } else {
        s << "element " << (i - outAt) / size << " (byte " << i - outAt << " of the output region): expected 0x"
          << std::hex << static_cast<int>(expected[i]) << ", got 0x" << static_cast<int>(got[i]);
      }
      return s.str();
    }
    return "";
  }

  int n_;
  int blocks_;
  uint64_t capacity_;
  uint32_t slotLines_;
  uint64_t timeoutNs_;
  uint32_t seq_ = 0;
  uint32_t abort_ = 0;
  std::vector<uint64_t> timing_;
  std::vector<DirectPeerMap> maps_;   // mapAsProcesses: [rank][window][peer]; empty: ranks are threads
  std::vector<uint64_t> signatures_;  // signCalls: [rank]; empty: none
  std::vector<Rank> ranks_;
  std::unique_ptr<emu::Launcher> groupLauncher_;  // runGrouped's: n x blocks blocks
};

/// A call with random inputs (and scalars) from `rng`.
inline Call makeCall(DirectKind kind, collieDataType_t type, TestOp op, uint64_t count, bool inPlace, int n,
                     std::mt19937_64* rng, bool sameOffsets) {
  Call c;
  c.kind = kind;
  c.type = type;
  c.op = op;
  c.count = count;
  c.inPlace = inPlace && kind != DirectKind::kAllToAll && kind != DirectKind::kAllToAllv;
  c.root = static_cast<int>((*rng)() % static_cast<uint64_t>(n));
  inPlace = c.inPlace;
  const uint32_t in0 = static_cast<uint32_t>((*rng)() % 9), out0 = static_cast<uint32_t>((*rng)() % 9);
  for (int r = 0; r < n; ++r) {
    c.inOffset[r] = sameOffsets ? in0 : static_cast<uint32_t>((*rng)() % 9);
    c.outOffset[r] = sameOffsets ? out0 : static_cast<uint32_t>((*rng)() % 9);
    // Out of place, the input's offset keeps the output's distance from a 16-byte boundary where offsets are
    // equal: the vector path needs the inputs and outputs of a move to agree.
    if (sameOffsets && !inPlace) c.inOffset[r] = c.outOffset[r];
  }
  if (kind == DirectKind::kAllToAllv) {
    // Each pair's count in 0..count (a fifth of them 0), each rank's blocks in a shuffled peer order with gaps of up
    // to 2 elements; sameOffsets keeps every block on a multiple of 16 bytes.
    const uint64_t unit = sameOffsets ? std::max<uint64_t>(1, 16 / typeSize(type)) : 1;
    std::vector<std::vector<uint32_t>> m(static_cast<size_t>(n), std::vector<uint32_t>(static_cast<size_t>(n)));
    for (auto& row : m)
      for (uint32_t& x : row) x = (*rng)() % 5 == 0 ? 0 : static_cast<uint32_t>((*rng)() % (count + 1));
    auto lay = [&](const std::vector<uint32_t>& counts) {
      std::vector<int> order(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) order[static_cast<size_t>(q)] = q;
      std::shuffle(order.begin(), order.end(), *rng);
      std::vector<uint32_t> displs(static_cast<size_t>(n));
      uint64_t at = 0;
      for (int q : order) {
        at += sameOffsets ? 0 : (*rng)() % 3;
        displs[static_cast<size_t>(q)] = static_cast<uint32_t>(at);
        at = (at + counts[static_cast<size_t>(q)] + unit - 1) / unit * unit;
      }
      return displs;
    };
    for (int r = 0; r < n; ++r) {
      std::vector<uint32_t> recv(static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) recv[static_cast<size_t>(q)] = m[static_cast<size_t>(q)][static_cast<size_t>(r)];
      c.sendCounts.push_back(m[static_cast<size_t>(r)]);
      c.sendDispls.push_back(lay(m[static_cast<size_t>(r)]));
      c.recvCounts.push_back(recv);
      c.recvDispls.push_back(lay(recv));
    }
  }
  const size_t size = typeSize(type);
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> in(inputCount(c, n, r) * size);
    fillRandom(type, rng, in.data(), inputCount(c, n, r));
    c.inputs.push_back(std::move(in));
    uint64_t s = 0;
    fillRandom(type, rng, reinterpret_cast<uint8_t*>(&s), 1);
    c.scalars.push_back(s);
  }
  return c;
}

}  // namespace direct
}  // namespace test
}  // namespace collie
