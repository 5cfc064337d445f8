// The direct kernels' bodies (kernels/direct_allreduce_block.cuh) under the CPU emulation: ranks as host threads,
// each playing its launch's blocks (tests/unit/direct_kernels_case.h). Every body at 2..8 ranks against a reference
// reduced in rank order with the shared operators, byte for byte; consecutive calls of mixed kernels (the
// one-shot's parities and every barrier's epochs advance, and a rank prepares its next call while its peers may
// still be in the last); waits that give up in time with rank, peer and call, or at once on the abort flag; a
// packet line taken only once both its halves have come; the one-shot's group form (every rank in one launch).
//
// At each rank count every kernel runs with every type and operator; the placement (in place or not) and the
// offsets (equal on every rank: vectors after a scalar head; different: element by element) rotate with them and
// a seeded offset, and the count is drawn, rather than multiplying out (18 counts x 2 placements x 2 kinds of
// offsets would be 72 times the calls for the same code paths). The seed is printed (COLLIE_TEST_SEED repeats a
// run).
#include "kernels/direct_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "kernels/ceiling_kernels.h"
#include "kernels/emulator.h"
#include "tests/unit/direct_kernels_case.h"

namespace {

using collie::DirectArgs;
using collie::DirectError;
using collie::DirectKind;
using collie::test::direct::Call;
using collie::test::direct::kTestOps;
using collie::test::direct::makeCall;
using collie::test::direct::TestOp;
using collie::test::direct::World;

constexpr DirectKind kKinds[] = {
    DirectKind::kOneShotAllReduce, DirectKind::kTwoShotAllReduce, DirectKind::kReduceScatter, DirectKind::kAllGather,
    DirectKind::kAllToAll,         DirectKind::kBroadcast,        DirectKind::kAllToAllv};
// Counts of elements: 0 and 1, odd ones, around the vector widths (16 / size) and the line (8 / size), not
// divisible by any rank count, and a few thousand (many lines and vectors per thread).
constexpr uint64_t kCounts[] = {0, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 255, 1000, 1027, 4099};
constexpr uint64_t kMaxCount = 4099;
constexpr uint64_t kLongNs = 60ull * 1000 * 1000 * 1000;  // a hang fails at ctest's limit, not as a timeout

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// A world of n ranks large enough for every call below.
World worldOf(int n, uint64_t timeoutNs = kLongNs) {
  const int blocks = 1 + n % 3, threads = 1 + (n + 1) % 3;
  return World(n, blocks, threads, kMaxCount * static_cast<uint64_t>(n) * 8 + 256,
               static_cast<uint32_t>(collie::directLines(kMaxCount * 8)), timeoutNs);
}

// Arguments that every launch check accepts: 4 floats on 2 ranks, every buffer at `buf` (64 bytes).
DirectArgs acceptedArgs(DirectError* error, collie::DirectCounter* counter, uint8_t* buf) {
  DirectArgs a;
  a.nranks = 2;
  a.error = error;
  a.counter = counter;
  a.count = 4;
  a.slotLines = 2;
  a.input = buf;
  a.output = buf;
  for (int p = 0; p < 2; ++p) {
    a.scratch[p] = buf;
    a.barriers[p] = buf;
  }
  return a;
}

class DirectKernelsAtRanks : public testing::TestWithParam<int> {};

TEST_P(DirectKernelsAtRanks, EveryKernelMatchesTheReferenceBitForBit) {
  const int n = GetParam();
  const uint64_t seed = collie::test::testSeed();
  std::mt19937_64 rng(seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(n)));
  const size_t rot = static_cast<size_t>(seed % 6);
  std::vector<Call> calls;
  const std::vector<collieDataType_t>& types = collie::test::allTypes();
  for (size_t ki = 0; ki < std::size(kKinds); ++ki)
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const DirectKind kind = kKinds[ki];
      // The one-shot also takes a pre-multiplied sum; the kinds that move words no operator.
      const size_t ops = kind == DirectKind::kOneShotAllReduce ? kTestOps : collie::directMovesWords(kind) ? 1 : 5;
      for (size_t oi = 0; oi < ops; ++oi) {
        // Placement and offsets rotate with the rank count, so that every (kernel, type, operator) meets both
        // placements and both kinds of offsets over 2..8 ranks; the count is drawn.
        const size_t key = ti + ki + oi + static_cast<size_t>(n) + rot;
        const uint64_t count = kCounts[rng() % std::size(kCounts)];
        const bool inPlace = key % 2 == 0;
        const bool sameOffsets = (key + ki) % 3 != 0;
        calls.push_back(makeCall(kind, types[ti], static_cast<TestOp>(oi), count, inPlace, n, &rng, sameOffsets));
      }
    }
  // Kernels in a mixed order: the one-shot's parities and the barriers' epochs advance through each other's calls.
  std::shuffle(calls.begin(), calls.end(), rng);
  World world = worldOf(n);
  const std::vector<std::string> wrong = world.run(calls);
  EXPECT_TRUE(wrong.empty()) << "seed " << seed << "\n" << joined(wrong);
}

