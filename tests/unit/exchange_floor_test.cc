// The exchange floor's kernel body (kernels/exchange_floor_block.cuh), run by the CPU emulation: a rank per host
// thread, each playing one block. tests/gpu/exchange_floor.cc times the same body on a GPU; here: that every
// way a payload travels delivers every word of every peer's payload for each exchange, that a wrong word is
// caught, and that a rank whose peer never comes gives up within its timeout instead of hanging.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/emulator.h"
#include "kernels/exchange_floor_block.cuh"

namespace {

using collie::FloorArgs;
using collie::FloorMode;

struct Slots {
  Slots(int n, uint64_t w)
      : words(w),
        lines(static_cast<size_t>(n) * n * 2 * w, 0),
        flags(static_cast<size_t>(n) * n * 2, 0),
        credits(static_cast<size_t>(n) * n, 0),
        elapsed(n, 0) {}
  uint64_t words;
  bool drain = false;
  std::vector<uint64_t> lines, flags, credits, elapsed;
  uint32_t failed = 0;
};

FloorArgs argsOf(Slots* s, int rank, int n, FloorMode mode, uint32_t first, uint32_t count) {
  FloorArgs a;
  a.lines = s->lines.data();
  a.flags = s->flags.data();
  a.elapsedNs = s->elapsed.data();
  a.failed = &s->failed;
  a.rank = rank;
  a.nranks = n;
  a.mode = static_cast<int>(mode);
  a.first = first;
  a.count = count;
  a.words = s->words;
  a.credits = s->credits.data();
  a.drain = s->drain ? 1 : 0;
  return a;
}

// Runs `launches` launches of `count` exchanges on every rank of `ranks` (each its own thread and emulated block
// of `threads` threads), numbered on from `first`. The default timeout is long: a wait that never ends fails the
// test at ctest's limit rather than passing as a timeout.
void runRanks(Slots* s, const std::vector<int>& ranks, int n, FloorMode mode, uint32_t first, uint32_t count,
              int launches, int threads, uint64_t timeoutNs = 20000000000ull) {
  std::vector<std::thread> ts;
  for (int r : ranks)
    ts.emplace_back([=] {
      collie::emu::Launcher block(1, threads);
      for (int k = 0; k < launches; ++k) {
        FloorArgs a = argsOf(s, r, n, mode, first + static_cast<uint32_t>(k) * count, count);
        a.timeoutNs = timeoutNs;
        block.run([&](int) { collie::exchangeFloorBlock(a); });
      }
    });
  for (std::thread& t : ts) t.join();
}

TEST(ExchangeFloor, EveryWayDeliversEveryWordOfEachExchange) {
  for (FloorMode mode : {FloorMode::kLine, FloorMode::kFlagGpu, FloorMode::kFlagSys}) {
    for (int n : {2, 3, 5}) {
      for (uint64_t words : {1, 37}) {
        // With the drain only for LL lines, as Collie's LL kernels drain.
        const bool drain = mode == FloorMode::kLine && words > 1;
        SCOPED_TRACE(testing::Message() << "mode " << static_cast<int>(mode) << ", " << n << " ranks, " << words
                                        << " words" << (drain ? ", drained" : ""));
        Slots s(n, words);
        s.drain = drain;
        std::vector<int> all;
        for (int r = 0; r < n; ++r) all.push_back(r);
        // Many exchanges in one launch, then launches of one: the slots of both parities are reused throughout.
        runRanks(&s, all, n, mode, 1, 40, 1, 3);
        runRanks(&s, all, n, mode, 41, 1, 12, 2);
        EXPECT_EQ(s.failed, 0u);
        for (int r = 0; r < n; ++r) EXPECT_GT(s.elapsed[static_cast<size_t>(r)], 0u) << "rank " << r;
        // The last exchange (52, parity 0) left in each slot the sender's payload for it: word w is
        // rank + 1 + 52 + w.
        for (int to = 0; to < n; ++to)
          for (int from = 0; from < n; ++from) {
            if (to == from) continue;
            const size_t at = (static_cast<size_t>(to) * n + from) * 2 * words;
            for (uint64_t w = 0; w < words; ++w)
              ASSERT_EQ(static_cast<uint32_t>(s.lines[at + w]), static_cast<uint32_t>(from + 1 + 52 + w))
                  << from << " -> " << to << ", word " << w;
            // Every receiver handed back the last exchange, or nothing without the drain.
            EXPECT_EQ(s.credits[static_cast<size_t>(from) * n + to], drain ? 52u : 0u) << from << " -> " << to;
          }
      }
    }
  }
}

TEST(ExchangeFloor, AWrongWordFailsTheRun) {
  // Ranks 1 and 2's payloads for exchange 1 are in rank 0's slots with their flags, and rank 0 runs alone (three
  // emulated threads, each checking its own lines). Right, it passes; with word 2 of rank 1's wrong, it fails,
  // in both shapes: with flags the thread that found the wrong word must still pass the next peer's barrier.
  const uint64_t words = 5;
  for (FloorMode mode : {FloorMode::kLine, FloorMode::kFlagGpu}) {
    for (bool wrong : {false, true}) {
      Slots s(3, words);
      for (int p = 1; p < 3; ++p) {
        const size_t at = (static_cast<size_t>(0) * 3 + p) * 2 + 1;  // [receiver 0][sender p][parity of 1]
        s.flags[at] = 1;
        for (uint64_t w = 0; w < words; ++w) {
          const uint32_t v = wrong && p == 1 && w == 2 ? 99u : static_cast<uint32_t>(p + 1 + 1 + w);
          s.lines[at * words + w] = (mode == FloorMode::kLine ? uint64_t{1} << 32 : 0) | v;
        }
      }
      runRanks(&s, {0}, 3, mode, 1, 1, 1, 3);
      EXPECT_EQ(s.failed, wrong ? 1u : 0u)
          << "mode " << static_cast<int>(mode) << (wrong ? ": a wrong word" : ": every word right");
    }
  }
}

TEST(ExchangeFloor, ARankWhosePeerNeverComesGivesUpWithinItsTimeout) {
  for (FloorMode mode : {FloorMode::kLine, FloorMode::kFlagGpu}) {
    Slots s(3, 4);
    const auto t0 = std::chrono::steady_clock::now();
    runRanks(&s, {0, 1}, 3, mode, 1, 1, 1, 2, 200000000ull);  // rank 2 never runs; 0.2 s
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(s.failed, 1u) << "mode " << static_cast<int>(mode);
    EXPECT_LT(sec, 10.0);
  }
}

}  // namespace
