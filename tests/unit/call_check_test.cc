// COLLIE_CHECK=1 (core/call_check.h): ranks that disagree on a collective's
// call, count, type, op or root, or whose all-to-all-v counts do not pair up,
// all get collieInvalidUsage naming the ranks that differ, instead of a hang
// or garbage; a rank that rejected its own arguments is named to its peers;
// the communicator stays usable afterwards. Ranks are threads of this process.
#include "core/call_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

constexpr int kRanks = 3;

// Runs call(rank) on every rank at once; returns each rank's result and last-error text.
struct Outcome {
  std::vector<collieResult_t> result = std::vector<collieResult_t>(kRanks, collieSuccess);
  std::vector<std::string> text = std::vector<std::string>(kRanks);
};

template <typename Call>
Outcome onEveryRank(const Comms& comms, Call call) {
  Outcome o;
  onRanks(comms.size(), [&](int r) {
    o.result[static_cast<size_t>(r)] = call(r);
    o.text[static_cast<size_t>(r)] = collieGetLastError(comms[r]);
  });
  return o;
}

// Every rank failed with `code` and a sentence containing `needle`.
void expectAll(const Outcome& o, collieResult_t code, const std::string& needle) {
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(o.result[static_cast<size_t>(r)], code) << "rank " << r << ": " << o.text[static_cast<size_t>(r)];
    EXPECT_NE(o.text[static_cast<size_t>(r)].find(needle), std::string::npos)
        << "rank " << r << ": " << o.text[static_cast<size_t>(r)];
  }
}

// A correct allreduce on every rank afterwards: the check left the data path alone.
void expectStillUsable(const Comms& comms) {
  std::vector<float> x(kRanks);
  const Outcome o = onEveryRank(comms, [&](int r) {
    x[static_cast<size_t>(r)] = static_cast<float>(r + 1);
    return collieAllReduce(&x[static_cast<size_t>(r)], &x[static_cast<size_t>(r)], 1, collieFloat32, collieSum,
                           comms[r], nullptr);
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieSuccess) << o.text[static_cast<size_t>(r)];
    EXPECT_EQ(x[static_cast<size_t>(r)], 6.0f);
  }
}

TEST(CallCheckWording, NamesTheValuesAndTheRanksHoldingThem) {
  EXPECT_EQ(collie::describeDisagreement("count", {"8", "8", "7"}), "count is 8 on ranks 0-1 and 7 on rank 2");
  EXPECT_EQ(collie::describeDisagreement("root", {"0", "1", "0", "2", "0", "0"}),
            "root is 0 on ranks 0,2,4-5, 1 on rank 1 and 2 on rank 3");
}

class CallCheck : public ::testing::Test {
 protected:
  ScopedEnv check_{"COLLIE_CHECK", "1"};
  ScopedEnv timeout_{"COLLIE_TIMEOUT", "30"};  // a failure of the check itself must not hang the suite
  Comms comms_{kRanks};
};

TEST_F(CallCheck, AgreeingCallsRunAndAreCorrect) {
  ASSERT_EQ(comms_.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::vector<int32_t>> buf(kRanks, std::vector<int32_t>(1000));
  const Outcome o = onEveryRank(comms_, [&](int r) {
    for (size_t i = 0; i < buf[r].size(); ++i) buf[r][i] = r * 1000 + static_cast<int32_t>(i);
    collieResult_t res =
        collieAllReduce(buf[r].data(), buf[r].data(), buf[r].size(), collieInt32, collieMax, comms_[r], nullptr);
    if (res == collieSuccess)
      res = collieBroadcast(buf[r].data(), buf[r].data(), 10, collieInt32, 1, comms_[r], nullptr);
    if (res == collieSuccess) res = collieBarrier(comms_[r], nullptr);
    return res;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieSuccess) << o.text[static_cast<size_t>(r)];
    EXPECT_EQ(buf[r][999], 2 * 1000 + 999);
  }
}

TEST_F(CallCheck, DifferentCountsFailOnEveryRank) {
  ASSERT_EQ(comms_.result, collieSuccess);
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(8, 1.0f));
  const Outcome o = onEveryRank(comms_, [&](int r) {
    return collieAllReduce(buf[r].data(), buf[r].data(), r == 2 ? 7 : 8, collieFloat32, collieSum, comms_[r], nullptr);
  });
  expectAll(o, collieInvalidUsage, "count is 8 on ranks 0-1 and 7 on rank 2");
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(buf[r][0], 1.0f) << "the data path must not have run";
  expectStillUsable(comms_);
}