INSTANTIATE_TEST_SUITE_P(, DirectKernelsAtRanks, testing::Range(2, 9),
                         [](const testing::TestParamInfo<int>& p) { return "n" + std::to_string(p.param); });

TEST(DirectKernels, OneShotCallsOfChangingSizesTakeNoStaleLine) {
  // Lines past a small call's end keep the flags of older, larger calls of the same parity: never the new one.
  const uint64_t seed = collie::test::testSeed();
  std::mt19937_64 rng(seed + 17);
  for (int n : {2, 3}) {
    std::vector<Call> calls;
    for (uint64_t count : {4099, 3, 4099, 1, 4098, 0, 4099, 2, 33, 4097})
      calls.push_back(
          makeCall(DirectKind::kOneShotAllReduce, collieFloat32, TestOp::kSum, count, count % 2 == 0, n, &rng, true));
    World world = worldOf(n);
    const std::vector<std::string> wrong = world.run(calls);
    EXPECT_TRUE(wrong.empty()) << "seed " << seed << ", " << n << " ranks\n" << joined(wrong);
  }
}

// One launch serving every rank (DirectGroupArgs, COLLIE_DIRECT_ONE_LAUNCH): the one-shot's grid holds every rank's
// blocks, each run with its rank's own arguments, at 2..8 ranks with every type and operator, in and out of place,
// offsets equal and not; then grouped calls and a launch per rank alternate, so the call numbers and the scratch's
// parities carry from one form to the other. The seed is printed.
TEST(DirectKernels, OneLaunchServesEveryRankOfAOneShot) {
  const uint64_t seed = collie::test::testSeed();
  const std::vector<collieDataType_t>& types = collie::test::allTypes();
  for (int n = 2; n <= collie::kDirectMaxRanks; ++n) {
    std::mt19937_64 rng(seed ^ (0x2545f4914f6cdd1dull * static_cast<uint64_t>(n)));
    std::vector<Call> calls;
    for (size_t ti = 0; ti < types.size(); ++ti)
      for (int oi = 0; oi < kTestOps; ++oi) {
        const size_t key = ti + static_cast<size_t>(oi + n);
        calls.push_back(makeCall(DirectKind::kOneShotAllReduce, types[ti], static_cast<TestOp>(oi),
                                 kCounts[rng() % std::size(kCounts)], key % 2 == 0, n, &rng, key % 3 != 0));
      }
    World world = worldOf(n);
    std::vector<std::string> wrong = world.runGrouped(calls);
    EXPECT_TRUE(wrong.empty()) << "seed " << seed << ", " << n << " ranks\n" << joined(wrong);
    for (int round = 0; round < 2 && wrong.empty(); ++round) {
      const std::vector<Call> few(calls.begin(), calls.begin() + 3);
      wrong = world.run(few);
      const std::vector<std::string> grouped = world.runGrouped(few);
      wrong.insert(wrong.end(), grouped.begin(), grouped.end());
      EXPECT_TRUE(wrong.empty()) << "seed " << seed << ", " << n << " ranks, round " << round << "\n" << joined(wrong);
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(world.counter(r).seq, calls.size() + 12) << n << " ranks, rank " << r;
  }
}

// A group launch is refused before it starts where one rank's launch would be, or where an entry is not its place's.
TEST(DirectKernels, GroupLaunchesOutsideTheirLimitsAreRefused) {
  collie::DirectGroupArgs g;
  DirectError error;
  collie::DirectCounter counter;
  uint8_t buf[64] = {};
  g.nranks = 2;
  g.blocks = 1;
  for (int r = 0; r < 2; ++r) {
    g.args[r] = acceptedArgs(&error, &counter, buf);
    g.args[r].rank = r;
  }
  const char* why = nullptr;
  EXPECT_EQ(collie::checkDirectGroupLaunch(g, collieFloat32, collie::ReduceOp::kSum, 64, &why), 0);
  collie::DirectGroupArgs x = g;
  x.args[1].rank = 0;
  EXPECT_NE(collie::checkDirectGroupLaunch(x, collieFloat32, collie::ReduceOp::kSum, 64, &why), 0);
  EXPECT_STREQ(why, "an entry whose rank or rank count is not its place's");
  x = g;
  x.nranks = 1;
  EXPECT_NE(collie::checkDirectGroupLaunch(x, collieFloat32, collie::ReduceOp::kSum, 64, &why), 0);
  x = g;
  x.args[1].count = 5;  // 20 bytes: 3 lines in slots of 2
  EXPECT_NE(collie::checkDirectGroupLaunch(x, collieFloat32, collie::ReduceOp::kSum, 64, &why), 0);
  x = g;
  x.blocks = collie::kDirectMaxBlocks + 1;
  EXPECT_NE(collie::checkDirectGroupLaunch(x, collieFloat32, collie::ReduceOp::kSum, 64, &why), 0);
}

// COLLIE_KERNEL_TIMING=1: each launch adds itself, its time and its time until every peer had come, once per rank
// (thread 0 of block 0), and the results are untouched.
TEST(DirectKernels, TimedLaunchesCountThemselvesOnce) {
  std::mt19937_64 rng(collie::test::testSeed() + 23);
  for (DirectKind kind : kKinds) {
    SCOPED_TRACE(collie::test::direct::kindName(kind));
    World world = worldOf(3);
    world.timeLaunches();
    std::vector<Call> calls;
    for (uint64_t count : {1000, 0, 77})
      calls.push_back(makeCall(kind, collieFloat32, TestOp::kSum, count, false, 3, &rng, true));
    const std::vector<std::string> wrong = world.run(calls);
    EXPECT_TRUE(wrong.empty()) << joined(wrong);
    for (int r = 0; r < 3; ++r) {
      const uint64_t* t = world.timing(r);
      EXPECT_EQ(t[0], 3u) << "rank " << r;
      EXPECT_GT(t[1], 0u) << "rank " << r;
      EXPECT_LE(t[2], t[1]) << "rank " << r;
    }
  }
}

// Each launch takes its call's number from the rank's counter and leaves the next there, whatever its grid (the
// worlds here run 1 to 3 blocks): what lets a launch captured into a CUDA graph replay as a new call.
TEST(DirectKernels, EveryLaunchAdvancesItsRanksCounterByOne) {
  std::mt19937_64 rng(collie::test::testSeed() + 31);
  for (int n : {2, 4}) {
    World world = worldOf(n);
    std::vector<Call> calls;
    for (DirectKind kind : kKinds)
      calls.push_back(makeCall(kind, collieFloat32, TestOp::kSum, 1 + rng() % 300, false, n, &rng, true));
    ASSERT_TRUE(world.run(calls).empty());
    ASSERT_TRUE(world.run(calls).empty());
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(world.counter(r).seq, 2 * std::size(kKinds)) << n << " ranks, rank " << r;
      EXPECT_EQ(world.counter(r).done, 0u) << n << " ranks, rank " << r;
    }
  }
}

