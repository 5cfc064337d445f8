// collieCommShrink with ranks as threads of this process: who stays and in
// which order, the new communicator's collectives checked against a reference,
// the parent after COLLIE_SHRINK_DEFAULT and COLLIE_SHRINK_ABORT, a shrink
// inside a group, lists that are refused, and callers whose lists differ
// (an error within the init timeout, not a hang). A shrink after a rank
// process was killed is tests/mp/faults_mp.cc's "shrink" mode.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"

namespace {

using collie::test::Comms;
using collie::test::onRanks;

// Runs an allreduce (sum, int32, 1000 random values per rank) over `comm` on every rank of `ranks` at once and
// checks each result against the sum computed here. `comm[r]` is rank r's communicator.
void expectAllReduceWorks(const std::vector<collieComm_t>& comm, const std::vector<int>& ranks, const char* what) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(std::string(what) + ", seed " + std::to_string(seed));
  const size_t count = 1000;
  std::vector<std::vector<int32_t>> in(comm.size()), out(comm.size());
  std::vector<int32_t> expected(count, 0);
  std::mt19937 rng(seed);
  for (int r : ranks) {
    in[r].resize(count);
    for (int32_t& v : in[r]) v = static_cast<int32_t>(rng() % 2001) - 1000;
    for (size_t i = 0; i < count; ++i) expected[i] += in[r][i];
    out[r].assign(count, INT32_MIN);  // poisoned
  }
  std::vector<collieResult_t> rc(comm.size(), collieInternalError);
  std::vector<std::thread> threads;
  for (int r : ranks)
    threads.emplace_back([&, r] {
      rc[r] = collieAllReduce(in[r].data(), out[r].data(), count, collieInt32, collieSum, comm[r], nullptr);
    });
  for (std::thread& t : threads) t.join();
  for (int r : ranks) {
    ASSERT_EQ(rc[r], collieSuccess) << "rank " << r << ": " << collieGetLastError(comm[r]);
    EXPECT_EQ(out[r], expected) << "rank " << r;
  }
}

