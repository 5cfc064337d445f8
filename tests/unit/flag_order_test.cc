// FlagOrder (transport/ucx/flag_order.h): counters advanced by messages that
// may come in any order show a value only once every value below it has come.
#include "transport/ucx/flag_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "common/test_util.h"

namespace collie {
namespace {

TEST(FlagOrder, InOrderValuesShowAtOnce) {
  FlagOrder order;
  for (uint64_t v = 1; v <= 5; ++v) EXPECT_EQ(order.arrive(64, v), v);
}

TEST(FlagOrder, EarlyValueWaitsForTheOneBelow) {
  FlagOrder order;
  EXPECT_EQ(order.arrive(64, 2), 0u);
  EXPECT_EQ(order.arrive(64, 3), 0u);
  EXPECT_EQ(order.arrive(64, 1), 3u);  // 1 lets 2 and 3 through
  EXPECT_EQ(order.arrive(64, 2), 0u);  // a repeat moves nothing
  EXPECT_EQ(order.arrive(64, 4), 4u);
}

TEST(FlagOrder, CountersAreIndependent) {
  FlagOrder order;
  EXPECT_EQ(order.arrive(64, 2), 0u);
  EXPECT_EQ(order.arrive(128, 1), 1u);  // another counter's 1 does not release 64's 2
  EXPECT_EQ(order.arrive(64, 1), 2u);
}

// Every counter gets 1..n, shuffled within windows of `inFlight` values (a
// sender has at most its slots in flight); after each arrival the shown value
// is exactly the longest run 1..k that has come, and never goes back.
TEST(FlagOrder, RandomOrderShowsTheLongestCompleteRun) {
  const uint64_t seed = test::testSeed();
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    const int counters = 1 + static_cast<int>(rng() % 4), inFlight = 1 + static_cast<int>(rng() % 8);
    const uint64_t n = 1 + rng() % 200;
    std::vector<std::vector<uint64_t>> sent(static_cast<size_t>(counters));  // each counter's values as they come
    for (auto& values : sent) {
      for (uint64_t v = 1; v <= n; ++v) values.push_back(v);
      for (size_t at = 0; at < values.size(); at += static_cast<size_t>(inFlight)) {
        const size_t end = std::min(values.size(), at + static_cast<size_t>(inFlight));
        std::shuffle(values.begin() + static_cast<long>(at), values.begin() + static_cast<long>(end), rng);
      }
    }
    // The counters interleaved at random, each keeping its own order.
    std::vector<std::pair<uint64_t, uint64_t>> arrivals;  // (counter key, value)
    std::vector<size_t> taken(static_cast<size_t>(counters), 0);
    while (arrivals.size() < static_cast<size_t>(counters) * n) {
      const size_t c = rng() % static_cast<size_t>(counters);
      if (taken[c] < n) arrivals.emplace_back(64 * (c + 1), sent[c][taken[c]++]);
    }

    FlagOrder flags;
    std::vector<std::set<uint64_t>> came(static_cast<size_t>(counters));
    std::vector<uint64_t> shown(static_cast<size_t>(counters), 0);
    for (auto& [key, v] : arrivals) {
      const size_t c = key / 64 - 1;
      came[c].insert(v);
      uint64_t run = 0;
      while (came[c].count(run + 1)) ++run;
      const uint64_t moved = flags.arrive(key, v);
      if (moved != 0) {
        ASSERT_GT(moved, shown[c]) << "seed " << seed << " trial " << trial;
        shown[c] = moved;
      }
      ASSERT_EQ(shown[c], run) << "seed " << seed << " trial " << trial << " counter " << c << " value " << v;
    }
    for (int c = 0; c < counters; ++c) EXPECT_EQ(shown[static_cast<size_t>(c)], n) << "seed " << seed;
  }
}

}  // namespace
}  // namespace collie