// A one-shot's line flags hold 32 bits of its call's number: the call after kDirectMaxOneShotCalls fails on every
// rank, with no peer to blame, instead of taking lines an older call left; the barrier kernels' 64-bit epochs run on.
TEST(DirectKernels, AOneShotPastItsFlagsFailsAndTheBarrierKernelsRunOn) {
  std::mt19937_64 rng(collie::test::testSeed() + 37);
  World world = worldOf(3);
  for (int r = 0; r < 3; ++r) world.setCalls(r, collie::kDirectMaxOneShotCalls - 1);
  const Call last = makeCall(DirectKind::kOneShotAllReduce, collieFloat32, TestOp::kSum, 100, false, 3, &rng, true);
  const Call twoShot = makeCall(DirectKind::kTwoShotAllReduce, collieFloat32, TestOp::kSum, 100, false, 3, &rng, true);
  ASSERT_TRUE(world.run({last, twoShot}).empty());  // calls 2^32 - 1 and 2^32
  const Call past = makeCall(DirectKind::kOneShotAllReduce, collieFloat32, TestOp::kSum, 100, false, 3, &rng, true);
  EXPECT_EQ(world.run({past}).size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const DirectError& e = world.error(r);
    EXPECT_EQ(e.code, static_cast<uint32_t>(collieInvalidUsage));
    EXPECT_EQ(e.peer, -1);
    EXPECT_EQ(e.call, collie::kDirectMaxOneShotCalls + 2);
    EXPECT_EQ(world.counter(r).seq, collie::kDirectMaxOneShotCalls + 2);
  }
}

