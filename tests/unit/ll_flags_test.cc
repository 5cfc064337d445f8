// LL flags through many wraps (kernels/device_prims_ll.cuh, "Stale lines").
// An LL line is new when its flag is that of the slice expected, and flags
// repeat every COLLIE_TEST_LL_FLAG_PERIOD slices of a connection (2^15 by default),
// so a line left from a slice exactly one period earlier would pass for new
// unless the sender rewrites its slots in time. These tests shrink the period
// to 256 and run the emulated kernels (ranks as threads, ring algorithms)
// through many wraps:
//  * a full-slot LL call, then short calls (which leave the slot's tail
//    alone) or Simple calls (which leave LL slots alone) until the next
//    full-slot call lands in the same slot exactly one period later: its
//    receiver would take the tail left a period earlier. Before that call,
//    every line of every LL slot must be less than half a period plus nslots
//    slices old (read from the windows), and every result must be exact.
//  * 4 ranks, 2 slots, LL allreduce and allgather calls (6 and 3 slices per
//    connection) mixed, so that the half-period mark also falls inside
//    launches, where each slice rewrites its whole slot.
// Without the rewrite, the age check fails at the first wrap (and the data
// check when the receiver is quick enough to take a stale tail).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collie.h"
#include "common/ll_lines.h"
#include "common/rank_threads.h"
#include "common/test_util.h"

namespace {

using collie::test::ScopedEnv;

constexpr uint32_t kPeriod = 256;
// Ring allreduce of 2 ranks posts 2 slices per connection per call when every chunk fits one slice.
constexpr size_t kFullLL = 2 * 128;   // int32s: a chunk fills a 1024-byte LL slot's 512-byte payload
constexpr size_t kShortLL = 2;        // one int32 per chunk: one line of the slot
constexpr size_t kSimpleUnit = 2048;  // a chunk of 1024 int32s fills a 4096-byte Simple slot

// The settings of every test here: emulated kernels with 2 threads a block, a flag period of 256, small slots.
struct Settings {
  explicit Settings(const char* nslots) : slots("COLLIE_SLOTS", nslots) {}
  ScopedEnv emulate{"COLLIE_TEST_EMULATE_KERNELS", "2"};
  ScopedEnv period{"COLLIE_TEST_LL_FLAG_PERIOD", "256"};
  ScopedEnv algo{"COLLIE_ALGO", "allreduce:ring,allgather:ring"};
  ScopedEnv llSlot{"COLLIE_LL_SLOT_BYTES", "1024"};
  ScopedEnv slot{"COLLIE_SLOT_BYTES", "4096"};
  ScopedEnv channels{"COLLIE_CHANNELS", "1"};
  ScopedEnv slots;
};

class LLFlags : public ::testing::Test {
 protected:
  void SetUp() override { seed_ = collie::test::testSeed(); }

