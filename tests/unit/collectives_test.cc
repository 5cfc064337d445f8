// Reduce-scatter, allgather, broadcast, reduce and barrier on the host backend,
// ranks as threads: every type (collie::test::sweepTypes: one per element size on 7-8 ranks and with tiny slots)
// and op, where there is one (rotated but for float32 and int32), in-place and out-of-place, counts 0, 1, small,
// prime and many slices, 1..8 ranks, varied roots; plus tiny slots that force many rounds. Inputs random (seed
// printed), outputs poisoned, references independent (tests/common/test_util.cc).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

using collie::test::Coll;
using collie::test::collHasOp;
using collie::test::collName;

struct Param {
  int nranks;
  bool tinySlots;
};

class CollectivesTest : public ::testing::TestWithParam<Param> {};

TEST_P(CollectivesTest, EveryCollectiveTypeOpCountRootAndPlacement) {
  const Param p = GetParam();
  const uint64_t seed = collie::test::testSeed();
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", p.tinySlots ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", p.tinySlots ? "2" : nullptr);
  Comms comms(p.nranks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t counts[] = {0, 1, 7, 1009, 65537};
  int cases = 0;
  for (Coll coll : {Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce}) {
    for (collieDataType_t type : collie::test::sweepTypes(p.nranks, p.tinySlots)) {
      for (collieRedOp_t op : collie::test::allOps()) {
        if (!collHasOp(coll) && op != collieSum) continue;
        for (size_t count : counts) {
          for (bool inPlace : {false, true}) {
            if (collHasOp(coll) && !collie::test::sweepTakesOp(type, op, count + (inPlace ? 1 : 0))) continue;
            // Roots vary with the case so every rank is root somewhere.
            const int root = static_cast<int>((count + static_cast<size_t>(type) + (inPlace ? 1 : 0)) % p.nranks);
            const std::string err = collie::test::runCollectiveCase(comms, coll, type, op, count, inPlace, root, seed);
            ASSERT_EQ(err, "") << collName(coll) << " nranks " << p.nranks << " " << collie::typeName(type) << " "
                               << collie::opName(op) << " count " << count << " root " << root
                               << (inPlace ? " in-place" : " out-of-place") << " (seed " << seed << ")";
            ++cases;
          }
        }
      }
    }
  }
  printf("%d cases exact (%s; ops rotated, all 5 for float32 and int32)\n", cases,
         collie::test::sweepTypesLabel(p.nranks, p.tinySlots).c_str());
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (int n : {1, 2, 3, 4, 5, 7, 8}) v.push_back({n, false});
  for (int n : {3, 5}) v.push_back({n, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, CollectivesTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return "n" + std::to_string(info.param.nranks) + (info.param.tinySlots ? "_tinyslots" : "");
});

TEST(Collectives, BadRootsAndBuffersAreRejected) {
  Comms comms(1);
  ASSERT_EQ(comms.result, collieSuccess);
  float x[4] = {0};
  EXPECT_EQ(collieBroadcast(x, x, 4, collieFloat32, 1, comms[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("root 1"), std::string::npos);
  EXPECT_EQ(collieReduce(x, x, 4, collieFloat32, collieSum, -1, comms[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieReduceScatter(nullptr, x, 4, collieFloat32, collieSum, comms[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("sendbuff is NULL"), std::string::npos);
  EXPECT_EQ(collieAllGather(x, nullptr, 4, collieFloat32, comms[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieAllGather(x, x, SIZE_MAX / 2, collieFloat32, comms[0], nullptr), collieInvalidArgument);
  EXPECT_EQ(collieBroadcast(x, x, 4, collieFloat32, 0, comms[0], nullptr), collieSuccess);
}

TEST(Collectives, BarrierWaitsForEveryRank) {
  Comms comms(4);
  ASSERT_EQ(comms.result, collieSuccess);
  std::atomic<int> arrived{0};
  std::vector<int> seenAtExit(4);
  onRanks(4, [&](int r) {
    if (r == 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    arrived.fetch_add(1);
    ASSERT_EQ(collieBarrier(comms[r], nullptr), collieSuccess);
    seenAtExit[r] = arrived.load();
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(seenAtExit[r], 4) << "rank " << r << " left the barrier early";
}

}  // namespace

namespace {

// Many ranks as threads (16 and 24 on a 2-core machine): every collective on a
// few types and counts, so waits and back-off hold up when most ranks are descheduled.
TEST(CollectivesManyRanks, SixteenAndTwentyFour) {
  const uint64_t seed = collie::test::testSeed();
  for (int n : {16, 24}) {
    Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce}) {
      for (collieDataType_t type : {collieFloat32, collieInt8, collieBfloat16}) {
        for (size_t count : {size_t{1}, size_t{1009}, size_t{65537}}) {
          // fillInput keeps sums exact for up to 8 ranks only; bf16 uses max here, which is always exact.
          const collieRedOp_t op = type == collieBfloat16 ? collieMax : collieSum;
          const int root = static_cast<int>(count % static_cast<size_t>(n));
          const std::string err =
              collie::test::runCollectiveCase(comms, coll, type, op, count, count == 1009, root, seed);
          ASSERT_EQ(err, "") << collName(coll) << " nranks " << n << " " << collie::typeName(type) << " count " << count
                             << " (seed " << seed << ")";
        }
      }
    }
  }
}

}  // namespace