TEST(DirectKernels, AWaitForAPeerThatNeverComesGivesUpWithRankPeerAndCall) {
  std::mt19937_64 rng(5);
  for (DirectKind kind : kKinds) {
    World world = worldOf(3, 200ull * 1000 * 1000);  // 0.2 s
    // Two good calls first, so that the one that fails is not the first.
    std::vector<Call> good;
    for (int k = 0; k < 2; ++k) good.push_back(makeCall(kind, collieFloat32, TestOp::kSum, 40, false, 3, &rng, true));
    ASSERT_TRUE(world.run(good).empty()) << collie::test::direct::kindName(kind);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> wrong =
        world.run({makeCall(kind, collieFloat32, TestOp::kSum, 40, false, 3, &rng, true)}, {0, 1});  // 2 never runs
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(wrong.size(), 2u) << joined(wrong);
    EXPECT_LT(sec, 10.0);
    for (int r : {0, 1}) {
      const DirectError& e = world.error(r);
      SCOPED_TRACE(testing::Message() << collie::test::direct::kindName(kind) << ", rank " << r);
      EXPECT_EQ(e.code, static_cast<uint32_t>(collieTimeout));
      EXPECT_EQ(e.rank, r);
      EXPECT_EQ(e.peer, 2);
      EXPECT_EQ(e.call, 3u);
      EXPECT_GE(e.block, 0);
    }
  }
}

// Peers in other processes: every address a rank announces goes with its window, and each receiver maps it through
// its table. Calls through mapped windows are exact; a peer's buffer in a window a rank has not mapped fails that
// rank's call with collieInvalidUsage naming the peer, with no move, so the peers' exit waits give up too rather
// than finish with its part missing.
TEST(DirectKernels, PeerProcessesBuffersGoThroughTheirWindows) {
  std::mt19937_64 rng(11);
  for (DirectKind kind : kKinds) {
    if (kind == DirectKind::kOneShotAllReduce) continue;  // it reaches peers only through their scratch
    SCOPED_TRACE(collie::test::direct::kindName(kind));
    World world = worldOf(3, 200ull * 1000 * 1000);  // 0.2 s
    world.mapAsProcesses();
    std::vector<Call> good;
    for (bool inPlace : {false, kind != DirectKind::kAllToAll && kind != DirectKind::kAllToAllv})
      good.push_back(makeCall(kind, collieFloat32, TestOp::kSum, 1000, inPlace, 3, &rng, true));
    const std::vector<std::string> first = world.run(good);
    ASSERT_TRUE(first.empty()) << joined(first);
    world.maps(0)[2 * collie::kDirectMaxRanks + 1] = collie::DirectPeerMap{};  // rank 1's outputs, on rank 0
    const std::vector<std::string> wrong =
        world.run({makeCall(kind, collieFloat32, TestOp::kSum, 1000, false, 3, &rng, true)});
    EXPECT_EQ(wrong.size(), 3u) << joined(wrong);
    const DirectError& e = world.error(0);
    EXPECT_EQ(e.code, static_cast<uint32_t>(collieInvalidUsage));
    EXPECT_EQ(e.peer, 1);
    EXPECT_EQ(e.call, 3u);
    for (int r : {1, 2}) EXPECT_EQ(world.error(r).code, static_cast<uint32_t>(collieTimeout)) << "rank " << r;
  }
}