  // One allreduce (or allgather) of `count` int32s per rank on every rank, out of place, checked against the
  // reference.
  void call(const collie::test::Comms& c, size_t count, bool gather = false) {
    const int n = c.size();
    std::vector<std::vector<int32_t>> in(n, std::vector<int32_t>(count)), out(n);
    std::vector<const void*> inputs;
    for (int r = 0; r < n; ++r) {
      collie::test::fillInput(collieInt32, collieSum, r, seed_ + calls_, in[r].data(), count);
      inputs.push_back(in[r].data());
      out[r].assign(gather ? count * n : count, -7777777);  // poison
    }
    std::vector<int32_t> expected;
    if (gather) {
      for (int r = 0; r < n; ++r) expected.insert(expected.end(), in[r].begin(), in[r].end());
    } else {
      expected.resize(count);
      collie::test::referenceAllReduce(collieInt32, collieSum, inputs, count, expected.data());
    }
    std::vector<collieResult_t> rc(n);
    collie::test::onRanks(n, [&](int r) {
      rc[r] = gather ? collieAllGather(in[r].data(), out[r].data(), count, collieInt32, c[r], nullptr)
                     : collieAllReduce(in[r].data(), out[r].data(), count, collieInt32, collieSum, c[r], nullptr);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(rc[r], collieSuccess) << collieGetLastError(c[r]);
      for (size_t i = 0; i < expected.size(); ++i)
        ASSERT_EQ(out[r][i], expected[i]) << "rank " << r << ", element " << i << " of " << expected.size()
                                          << ", call #" << calls_ << ": a stale LL line taken for new?";
    }
    ++calls_;
  }

  // Slices rank `from` has posted to rank `to` (channel 0, the only one here).
  static uint64_t posted(const collie::test::Comms& c, int from, int to) {
    EXPECT_EQ(collie::test::windowLayout(c, to).llFlagPeriod, kPeriod);
    return collie::test::postedSlices(c, from, to);
  }

  // No line of any used connection is as old as half a period plus nslots slices.
  void expectNoStaleLine(const collie::test::Comms& c, const char* when) {
    EXPECT_EQ(collie::test::staleLLLine(c), "") << when;
  }

  // 2 ranks: a full-slot call, then fillers until exactly one period later, then a full-slot call in the same slot
  // again. `simple`: the fillers are mostly Simple calls, which move the count on without touching any LL slot.
  void wrapCycles(const collie::test::Comms& c, bool simple, int cycles) {
    for (int k = 0; k < cycles; ++k) {
      const uint64_t start = posted(c, 0, 1);
      call(c, kFullLL);
      ASSERT_EQ(posted(c, 0, 1), start + 2) << "a full-slot call is expected to post 2 LL slices";
      const uint64_t target = start + kPeriod;
      while (posted(c, 0, 1) < target) {
        const uint64_t left = target - posted(c, 0, 1);
        const uint64_t units = simple ? (left - 2) / 2 : 0;  // keep the last filler an LL call
        const uint64_t before = posted(c, 0, 1);
        call(c, units > 0 ? units * kSimpleUnit : kShortLL);
        ASSERT_EQ(posted(c, 0, 1), before + (units > 0 ? 2 * units : 2)) << "filler slices";
      }
      expectNoStaleLine(c, "before the full-slot call one period on");
      call(c, kFullLL);  // its slices go to the slots of `start` and `start + 1`, whose flags they repeat
      if (HasFatalFailure()) return;
      expectNoStaleLine(c, "after it");
    }
  }

  uint64_t seed_ = 0;
  uint64_t calls_ = 0;
};

TEST_F(LLFlags, ShortSlicesLeaveNoLineAPeriodOld) {
  Settings s("4");
  collie::test::Comms c(2);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  wrapCycles(c, false, 4);
}

TEST_F(LLFlags, SimpleSlicesBetweenLLCallsLeaveNoLineAPeriodOld) {
  Settings s("4");
  collie::test::Comms c(2);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  wrapCycles(c, true, 6);
}

// 4 ranks, 2 slots: a ring allreduce posts 6 LL slices per connection, an allgather 3, so the half-period mark
// falls at every place of a launch: whole slots rewritten one slice at a time, and by the next launch.
TEST_F(LLFlags, TheHalfPeriodMarkInsideALaunch) {
  Settings s("2");
  collie::test::Comms c(4);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  // Short slices, which leave the tails of the slots alone, and about once a period a full-slot allreduce (chunks
  // of 128), which writes them: only the rewrites keep those tails young.
  for (int i = 0; i < 300; ++i) {
    const bool gather = i % 3 == 1;
    call(c, gather ? 1 + i % 2 : i % 61 == 0 ? 4 * 128 : 4 + i % 5, gather);
    if (HasFatalFailure()) return;
    if (i % 10 == 9) expectNoStaleLine(c, "between calls");
  }
  EXPECT_GT(posted(c, 0, 1), 4 * kPeriod) << "the flags went round a few times";
}

// The least period is a power of two of at least 4 x COLLIE_SLOTS, and 16.
TEST(LLFlagPeriod, OnlyPowersOfTwoInRangeAreAccepted) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  struct Case {
    const char* slots;
    const char* period;
    const char* least;  // nullptr: accepted
  };
  for (const Case& c :
       {Case{"4", "8", "16"}, Case{"4", "300", "16"}, Case{"4", "4294967296", "16"}, Case{"4", "-256", "16"},
        Case{"4", "many", "16"}, Case{"16", "32", "64"}, Case{"20", "64", "128"}, Case{"64", "128", "256"},
        Case{"4", "65536", "16"},  // 2^16: the slice part would reach the call's tag (protocol.h, llFlag)
        Case{"4", "16", nullptr}, Case{"16", "64", nullptr}, Case{"64", "256", nullptr}, Case{"4", "32768", nullptr}}) {
    ScopedEnv slots("COLLIE_SLOTS", c.slots);
    ScopedEnv period("COLLIE_TEST_LL_FLAG_PERIOD", c.period);
    collieComm_t comm = nullptr;
    const collieResult_t rc = collieCommInitAll(&comm, 1, nullptr);
    const std::string text = collieGetLastError(nullptr);
    if (c.least == nullptr) {
      EXPECT_EQ(rc, collieSuccess) << c.slots << " slots, period " << c.period << ": " << text;
      if (rc == collieSuccess) collieCommDestroy(comm);
      continue;
    }
    EXPECT_EQ(rc, collieInvalidArgument) << c.slots << " slots, period " << c.period;
    const std::string want = std::string("COLLIE_TEST_LL_FLAG_PERIOD must be a power of two from ") + c.least +
                             " (4 x COLLIE_SLOTS, and 16 at least) to 32768";
    EXPECT_NE(text.find(want), std::string::npos) << text;
  }
}

}  // namespace
