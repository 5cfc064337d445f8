// Making communicators the ways NCCL programs do beyond plain init:
// collieCommSplit (colours, keys, NOCOLOR, inherited options, inside a
// group), collieCommInitRank of several ranks queued by one thread inside a
// group, and config.blocking = 0. Ranks are threads of this process.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "collie.h"
#include "common/rank_threads.h"
#include "core/comm.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;
using collie::test::ScopedEnv;

// Each rank of `comms` allreduces its parent rank over `c`; returns the sum it got.
int sumOfParentRanks(collieComm_t c, int parentRank) {
  int v = parentRank;
  if (collieAllReduce(&v, &v, 1, collieInt32, collieSum, c, nullptr) != collieSuccess) return -1;
  return v;
}

TEST(CommSplit, ColoursKeysAndNoColour) {
  const int n = 7;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieComm_t> children(n, reinterpret_cast<collieComm_t>(0x1));
  std::vector<int> newRank(n, -1), newSize(n, -1), sums(n, -1);
  std::vector<collieResult_t> results(n, collieInternalError);
  // Colours 0 and 1 by parity, rank 6 opts out; keys reverse the order.
  auto colour = [](int r) { return r == 6 ? COLLIE_SPLIT_NOCOLOR : r % 2; };
  onRanks(n, [&](int r) {
    results[r] = collieCommSplit(comms[r], colour(r), n - r, &children[r], nullptr);
    if (results[r] != collieSuccess || children[r] == nullptr) return;
    collieCommUserRank(children[r], &newRank[r]);
    collieCommCount(children[r], &newSize[r]);
    sums[r] = sumOfParentRanks(children[r], r);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], collieSuccess) << r << ": " << collieGetLastError(comms[r]);
    if (r == 6) {
      EXPECT_EQ(children[r], nullptr);
      continue;
    }
    // Members of r's colour, in descending parent rank (their keys ascend).
    std::vector<int> members;
    for (int q = n - 1; q >= 0; --q)
      if (colour(q) == colour(r)) members.push_back(q);
    EXPECT_EQ(newSize[r], static_cast<int>(members.size())) << r;
    EXPECT_EQ(newRank[r], std::find(members.begin(), members.end(), r) - members.begin()) << r;
    EXPECT_EQ(sums[r], std::accumulate(members.begin(), members.end(), 0)) << r;
  }
  for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST(CommSplit, EqualKeysKeepTheParentOrderAndOptionsAreInherited) {
  const int n = 4;
  std::vector<collieComm_t> parents(n, nullptr);
  {
    // The parent is made with a non-default timeout and algorithm; the child inherits them.
    ScopedEnv timeout("COLLIE_TIMEOUT", "123");
    ScopedEnv algo("COLLIE_ALGO", "allreduce:rhd");
    ASSERT_EQ(collieCommInitAll(parents.data(), n, nullptr), collieSuccess) << collieGetLastError(nullptr);
  }
  std::vector<collieComm_t> children(n, nullptr);
  std::vector<collieResult_t> results(n, collieInternalError);
  onRanks(n, [&](int r) { results[r] = collieCommSplit(parents[r], 5, 0, &children[r], nullptr); });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], collieSuccess) << collieGetLastError(parents[r]);
    int rank = -1;
    collieCommUserRank(children[r], &rank);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(children[r]->timeoutSec, 123);
    ASSERT_EQ(children[r]->algoOverrides.size(), 1u);
    EXPECT_EQ(std::string(children[r]->algoOverrides.begin()->second->name), "rhd");
  }
  // A child outlives its parent.
  for (collieComm_t c : parents) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
  std::vector<int> sums(n, -1);
  onRanks(n, [&](int r) { sums[r] = sumOfParentRanks(children[r], r); });
  for (int r = 0; r < n; ++r) EXPECT_EQ(sums[r], 6);
  for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

// A timeout too long to be a deadline (inf, 1e300) is the longest one, about 31 years, rather than one that
// wraps into an immediate timeout; one that is not a number is refused.
TEST(CommInit, AnEndlessTimeoutIsTheLongestOne) {
  for (const char* endless : {"inf", "1e300"}) {
    ScopedEnv timeout("COLLIE_TIMEOUT", endless);
    ScopedEnv init("COLLIE_INIT_TIMEOUT", endless);
    Comms comms(2);
    ASSERT_EQ(comms.result, collieSuccess) << endless << ": " << collieGetLastError(nullptr);
    EXPECT_EQ(comms[0]->timeoutSec, 1e9) << endless;
    EXPECT_EQ(comms[0]->initTimeoutSec, 1e9) << endless;
    std::vector<int> sums(2, -1);
    onRanks(2, [&](int r) {
      int v = r + 1;
      if (collieAllReduce(&v, &v, 1, collieInt32, collieSum, comms[r], nullptr) == collieSuccess) sums[r] = v;
    });
    EXPECT_EQ(sums, std::vector<int>({3, 3})) << endless;
  }
  ScopedEnv timeout("COLLIE_TIMEOUT", "nan");
  Comms comms(2);
  EXPECT_EQ(comms.result, collieInvalidArgument);
}