TEST_F(CallCheck, DifferentRootsTypesOpsAndCallsAreNamed) {
  ASSERT_EQ(comms_.result, collieSuccess);
  std::vector<std::vector<double>> buf(kRanks, std::vector<double>(4, 1.0));
  expectAll(onEveryRank(comms_,
                        [&](int r) {
                          return collieBroadcast(buf[r].data(), buf[r].data(), 4, collieFloat64, r == 1 ? 1 : 0,
                                                 comms_[r], nullptr);
                        }),
            collieInvalidUsage, "root is 0 on ranks 0,2 and 1 on rank 1");
  expectAll(onEveryRank(comms_,
                        [&](int r) {
                          return collieReduce(buf[r].data(), buf[r].data(), 2, r == 0 ? collieFloat32 : collieFloat64,
                                              r == 2 ? collieMax : collieSum, 0, comms_[r], nullptr);
                        }),
            collieInvalidUsage, "op is sum on ranks 0-1 and max on rank 2");
  const Outcome calls = onEveryRank(comms_, [&](int r) {
    if (r == 1) return collieBarrier(comms_[r], nullptr);
    return collieAllReduce(buf[r].data(), buf[r].data(), 1, collieUint8, collieSum, comms_[r], nullptr);
  });
  expectAll(calls, collieInvalidUsage, "the call is collieAllReduce on ranks 0,2 and collieBarrier on rank 1");
  expectStillUsable(comms_);
}

TEST_F(CallCheck, ARankThatRejectedItsArgumentsIsNamedToItsPeers) {
  ASSERT_EQ(comms_.result, collieSuccess);
  std::vector<float> x(kRanks, 1.0f);
  const Outcome o = onEveryRank(comms_, [&](int r) {
    return collieAllReduce(&x[static_cast<size_t>(r)], r == 1 ? nullptr : &x[static_cast<size_t>(r)], 1, collieFloat32,
                           collieSum, comms_[r], nullptr);
  });
  EXPECT_EQ(o.result[1], collieInvalidArgument);
  EXPECT_NE(o.text[1].find("recvbuff is NULL"), std::string::npos) << o.text[1];
  for (int r : {0, 2}) {
    EXPECT_EQ(o.result[static_cast<size_t>(r)], collieInvalidUsage);
    EXPECT_NE(o.text[static_cast<size_t>(r)].find("rank 1 rejected its arguments (collieAllReduce: recvbuff is NULL"),
              std::string::npos)
        << o.text[static_cast<size_t>(r)];
  }
  expectStillUsable(comms_);
}

TEST_F(CallCheck, AllToAllvCountsThatDoNotPairUpAreNamed) {
  ASSERT_EQ(comms_.result, collieSuccess);
  // Everyone sends 2 to everyone, but rank 2 expects 3 from rank 0.
  std::vector<std::vector<int>> in(kRanks, std::vector<int>(2 * kRanks, 5)), out(kRanks, std::vector<int>(4 * kRanks));
  const Outcome o = onEveryRank(comms_, [&](int r) {
    std::vector<size_t> sc(kRanks, 2), sd(kRanks), rc(kRanks, 2), rd(kRanks);
    for (int p = 0; p < kRanks; ++p) {
      sd[static_cast<size_t>(p)] = 2 * static_cast<size_t>(p);
      rd[static_cast<size_t>(p)] = 4 * static_cast<size_t>(p);
    }
    if (r == 2) rc[0] = 3;
    return collieAllToAllv(in[r].data(), sc.data(), sd.data(), out[r].data(), rc.data(), rd.data(), collieInt32,
                           comms_[r], nullptr);
  });
  expectAll(o, collieInvalidUsage, "rank 0 sends 2 elements to rank 2, which expects 3 from it");
  expectStillUsable(comms_);
}

TEST_F(CallCheck, OneThreadDrivingEveryRankInAGroupIsCheckedAtGroupEnd) {
  ASSERT_EQ(comms_.result, collieSuccess);
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(16, 1.0f));
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(collieAllReduce(buf[r].data(), buf[r].data(), 16, collieFloat32, collieSum, comms_[r], nullptr),
              collieSuccess);
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  EXPECT_EQ(buf[0][15], 3.0f);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(
        collieAllReduce(buf[r].data(), buf[r].data(), r == 0 ? 15 : 16, collieFloat32, collieSum, comms_[r], nullptr),
        collieSuccess);
  EXPECT_EQ(collieGroupEnd(), collieInvalidUsage);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_NE(std::string(collieGetLastError(comms_[r])).find("count is 15 on rank 0 and 16 on ranks 1-2"),
              std::string::npos)
        << collieGetLastError(comms_[r]);
  expectStillUsable(comms_);
}

}  // namespace