// Shrinks `comms` by `excluded` on every rank not in it, concurrently; returns the children (NULL for the
// excluded) and checks every call succeeded.
std::vector<collieComm_t> shrinkAll(const Comms& comms, const std::vector<int>& excluded, int flags) {
  const int n = comms.size();
  std::vector<collieComm_t> children(static_cast<size_t>(n), nullptr);
  std::vector<collieResult_t> rc(static_cast<size_t>(n), collieSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) continue;
    threads.emplace_back([&, r] {
      rc[r] =
          collieCommShrink(comms[r], excluded.data(), static_cast<int>(excluded.size()), &children[r], nullptr, flags);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(rc[r], collieSuccess) << "rank " << r << ": " << collieGetLastError(comms[r]);
  return children;
}

// Children indexed by their new rank.
std::vector<collieComm_t> byNewRank(const std::vector<collieComm_t>& children) {
  std::vector<collieComm_t> out;
  for (collieComm_t c : children)
    if (c != nullptr) out.push_back(c);
  std::vector<collieComm_t> ordered(out.size(), nullptr);
  for (collieComm_t c : out) {
    int rank = -1;
    collieCommUserRank(c, &rank);
    if (rank >= 0 && rank < static_cast<int>(ordered.size())) ordered[static_cast<size_t>(rank)] = c;
  }
  return ordered;
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

TEST(CommShrink, TheRanksThatStayKeepTheirOrder) {
  // Unsorted lists, the first rank among those left out, nothing left out, one rank left alone.
  const struct {
    int n;
    std::vector<int> excluded;
  } cases[] = {{5, {3, 1}}, {3, {0}}, {4, {}}, {3, {2, 0}}, {6, {5, 0, 2}}};
  for (const auto& c : cases) {
    std::string what = std::to_string(c.n) + " ranks less {";
    for (int r : c.excluded) what += std::to_string(r) + " ";
    what += "}";
    SCOPED_TRACE(what);
    Comms comms(c.n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<collieComm_t> children = shrinkAll(comms, c.excluded, COLLIE_SHRINK_DEFAULT);
    std::vector<int> stay;
    for (int r = 0; r < c.n; ++r)
      if (std::find(c.excluded.begin(), c.excluded.end(), r) == c.excluded.end()) stay.push_back(r);
    for (int r = 0; r < c.n; ++r) {
      const bool stays = std::find(stay.begin(), stay.end(), r) != stay.end();
      EXPECT_EQ(children[static_cast<size_t>(r)] != nullptr, stays) << "rank " << r;
      if (!stays || children[static_cast<size_t>(r)] == nullptr) continue;
      int rank = -1, count = -1;
      collieCommUserRank(children[static_cast<size_t>(r)], &rank);
      collieCommCount(children[static_cast<size_t>(r)], &count);
      EXPECT_EQ(count, static_cast<int>(stay.size())) << "rank " << r;
      EXPECT_EQ(rank, std::find(stay.begin(), stay.end(), r) - stay.begin()) << "rank " << r;
    }
    const std::vector<collieComm_t> ordered = byNewRank(children);
    expectAllReduceWorks(ordered, iota(static_cast<int>(ordered.size())), "the new communicator");
    // COLLIE_SHRINK_DEFAULT leaves the parent as it was: every rank, excluded or not, still uses it.
    expectAllReduceWorks(comms.comms, iota(c.n), "the parent");
    for (collieComm_t child : children) EXPECT_EQ(collieCommDestroy(child), collieSuccess);
  }
}

TEST(CommShrink, AbortLeavesTheParentOnlyForDestroy) {
  Comms comms(4);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieComm_t> children = shrinkAll(comms, {2}, COLLIE_SHRINK_ABORT);
  expectAllReduceWorks(byNewRank(children), iota(3), "the new communicator");
  float x = 1;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, comms[0], nullptr), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("comm was aborted"), std::string::npos)
      << collieGetLastError(comms[0]);
  collieComm_t again = nullptr;
  const int none[] = {1};
  EXPECT_EQ(collieCommShrink(comms[0], none, 1, &again, nullptr, COLLIE_SHRINK_DEFAULT), collieInvalidUsage);
  EXPECT_EQ(again, nullptr);
  for (collieComm_t child : children) EXPECT_EQ(collieCommDestroy(child), collieSuccess);
}

TEST(CommShrink, OneThreadShrinksEveryRankInsideAGroupTwice) {
  const int n = 5;
  Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.timeoutMs = 4000;
  // Twice from the same parent: the second shrink's messages must not be taken for the first's.
  for (const std::vector<int>& excluded : {std::vector<int>{4}, std::vector<int>{0, 3}}) {
    std::vector<collieComm_t> children(n, nullptr);
    ASSERT_EQ(collieGroupStart(), collieSuccess);
    for (int r = 0; r < n; ++r) {
      if (std::find(excluded.begin(), excluded.end(), r) != excluded.end()) continue;
      ASSERT_EQ(collieCommShrink(comms[r], excluded.data(), static_cast<int>(excluded.size()), &children[r], &config,
                                 COLLIE_SHRINK_DEFAULT),
                collieSuccess)
          << collieGetLastError(comms[r]);
    }
    ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
    const std::vector<collieComm_t> ordered = byNewRank(children);
    ASSERT_EQ(ordered.size(), static_cast<size_t>(n) - excluded.size());
    for (collieComm_t c : ordered) ASSERT_NE(c, nullptr);
    expectAllReduceWorks(ordered, iota(static_cast<int>(ordered.size())), "the new communicator");
    for (collieComm_t c : children) EXPECT_EQ(collieCommDestroy(c), collieSuccess);
  }
}

TEST(CommShrink, ListsThatCannotBeAreRefusedAndTheParentStillWorks) {
  Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const struct {
    const char* name;
    std::vector<int> list;  // empty with count 1: a NULL list
    int count, flags;
    collieResult_t code;
    const char* needle;
  } rows[] = {
      {"NULL list", {}, 1, 0, collieInvalidArgument, "excludeRanksList is NULL with excludeRanksCount 1"},
      {"negative count", {1}, -1, 0, collieInvalidArgument, "excludeRanksCount -1 is not in [0, 3)"},
      {"every rank", {0, 1, 2}, 3, 0, collieInvalidArgument, "excludeRanksCount 3 is not in [0, 3)"},
      {"a rank too large", {3}, 1, 0, collieInvalidArgument, "excludeRanksList[0] = 3 is not a rank"},
      {"a negative rank", {2, -1}, 2, 0, collieInvalidArgument, "excludeRanksList[1] = -1 is not a rank"},
      {"the caller", {0}, 1, 0, collieInvalidArgument, "excludeRanksList[0] = 0 is this rank"},
      {"a rank twice", {1, 1}, 2, 0, collieInvalidArgument, "rank 1 is in excludeRanksList twice"},
      {"unknown flags", {1}, 1, 2, collieInvalidArgument, "shrinkFlags 2 is neither"},
  };
  for (const auto& row : rows) {
    collieComm_t child = reinterpret_cast<collieComm_t>(0x1);
    const collieResult_t rc =
        collieCommShrink(comms[0], row.list.empty() ? nullptr : row.list.data(), row.count, &child, nullptr, row.flags);
    EXPECT_EQ(rc, row.code) << row.name;
    EXPECT_EQ(child, nullptr) << row.name;
    const std::string text = collieGetLastError(comms[0]);
    EXPECT_NE(text.find("collieCommShrink"), std::string::npos) << row.name << ": " << text;
    EXPECT_NE(text.find(row.needle), std::string::npos) << row.name << ": " << text;
  }
  const int one[] = {1};
  EXPECT_EQ(collieCommShrink(comms[0], one, 1, nullptr, nullptr, 0), collieInvalidArgument);
  EXPECT_EQ(collieCommShrink(nullptr, one, 1, nullptr, nullptr, 0), collieInvalidArgument);
  expectAllReduceWorks(comms.comms, iota(3), "the parent");
}

TEST(CommShrink, CallersWithDifferentListsFailWithinTheInitTimeout) {
  // Ranks 0 and 1 leave out rank 3; rank 2 leaves out ranks 1 and 3. Rank 0 is the first to stay for all
  // three, so rank 2 learns from its message that the lists differ; ranks 0 and 1 then wait in init for a
  // rank 2 that never comes, until the init timeout.
  Comms comms(4);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.initTimeoutMs = 2000;
  std::vector<collieComm_t> children(4, nullptr);
  std::vector<collieResult_t> rc(4, collieSuccess);
  std::vector<double> took(4, 0);
  onRanks(3, [&](int r) {
    const std::vector<int> excluded = r == 2 ? std::vector<int>{1, 3} : std::vector<int>{3};
    const auto t0 = std::chrono::steady_clock::now();
    rc[r] = collieCommShrink(comms[r], excluded.data(), static_cast<int>(excluded.size()), &children[r], &config,
                             COLLIE_SHRINK_DEFAULT);
    took[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  EXPECT_EQ(rc[2], collieInvalidUsage) << collieGetLastError(comms[2]);
  EXPECT_NE(std::string(collieGetLastError(comms[2])).find("excludes another list of ranks"), std::string::npos)
      << collieGetLastError(comms[2]);
  for (int r = 0; r < 3; ++r) {
    EXPECT_NE(rc[r], collieSuccess) << "rank " << r;
    EXPECT_EQ(children[static_cast<size_t>(r)], nullptr) << "rank " << r;
    EXPECT_LT(took[r], 15.0) << "rank " << r << ": " << collieGetLastError(comms[r]);
    printf("rank %d: %s after %.2f s: %s\n", r, collieGetErrorString(rc[r]), took[r], collieGetLastError(comms[r]));
  }
}

}  // namespace
