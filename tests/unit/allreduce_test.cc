// Allreduce on the host backend with ranks as threads of one process: every
// type (collie::test::sweepTypes; one per element size on 7-8 ranks and with tiny slots) and op (rotated but for
// float32 and int32), in-place and out-of-place, counts 0, 1,
// small, prime and large, 1..8 ranks, with the default slots and with tiny slots that force many slices per step.
// Inputs are random (seed printed), outputs poisoned, and the reference is computed independently
// (tests/common/test_util.cc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::allOps;
using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

struct Param {
  int nranks;
  bool tinySlots;
};

class AllReduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllReduceTest, EveryTypeOpCountAndPlacement) {
  const Param p = GetParam();
  const uint64_t seed = collie::test::testSeed();
  // Tiny slots make a 1009-element step many slices and wrap the slot FIFO many times.
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", p.tinySlots ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", p.tinySlots ? "2" : nullptr);
  Comms c(p.nranks);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t counts[] = {0, 1, 2, 7, 1009, 65537};
  int cases = 0;
  for (collieDataType_t type : collie::test::sweepTypes(p.nranks, p.tinySlots)) {
    for (collieRedOp_t op : allOps()) {
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          if (!collie::test::sweepTakesOp(type, op, count + (inPlace ? 1 : 0))) continue;
          ++cases;
          const std::string detail =
              collie::test::runCollectiveCase(c, collie::test::Coll::kAllReduce, type, op, count, inPlace, 0, seed);
          ASSERT_EQ(detail, "") << "nranks " << p.nranks << " " << collie::typeName(type) << " " << collie::opName(op)
                                << " count " << count << (inPlace ? " in-place" : " out-of-place") << ": " << detail
                                << " (seed " << seed << ")";
        }
      }
    }
  }
  printf("nranks %d%s: %d cases exact (%s; ops rotated, all 5 for float32 and int32)\n", p.nranks,
         p.tinySlots ? " tiny slots" : "", cases, collie::test::sweepTypesLabel(p.nranks, p.tinySlots).c_str());
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (int n = 1; n <= 8; ++n) v.push_back({n, false});
  for (int n : {2, 3, 5, 8}) v.push_back({n, true});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduceTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return "n" + std::to_string(info.param.nranks) + (info.param.tinySlots ? "_tinyslots" : "");
});

// 64 MiB per rank: many slices per step, and chunks that are not multiples of the slice.
TEST(AllReduceLarge, SixtyFourMiB) {
  const uint64_t seed = collie::test::testSeed();
  struct Case {
    int n;
    collieDataType_t type;
    collieRedOp_t op;
    bool inPlace;
  };
  for (const Case& k : {Case{8, collieFloat32, collieSum, true}, Case{5, collieBfloat16, collieAvg, false},
                        Case{3, collieInt8, collieMax, false}}) {
    Comms c(k.n);
    ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
    const size_t count = (64u << 20) / collie::typeSize(k.type) + 3;  // +3: not a multiple of anything
    EXPECT_EQ(
        collie::test::runCollectiveCase(c, collie::test::Coll::kAllReduce, k.type, k.op, count, k.inPlace, 0, seed), "")
        << "nranks " << k.n << " (seed " << seed << ")";
  }
}

TEST(AllReduceErrors, BadArgumentsAreRejectedWithASentence) {
  Comms c(1);
  ASSERT_EQ(c.result, collieSuccess);
  collieComm_t comm = c.comms[0];
  float buf[4] = {0};
  EXPECT_EQ(collieAllReduce(nullptr, buf, 4, collieFloat32, collieSum, comm, nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comm)).find("sendbuff is NULL"), std::string::npos)
      << collieGetLastError(comm);
  EXPECT_EQ(collieAllReduce(buf, buf, 4, static_cast<collieDataType_t>(12), collieSum, comm, nullptr),
            collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comm)).find("datatype 12"), std::string::npos);
  EXPECT_EQ(collieAllReduce(buf, buf, 4, collieFloat32, static_cast<collieRedOp_t>(-1), comm, nullptr),
            collieInvalidArgument);
  EXPECT_EQ(collieAllReduce(buf, buf, 4, collieFloat32, static_cast<collieRedOp_t>(collieNumOps), comm, nullptr),
            collieInvalidArgument);  // no pre-multiplied sum was made on this comm
  EXPECT_NE(std::string(collieGetLastError(comm)).find("not an operator of this communicator"), std::string::npos);
  EXPECT_EQ(collieAllReduce(buf, buf, SIZE_MAX / 2, collieFloat32, collieSum, comm, nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comm)).find("overflows"), std::string::npos);
  EXPECT_EQ(collieAllReduce(buf, buf, 4, collieFloat32, collieSum, nullptr, nullptr), collieInvalidArgument);
  // Still healthy after rejected calls.
  EXPECT_EQ(collieAllReduce(buf, buf, 4, collieFloat32, collieSum, comm, nullptr), collieSuccess);
}