// A barrier kernel's moves are sized by its own call: where a peer's call differs (its signature), every rank
// refuses the call after the entry barrier, before any move, with collieInvalidUsage naming the first peer that
// differs, and no rank waits for an exit the others never announce. Signatures that agree, or a 0 on either side
// (not compared), run as ever.
TEST(DirectKernels, CallsThatDifferAreRefusedBeforeAnyMove) {
  std::mt19937_64 rng(13);
  for (DirectKind kind : kKinds) {
    if (kind == DirectKind::kOneShotAllReduce) continue;  // no barrier: it reaches peers only through their scratch
    SCOPED_TRACE(collie::test::direct::kindName(kind));
    World world = worldOf(3);  // a wait that hangs fails at ctest's limit
    world.signCalls({7, 0, 7});
    const std::vector<std::string> fine =
        world.run({makeCall(kind, collieFloat32, TestOp::kSum, 1000, false, 3, &rng, true)});
    ASSERT_TRUE(fine.empty()) << joined(fine);
    world.signCalls({7, 7, 9});
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<std::string> wrong =
        world.run({makeCall(kind, collieFloat32, TestOp::kSum, 1000, false, 3, &rng, true)});
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
    EXPECT_EQ(wrong.size(), 3u) << joined(wrong);
    for (int r = 0; r < 3; ++r) {
      const DirectError& e = world.error(r);
      EXPECT_EQ(e.code, static_cast<uint32_t>(collieInvalidUsage)) << "rank " << r;
      EXPECT_EQ(e.reason, collie::kDirectCallsDiffer) << "rank " << r;
      EXPECT_EQ(e.peer, r == 2 ? 0 : 2) << "rank " << r;
      EXPECT_EQ(e.call, 2u) << "rank " << r;
    }
  }
}

// The one-shot's lines carry data and the call's number only, no signature: where rank 0's count is larger than
// rank 1's, rank 0 waits for lines rank 1 never sends and fails with collieTimeout naming rank 1 within its timeout,
// while rank 1 reduces its count of elements from each input, which rank 0 sent, and succeeds. Nothing is overrun:
// each rank writes only its own output and its peer's slots of fixed size (docs/cuda-executor.md, "Calls that
// differ").
TEST(DirectKernels, AOneShotWhoseCountsDifferTimesOutOnTheLargerRank) {
  std::mt19937_64 rng(19);
  World world = worldOf(2, 300ull * 1000 * 1000);  // 0.3 s
  Call c = makeCall(DirectKind::kOneShotAllReduce, collieFloat32, TestOp::kSum, 100, false, 2, &rng, true);
  c.counts = {100, 60};
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> wrong = world.run({c});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  ASSERT_EQ(wrong.size(), 1u) << joined(wrong);
  EXPECT_NE(wrong[0].find("rank 0 of 2: failed"), std::string::npos) << wrong[0];
  EXPECT_EQ(world.error(0).code, static_cast<uint32_t>(collieTimeout));
  EXPECT_EQ(world.error(0).peer, 1);
  EXPECT_EQ(world.error(1).code, 0u);  // and its output was checked whole
}