TEST(CommSplit, OneThreadSplitsEveryRankInsideAGroupWithAConfig) {
  const int n = 4;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.timeoutMs = 4000;
  std::vector<collieComm_t> children(n, nullptr);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(collieCommSplit(comms[r], r / 2, r, &children[r], &config), collieSuccess)
        << collieGetLastError(comms[r]);
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  std::vector<int> v = {10, 20, 30, 40};
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(children[r], nullptr);
    EXPECT_EQ(children[r]->timeoutSec, 4.0);
    ASSERT_EQ(collieAllReduce(&v[r], &v[r], 1, collieInt32, collieSum, children[r], nullptr), collieSuccess);
  }
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  EXPECT_EQ(v, (std::vector<int>{30, 30, 70, 70}));
  for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST(GroupInit, OneThreadInitsEveryRankInsideAGroup) {
  const int n = 5;
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  std::vector<collieComm_t> comms(n, reinterpret_cast<collieComm_t>(0x1));
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r) {
    // Without the group this would wait for the other ranks and time out.
    ASSERT_EQ(collieCommInitRank(&comms[r], n, id, r), collieSuccess) << collieGetLastError(nullptr);
    EXPECT_EQ(comms[r], nullptr);  // set at GroupEnd
  }
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  std::vector<int> v(n);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r) {
    ASSERT_NE(comms[r], nullptr);
    v[r] = r + 1;
    ASSERT_EQ(collieAllReduce(&v[r], &v[r], 1, collieInt32, collieSum, comms[r], nullptr), collieSuccess);
  }
  ASSERT_EQ(collieGroupEnd(), collieSuccess);
  for (int r = 0; r < n; ++r) EXPECT_EQ(v[r], 15);
  for (collieComm_t c : comms) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
}

TEST(NonBlockingConfig, InitCompletesAndReportsSuccess) {
  const int n = 3;
  collieUniqueId id;
  ASSERT_EQ(collieGetUniqueId(&id), collieSuccess);
  std::vector<collieComm_t> comms(n, nullptr);
  std::vector<collieResult_t> results(n, collieInternalError), async(n, collieInternalError);
  onRanks(n, [&](int r) {
    collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
    config.blocking = 0;
    results[r] = collieCommInitRankConfig(&comms[r], n, id, r, &config);
    if (results[r] == collieSuccess) collieCommGetAsyncError(comms[r], &async[r]);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(results[r], collieSuccess) << collieGetLastError(nullptr);
    EXPECT_EQ(async[r], collieSuccess);  // never collieInProgress: init finished before returning
    EXPECT_EQ(collieCommDestroy(comms[r]), collieSuccess);
  }
}

// The node layout node-aware algorithms get: consecutive ranks of one host,
// every host the same size; anything else counts every rank as its own node.
TEST(NodeRanks, ConsecutiveEqualHostsOnly) {
  const auto layout = [](const std::vector<std::string>& hosts) {
    std::vector<collie::PeerInfo> peers(hosts.size());
    for (size_t r = 0; r < hosts.size(); ++r) {
      memset(&peers[r], 0, sizeof(peers[r]));
      strncpy(peers[r].hostId, hosts[r].c_str(), sizeof(peers[r].hostId) - 1);
    }
    return collie::nodeRanks(peers);
  };
  EXPECT_EQ(layout({"a"}), 1);
  EXPECT_EQ(layout({"a", "a", "a"}), 3);
  EXPECT_EQ(layout({"a", "a", "b", "b"}), 2);
  EXPECT_EQ(layout({"a", "a", "a", "b", "b", "b"}), 3);
  EXPECT_EQ(layout({"a", "b", "c", "d"}), 1);
  EXPECT_EQ(layout({"a", "a", "a", "b", "b"}), 1);       // unequal
  EXPECT_EQ(layout({"a", "b", "a", "b"}), 1);            // interleaved
  EXPECT_EQ(layout({"a", "a", "b", "b", "b", "b"}), 1);  // b twice as large
}

}  // namespace
