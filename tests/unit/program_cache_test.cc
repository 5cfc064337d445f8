// The CUDA executor's program cache (executor/program_cache.h) on the CPU:
// found by content (not by padding bytes), bounded, and never handing out a
// block a launch may still read or a captured graph may replay.
#include "executor/program_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "common/test_util.h"

namespace collie {
namespace {

// A program of `n` steps whose counts come from `tag`; `junk` fills the padding bytes first.
std::vector<Step> makeProgram(size_t n, uint64_t tag, int junk = 0) {
  std::vector<Step> steps(n);
  for (size_t i = 0; i < n; ++i) {
    Step& s = steps[i];
    std::memset(static_cast<void*>(&s), junk, sizeof(s));
    s.op = i % 2 ? StepOp::kRecvReduceSend : StepOp::kSend;
    s.sendPeer = static_cast<int32_t>(i % 7);
    s.recvPeer = static_cast<int32_t>((i + 3) % 7);
    s.peerCount = 0;
    s.src = Range{Buffer::kInput, i * 10};
    s.dst = Range{Buffer::kOutput, i * 10 + 1};
    s.count = tag + i;
    s.recvCount = 0;
    s.finalize = i + 1 == n;
    s.joined = false;
    s.peerDispl = false;
  }
  return steps;
}

// Distinct fake device addresses (never dereferenced).
void* block(uintptr_t i) { return reinterpret_cast<void*>(0x10000 + 0x1000 * i); }

// A free block for a program of `steps` steps, or nullptr.
void* takeFree(ProgramCache& cache, size_t steps) {
  size_t bytes = 0;
  void* b = cache.takeFree(steps, &bytes);
  if (b != nullptr) {
    EXPECT_GE(bytes, ProgramCache::blockBytes(steps));
  }
  return b;
}

const size_t k50 = ProgramCache::blockBytes(50);

TEST(ProgramCache, FoundByContentNotByPaddingBytes) {
  ProgramCache cache(ProgramCache::Limits{});
  const std::vector<Step> a = makeProgram(50, 1000, 0x00);
  const std::vector<Step> b = makeProgram(50, 1000, 0xAB);  // equal fields, other padding
  ASSERT_NE(std::memcmp(a.data(), b.data(), a.size() * sizeof(Step)), 0) << "the padding should differ";
  EXPECT_EQ(cache.find(a, 1, false), nullptr);
  cache.insert(a, block(1), k50, 1, false);
  EXPECT_EQ(cache.find(b, 2, false), block(1));
  EXPECT_EQ(cache.find(makeProgram(50, 1001), 2, false), nullptr) << "another count is another program";
  EXPECT_EQ(cache.find(makeProgram(49, 1000), 2, false), nullptr) << "another length is another program";
  // Every field of a step counts.
  const std::vector<void (*)(Step&)> changes = {
      [](Step& s) { s.op = StepOp::kCopy; },
      [](Step& s) { s.sendPeer += 1; },
      [](Step& s) { s.recvPeer += 1; },
      [](Step& s) { s.src.buffer = Buffer::kScratch; },
      [](Step& s) { s.src.offset += 1; },
      [](Step& s) { s.dst.buffer = Buffer::kScratch; },
      [](Step& s) { s.dst.offset += 1; },
      [](Step& s) { s.count += 1; },
      [](Step& s) { s.recvCount += 1; },
      [](Step& s) { s.finalize = !s.finalize; },
      [](Step& s) { s.joined = !s.joined; },
      [](Step& s) { s.peerCount += 1; },
      [](Step& s) { s.peerDispl = !s.peerDispl; },
  };
  for (size_t i = 0; i < changes.size(); ++i) {
    std::vector<Step> c = a;
    changes[i](c[7]);
    EXPECT_EQ(cache.find(c, 2, false), nullptr) << "change " << i << " of one step is another program";
  }
}

TEST(ProgramCache, AFreeBlockUpToFourTimesLargerServesASmallerProgram) {
  ProgramCache cache(ProgramCache::Limits{});
  const size_t small = ProgramCache::blockBytes(50), n4 = (4 * small) / sizeof(Step), n8 = (8 * small) / sizeof(Step);
  cache.release(block(1), ProgramCache::blockBytes(n8));
  size_t bytes = 0;
  EXPECT_EQ(cache.takeFree(50, &bytes), nullptr) << "8 times larger: kept for a large program";
  cache.release(block(2), ProgramCache::blockBytes(n4));
  EXPECT_EQ(cache.takeFree(50, &bytes), block(2));
  EXPECT_EQ(bytes, 4 * small);
  EXPECT_EQ(cache.takeFree(n8, &bytes), block(1));
}

TEST(ProgramCache, BlockSizesArePowersOfTwoThatHoldTheProgram) {
  EXPECT_EQ(ProgramCache::blockBytes(1), 256u);
  for (size_t n : {1, 3, 41, 64, 100, 1000, 5000}) {
    const size_t b = ProgramCache::blockBytes(n);
    EXPECT_GE(b, n * sizeof(Step));
    EXPECT_LT(b / 2, std::max<size_t>(256, n * sizeof(Step)));
    EXPECT_EQ(b & (b - 1), 0u) << b;
  }
}

TEST(ProgramCache, BlocksAreReusedOnlyAfterTheLaunchesThatReadThemFinished) {
  ProgramCache cache(ProgramCache::Limits{2, 1u << 20});
  for (uint64_t k = 1; k <= 4; ++k) cache.insert(makeProgram(50, 100 * k), block(k), k50, k, false);
  EXPECT_TRUE(cache.overLimit());
  cache.completed(0);
  EXPECT_EQ(cache.entries(), 4u) << "launch 1 may still read its program";
  EXPECT_EQ(takeFree(cache, 50), nullptr);
  // A hit moves program 1 to launch 5: it is now the most recently used.
  EXPECT_EQ(cache.find(makeProgram(50, 100), 5, false), block(1));
  cache.completed(3);  // launches 1-3 finished: programs 2 and 3 may go, 1 (launch 5) and 4 stay
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_FALSE(cache.overLimit());
  EXPECT_EQ(cache.find(makeProgram(50, 100), 6, false), block(1));
  EXPECT_EQ(cache.find(makeProgram(50, 400), 6, false), block(4));
  EXPECT_EQ(cache.find(makeProgram(50, 200), 6, false), nullptr);
  std::set<void*> reused;
  for (void* b = takeFree(cache, 50); b != nullptr; b = takeFree(cache, 50)) reused.insert(b);
  EXPECT_EQ(reused, (std::set<void*>{block(2), block(3)}));
  EXPECT_EQ(takeFree(cache, 1000), nullptr) << "a smaller block is not handed out for a larger program";
}

TEST(ProgramCache, ProgramsOfCapturedLaunchesAreNeverReused) {
  ProgramCache cache(ProgramCache::Limits{1, 1u << 20});
  cache.insert(makeProgram(50, 1), block(1), k50, 1, true);  // uploaded during a capture
  cache.insert(makeProgram(50, 2), block(2), k50, 2, false);
  cache.insert(makeProgram(50, 3), block(3), k50, 3, false);
  EXPECT_EQ(cache.find(makeProgram(50, 3), 4, true), block(3));  // found during a capture: pinned from now on
  EXPECT_FALSE(cache.overLimit()) << "pinned programs do not count against the limits";
  cache.insert(makeProgram(50, 5), block(5), k50, 5, false);
  EXPECT_TRUE(cache.overLimit());
  cache.completed(1000);
  EXPECT_EQ(cache.entries(), 2u) << "the unpinned ones go, the pinned stay";
  std::set<void*> reused;
  for (void* b = takeFree(cache, 50); b != nullptr; b = takeFree(cache, 50)) reused.insert(b);
  EXPECT_EQ(reused, (std::set<void*>{block(2), block(5)}));
  EXPECT_EQ(cache.find(makeProgram(50, 1), 1001, false), nullptr) << "program 1 is its graph's own copy";
  EXPECT_EQ(cache.find(makeProgram(50, 3), 1001, false), block(3));
}

// A program uploaded during a capture is copied by a node of the graph, at
// each replay: before the first, its block holds nothing. No other launch,
// eager or captured, may find it; once its graph is gone the block is free.
TEST(ProgramCache, AGraphsOwnCopyIsFoundByNoneAndFreedWithItsGraph) {
  ProgramCache cache(ProgramCache::Limits{4, 1u << 20});
  cache.insert(makeProgram(50, 1), block(1), k50, 1, true);
  EXPECT_EQ(cache.find(makeProgram(50, 1), 2, false), nullptr) << "an eager launch would run before any replay";
  EXPECT_EQ(cache.find(makeProgram(50, 1), 2, true), nullptr) << "another graph may replay before this one";
  cache.insert(makeProgram(50, 1), block(2), k50, 2, false);  // the eager launch uploads its own
  EXPECT_EQ(cache.find(makeProgram(50, 1), 3, false), block(2));
  EXPECT_FALSE(cache.overLimit());
  cache.completed(1000);
  EXPECT_EQ(takeFree(cache, 50), nullptr) << "the graph may still replay block 1";
  cache.unpin(block(1));  // the graph is gone, with its replays
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_EQ(takeFree(cache, 50), block(1));
  EXPECT_EQ(cache.find(makeProgram(50, 1), 4, false), block(2));
  cache.unpin(block(1));  // a stale unpin changes nothing
  EXPECT_EQ(cache.entries(), 1u);
}

// Each graph that captured a launch reading a program pins it once; when the
// last of them is gone (unpin), the program is evicted like any other.
TEST(ProgramCache, AProgramIsUnpinnedWhenEveryGraphThatPinnedItIsGone) {
  ProgramCache cache(ProgramCache::Limits{1, 1u << 20});
  cache.insert(makeProgram(50, 1), block(1), k50, 1, false);     // an eager launch uploads it
  EXPECT_EQ(cache.find(makeProgram(50, 1), 2, true), block(1));  // graph A
  EXPECT_EQ(cache.find(makeProgram(50, 1), 2, true), block(1));  // graph B
  cache.insert(makeProgram(50, 3), block(3), k50, 3, false);
  cache.unpin(block(1));  // A is gone, B may still replay it
  cache.unpin(block(7));  // no such program: nothing happens
  EXPECT_FALSE(cache.overLimit());
  cache.completed(1000);
  EXPECT_EQ(cache.find(makeProgram(50, 1), 4, false), block(1)) << "still pinned by graph B";
  cache.unpin(block(1));  // B is gone
  EXPECT_TRUE(cache.overLimit()) << "it counts against the limits again";
  cache.completed(3);
  EXPECT_EQ(cache.entries(), 1u) << "program 3 goes; launch 4 may still read program 1";
  EXPECT_EQ(takeFree(cache, 50), block(3));
  cache.insert(makeProgram(50, 5), block(5), k50, 5, false);
  cache.completed(5);
  EXPECT_EQ(cache.entries(), 0u);
  std::set<void*> reused;
  for (void* b = takeFree(cache, 50); b != nullptr; b = takeFree(cache, 50)) reused.insert(b);
  EXPECT_EQ(reused, (std::set<void*>{block(1), block(5)}));
  cache.unpin(block(1));  // a stale unpin of an evicted program changes nothing
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_FALSE(cache.overLimit());
}

TEST(ProgramCache, TheByteLimitBoundsLargePrograms) {
  const size_t big = ProgramCache::blockBytes(2000);
  ProgramCache cache(ProgramCache::Limits{1000, 2 * big});
  for (uint64_t k = 1; k <= 3; ++k) cache.insert(makeProgram(2000, k), block(k), big, k, false);
  EXPECT_TRUE(cache.overLimit());
  cache.completed(3);
  EXPECT_FALSE(cache.overLimit());
  EXPECT_LE(cache.entries(), 2u);
  EXPECT_EQ(cache.entries() + cache.freeBlocks(), 3u);
  EXPECT_EQ(cache.blocks().size(), 3u);
}

TEST(ProgramCache, AFailedUploadGivesItsBlockBack) {
  ProgramCache cache(ProgramCache::Limits{});
  cache.release(block(9), k50);
  EXPECT_EQ(takeFree(cache, 50), block(9));
  EXPECT_EQ(takeFree(cache, 50), nullptr);
}

// The executor's use, as a model: launches read programs drawn at random
// (a few recurring, most new), finish some launches later, and the executor
// learns of it late. No block may be handed out while a launch that reads it
// is unfinished, no block may be held twice, and the blocks stay bounded.
TEST(ProgramCache, RandomLaunchesNeverShareABlockStillRead) {
  const uint64_t seed = test::testSeed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ProgramCache cache(ProgramCache::Limits{8, 1u << 20});
  std::map<void*, uint64_t> lastReader;  // block -> last launch that reads it
  std::map<void*, size_t> sizeOf;        // block -> its bytes
  uintptr_t allocated = 0;
  uint64_t finished = 0;
  for (uint64_t launch = 1; launch <= 3000; ++launch) {
    if (launch % 8 == 0) finished = launch - 1 - rng() % 8;  // learnt late, some launches behind
    if (cache.overLimit()) cache.completed(finished);
    const uint64_t tag = rng() % 4 == 0 ? rng() % 5 : 1000 + launch;  // recurring or new
    const size_t n = 41 + tag % 3 * 40;
    const std::vector<Step> steps = makeProgram(n, tag);
    void* b = cache.find(steps, launch, false);
    if (b == nullptr) {
      size_t bytes = 0;
      b = cache.takeFree(n, &bytes);
      if (b != nullptr) {
        ASSERT_LE(lastReader[b], finished) << "block handed out while launch " << lastReader[b] << " reads it";
        ASSERT_EQ(bytes, sizeOf[b]) << "a block's size changed";
        ASSERT_GE(bytes, n * sizeof(Step));
      } else {
        b = block(++allocated);
        bytes = sizeOf[b] = ProgramCache::blockBytes(n);
      }
      cache.insert(steps, b, bytes, launch, false);
    }
    lastReader[b] = launch;
    const std::vector<void*> all = cache.blocks();
    ASSERT_EQ(std::set<void*>(all.begin(), all.end()).size(), all.size()) << "a block held twice";
    ASSERT_EQ(all.size(), allocated);
  }
  // Bounded by the limit and the launches not known to be finished (up to 16), not by the 3000 launches (about
  // 2250 different programs).
  std::printf("%zu blocks for 3000 launches\n", static_cast<size_t>(allocated));
  EXPECT_LE(allocated, 8u + 16u + 8u) << "blocks grew with the launches";
}

}  // namespace
}  // namespace collie