// All-to-all-v's counts are each rank's own: a pair whose counts differ (rank 0 sends rank 1 one element more than
// rank 1 receives) moves nothing between them, and both refuse the call with collieInvalidUsage naming the other,
// after the exit barrier; rank 2's blocks from and to both arrive, and no rank waits long.
TEST(DirectKernels, AllToAllvPairsWhoseCountsDifferAreRefusedOnBothRanks) {
  std::mt19937_64 rng(17);
  Call c;
  do {
    c = makeCall(DirectKind::kAllToAllv, collieInt32, TestOp::kSum, 300, false, 3, &rng, true);
  } while (c.sendCounts[0][1] < 2);
  c.recvCounts[1][0] = c.sendCounts[0][1] - 1;
  World world = worldOf(3);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> wrong = world.run({c});
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_EQ(wrong.size(), 2u) << joined(wrong);
  for (int r : {0, 1}) {
    const DirectError& e = world.error(r);
    EXPECT_EQ(e.code, static_cast<uint32_t>(collieInvalidUsage)) << "rank " << r;
    EXPECT_EQ(e.reason, collie::kDirectCountsDiffer) << "rank " << r;
    EXPECT_EQ(e.peer, 1 - r) << "rank " << r;
    EXPECT_EQ(e.call, 1u) << "rank " << r;
  }
  EXPECT_EQ(world.error(2).code, 0u);  // and its output was checked whole
}