TEST(AllReduceErrors, DestroyedAndFinalizedCommunicators) {
  std::vector<collieComm_t> comms(1);
  ASSERT_EQ(collieCommInitAll(comms.data(), 1, nullptr), collieSuccess);
  float buf[1] = {1};
  ASSERT_EQ(collieCommFinalize(comms[0]), collieSuccess);
  EXPECT_EQ(collieAllReduce(buf, buf, 1, collieFloat32, collieSum, comms[0], nullptr), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("finalized"), std::string::npos);
  ASSERT_EQ(collieCommDestroy(comms[0]), collieSuccess);
  EXPECT_EQ(collieAllReduce(buf, buf, 1, collieFloat32, collieSum, comms[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("not a live communicator"), std::string::npos);
  EXPECT_EQ(collieCommDestroy(comms[0]), collieInvalidArgument);
}

// A rank that never calls the collective: the others time out with a line
// naming the rank they wait on, and the communicator then reports itself broken.
TEST(AllReduceErrors, MissingRankTimesOutAndNamesIt) {
  ScopedEnv timeout("COLLIE_TIMEOUT", "1");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");  // the ring's predecessor is the rank named below
  Comms c(3);
  ASSERT_EQ(c.result, collieSuccess);
  std::vector<float> buf(1000, 1.0f);
  std::vector<collieResult_t> rc(2);
  onRanks(2, [&](int r) {
    std::vector<float> mine = buf;
    rc[static_cast<size_t>(r)] = collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum,
                                                 c.comms[static_cast<size_t>(r)], nullptr);
  });
  for (int r = 0; r < 2; ++r) {
    const std::string msg = collieGetLastError(c.comms[static_cast<size_t>(r)]);
    // Rank 1 waits on rank 0, which may time out first and give up: rank 1 then fails at once, naming it
    // (executor/protocol.h, "Giving up"), rather than timing out in turn.
    const collieResult_t want = r == 1 && rc[1] == collieRemoteError ? collieRemoteError : collieTimeout;
    EXPECT_EQ(rc[static_cast<size_t>(r)], want) << msg;
    if (want == collieRemoteError) {
      EXPECT_NE(msg.find("rank 0 had given up this call first"), std::string::npos) << msg;
    }
    EXPECT_NE(msg.find("rank " + std::to_string(r) + " waiting on rank"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ring allreduce #0"), std::string::npos) << msg;
    collieResult_t async = collieSuccess;
    EXPECT_EQ(collieCommGetAsyncError(c.comms[static_cast<size_t>(r)], &async), collieSuccess);
    EXPECT_EQ(async, want);
  }
  // Rank 0 waits on rank 2 (its ring predecessor) which never came: always a timeout.
  EXPECT_NE(std::string(collieGetLastError(c.comms[0])).find("waiting on rank 2"), std::string::npos);
  EXPECT_EQ(collieAllReduce(buf.data(), buf.data(), 1, collieFloat32, collieSum, c.comms[0], nullptr), collieTimeout);
  // The refusal names the failure that broke the communicator, in full: the rank waited on is where to look.
  const std::string later = collieGetLastError(c.comms[0]);
  EXPECT_NE(later.find("broken by an earlier failure (collieTimeout: collieAllReduce: rank 0 waiting on rank 2 at "
                       "step "),
            std::string::npos)
      << later;
}

}  // namespace
