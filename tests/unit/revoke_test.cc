// collieCommRevoke with ranks as threads of this process: calls waiting in
// other threads return at once, the revoked communicator reports success and
// refuses collectives, and what NCCL allows after a revoke works: shrink
// (without a rank that never came), split (every rank), destroy.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(CommRevoke, StopsCallsWaitingInOtherThreadsThenShrinkGoesOn) {
  // Ranks 0 and 1 wait in an allreduce for rank 2, which never calls; a 60 s timeout would be the only way out.
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieResult_t> rc(2, collieSuccess);
  std::vector<double> took(2, 0);
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r)
    waiting.emplace_back([&, r] {
      const auto t0 = std::chrono::steady_clock::now();
      float x = 1;
      rc[r] = collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comms[r], nullptr);
      took[r] = secondsSince(t0);
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<collieResult_t> revoked(2, collieInternalError);
  onRanks(2, [&](int r) { revoked[r] = collieCommRevoke(comms[r], COLLIE_REVOKE_DEFAULT); });
  const double revoking = secondsSince(t0);
  for (std::thread& t : waiting) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(revoked[r], collieSuccess) << collieGetLastError(comms[r]);
    EXPECT_NE(rc[r], collieSuccess) << "rank " << r << ": the allreduce cannot succeed without rank 2";
    EXPECT_LT(took[r], 10.0) << "rank " << r << " waited for the timeout instead of the revoke";
    collieResult_t async = collieInternalError;
    EXPECT_EQ(collieCommGetAsyncError(comms[r], &async), collieSuccess);
    EXPECT_EQ(async, collieSuccess) << "rank " << r << ": a revoked communicator is quiescent";
    float x = 1;
    EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comms[r], nullptr), collieInvalidUsage);
    EXPECT_NE(std::string(collieGetLastError(comms[r])).find("comm was revoked"), std::string::npos)
        << collieGetLastError(comms[r]);
    EXPECT_EQ(collieCommFinalize(comms[r]), collieInvalidUsage);
  }
  printf("revoking took %.3f s; the waiting calls returned after %.3f and %.3f s\n", revoking, took[0], took[1]);
  // Revoked, the two go on without rank 2.
  std::vector<collieComm_t> children(2, nullptr);
  const int gone = 2;
  onRanks(2, [&](int r) {
    EXPECT_EQ(collieCommShrink(comms[r], &gone, 1, &children[r], nullptr, COLLIE_SHRINK_DEFAULT), collieSuccess)
        << collieGetLastError(comms[r]);
  });
  std::vector<int> sums(2, -1);
  onRanks(2, [&](int r) {
    int v = 10 * (r + 1);
    if (children[r] != nullptr &&
        collieAllReduce(&v, &v, 1, collieInt32, collieSum, children[r], nullptr) == collieSuccess)
      sums[r] = v;
  });
  EXPECT_EQ(sums, (std::vector<int>{30, 30}));
  for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST(CommRevoke, EveryRankRevokedThenSplit) {
  const int n = 4;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieComm_t> children(n, nullptr);
  std::vector<int> sums(n, -1);
  onRanks(n, [&](int r) {
    if (collieCommRevoke(comms[r], COLLIE_REVOKE_DEFAULT) != collieSuccess) return;
    if (collieCommRevoke(comms[r], COLLIE_REVOKE_DEFAULT) != collieSuccess) return;  // twice is once
    if (collieCommSplit(comms[r], r % 2, 0, &children[r], nullptr) != collieSuccess) return;
    int v = r;
    if (collieAllReduce(&v, &v, 1, collieInt32, collieSum, children[r], nullptr) == collieSuccess) sums[r] = v;
  });
  for (int r = 0; r < n; ++r) EXPECT_NE(children[r], nullptr) << "rank " << r << ": " << collieGetLastError(comms[r]);
  EXPECT_EQ(sums, (std::vector<int>{2, 4, 2, 4}));
  for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST(CommRevoke, RefusedArguments) {
  Comms comms(1);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  EXPECT_EQ(collieCommRevoke(nullptr, COLLIE_REVOKE_DEFAULT), collieInvalidArgument);
  EXPECT_EQ(collieCommRevoke(comms[0], 1), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("revokeFlags 1 is not COLLIE_REVOKE_DEFAULT"),
            std::string::npos)
      << collieGetLastError(comms[0]);
  // Refused, the call changed nothing.
  float x = 2;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comms[0], nullptr), collieSuccess);
  EXPECT_EQ(collieCommFinalize(comms[0]), collieSuccess);
  EXPECT_EQ(collieCommRevoke(comms[0], COLLIE_REVOKE_DEFAULT), collieInvalidUsage);
}

}  // namespace