TEST(DirectKernels, TheAbortFlagEndsAWaitAtOnce) {
  std::mt19937_64 rng(6);
  for (DirectKind kind : {DirectKind::kOneShotAllReduce, DirectKind::kTwoShotAllReduce}) {
    World world = worldOf(2);  // a wait of a minute
    std::vector<std::string> wrong;
    const auto t0 = std::chrono::steady_clock::now();
    std::thread rank0(
        [&] { wrong = world.run({makeCall(kind, collieInt32, TestOp::kMax, 9, true, 2, &rng, true)}, {0}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    world.raiseAbort();
    rank0.join();
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    SCOPED_TRACE(collie::test::direct::kindName(kind));
    EXPECT_EQ(wrong.size(), 1u) << joined(wrong);
    EXPECT_LT(sec, 10.0);
    const DirectError& e = world.error(0);
    EXPECT_EQ(e.code, static_cast<uint32_t>(collieRemoteError));
    EXPECT_EQ(e.rank, 0);
    EXPECT_EQ(e.peer, 1);
    EXPECT_EQ(e.call, 1u);
  }
}

TEST(DirectKernels, APacketLineIsTakenOnlyOnceBothHalvesHaveCome) {
  // Rank 0 of 2 runs alone; the test plays rank 1, writing its one line (two floats) half by half into rank 0's
  // scratch at [parity 1][sender 1], as a GPU's vector store may land.
  std::mt19937_64 rng(7);
  World world = worldOf(2);
  const Call c = makeCall(DirectKind::kOneShotAllReduce, collieFloat32, TestOp::kSum, 2, false, 2, &rng, true);
  std::atomic<bool> done{false};
  std::vector<std::string> wrong;
  std::thread rank0([&] {
    wrong = world.run({c}, {0});
    done = true;
  });
  uint64_t data;
  memcpy(&data, c.inputs[1].data(), 8);
  const uint64_t flag = uint64_t{1} << 32;  // call 1
  uint8_t* const line = world.scratch(0) + (1 * 2 + 1) * world.slotLines() * collie::kDirectLineBytes;
  __atomic_store_n(reinterpret_cast<uint64_t*>(line), flag | (data & 0xffffffffu), __ATOMIC_RELAXED);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(done) << "rank 0 took a line with one half of it";
  __atomic_store_n(reinterpret_cast<uint64_t*>(line + 8), flag | (data >> 32), __ATOMIC_RELAXED);
  rank0.join();
  EXPECT_TRUE(wrong.empty()) << joined(wrong);
}

TEST(DirectKernels, LaunchesOutsideTheirLimitsAreRefused) {
  DirectError error;
  collie::DirectCounter counter;
  uint8_t buf[64] = {};
  const DirectArgs a = acceptedArgs(&error, &counter, buf);
  const char* why = nullptr;
  const auto check = [&](const DirectArgs& x, DirectKind kind, collie::ReduceOp op, int blocks) {
    why = nullptr;
    return collie::checkDirectLaunch(x, kind, collieFloat32, op, blocks, 64, &why);
  };
  EXPECT_EQ(check(a, DirectKind::kOneShotAllReduce, collie::ReduceOp::kSum, 1), 0);
  EXPECT_EQ(check(a, DirectKind::kTwoShotAllReduce, collie::ReduceOp::kMin, 128), 0);
  DirectArgs x = a;
  x.count = 5;  // 20 bytes: 3 lines in slots of 2
  EXPECT_NE(check(x, DirectKind::kOneShotAllReduce, collie::ReduceOp::kSum, 1), 0);
  EXPECT_NE(why, nullptr);
  x = a;
  x.premul = 1;
  EXPECT_EQ(check(x, DirectKind::kOneShotAllReduce, collie::ReduceOp::kSum, 1), 0);
  EXPECT_NE(check(x, DirectKind::kTwoShotAllReduce, collie::ReduceOp::kSum, 1), 0);
  EXPECT_NE(check(x, DirectKind::kOneShotAllReduce, collie::ReduceOp::kMax, 1), 0);
  x = a;
  x.nranks = 9;
  EXPECT_NE(check(x, DirectKind::kOneShotAllReduce, collie::ReduceOp::kSum, 1), 0);
  x = a;
  x.counter = nullptr;
  EXPECT_NE(check(x, DirectKind::kAllGather, collie::ReduceOp::kSum, 1), 0);
  EXPECT_NE(check(a, DirectKind::kAllGather, collie::ReduceOp::kSum, collie::kDirectMaxBlocks + 1), 0);
  x = a;
  x.input = nullptr;
  EXPECT_NE(check(x, DirectKind::kAllGather, collie::ReduceOp::kSum, 1), 0);
  x = a;
  x.barriers[1] = nullptr;
  EXPECT_NE(check(x, DirectKind::kReduceScatter, collie::ReduceOp::kSum, 1), 0);
  x = a;
  x.count = collie::kDirectMaxBytes / 4;  // a reduce-scatter's input holds n x count
  EXPECT_NE(check(x, DirectKind::kReduceScatter, collie::ReduceOp::kSum, 1), 0);
  EXPECT_EQ(check(x, DirectKind::kTwoShotAllReduce, collie::ReduceOp::kSum, 1), 0);
}

// The ceilings' kernel (kernels/ceiling_kernels.h), which tests/gpu/ceilings.cc times: n sources summed in source
// order into n destinations, at an odd count and at sources off 16-byte boundaries (a scalar head, then vectors).
TEST(CeilingKernels, SumEverySourceIntoEveryDestination) {
  const uint64_t seed = collie::test::testSeed();
  std::mt19937_64 rng(seed + 29);
  SCOPED_TRACE("seed " + std::to_string(seed));
  collie::emu::Launcher launcher(3, 4);
  for (int n : {1, 2, 5, 8})
    for (size_t offset : {size_t{0}, size_t{1}}) {
      const size_t count = 1001;
      std::vector<std::vector<float>> in(n, std::vector<float>(count + 1)), out(n, std::vector<float>(count + 1, -1));
      collie::CeilingArgs a;
      a.nsrc = a.ndst = n;
      a.count = count;
      for (int p = 0; p < n; ++p) {
        for (float& v : in[p]) v = static_cast<float>(rng() % 1000);
        a.src[p] = in[p].data() + offset;
        a.dst[p] = out[p].data() + offset;
      }
      ASSERT_EQ(collie::emu::launchCeiling(a, &launcher), 0);
      for (size_t i = 0; i < count; ++i) {
        float want = in[0][i + offset];
        for (int p = 1; p < n; ++p) want = in[p][i + offset] + want;
        for (int q = 0; q < n; ++q) ASSERT_EQ(out[q][i + offset], want) << "n " << n << " element " << i;
      }
      for (int q = 0; q < n; ++q) EXPECT_EQ(out[q][offset == 0 ? count : 0], -1) << "a store outside the range";
    }
  collie::CeilingArgs bad;
  bad.nsrc = 9;
  EXPECT_NE(collie::ceilingRefusal(bad, 1, 64), nullptr);
  bad.nsrc = 2;
  bad.ndst = 3;
  EXPECT_NE(collie::ceilingRefusal(bad, 1, 64), nullptr);
  bad.ndst = 2;
  bad.count = 4;  // sources missing
  EXPECT_NE(collie::ceilingRefusal(bad, 1, 64), nullptr);
  EXPECT_NE(collie::emu::launchCeiling(bad, &launcher), 0);
}

}  // namespace
