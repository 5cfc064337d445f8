// Every registered algorithm, proved by the verifier for 1..64 ranks: counts
// 0, 1, n-1, n+1 and a prime; rank blocks further apart than the count (as
// when a call runs in rounds); several roots; out of place and in place; with
// unbounded slots and with the tightest slots the algorithm's round rule
// allows (two slots per connection, the fewest COLLIE_SLOTS accepts: with one,
// a ring that forwards deadlocks, each rank holding its successor's only slot
// while it waits for room to forward). All-to-all-v with random splits, zeros
// included. One test per algorithm, so ctest runs them in parallel.
#include "algorithms/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "algorithms/registry.h"
#include "common/test_util.h"

namespace {

using collie::Collective;

bool rooted(Collective c) {
  return c == Collective::kBroadcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter;
}

// A random all-to-all-v: counts[i][j] elements from rank i to rank j, about a
// third of them zero, each rank's blocks packed in a shuffled order with gaps.
void randomSplits(int n, uint64_t maxCount, std::mt19937_64& rng, std::vector<collie::ProgramArgs>* args) {
  std::vector<std::vector<uint64_t>> counts(static_cast<size_t>(n), std::vector<uint64_t>(static_cast<size_t>(n)));
  for (auto& row : counts)
    for (auto& c : row) c = rng() % 3 == 0 ? 0 : rng() % (maxCount + 1);
  auto displs = [&](const std::vector<uint64_t>& sizes) {
    std::vector<size_t> order(sizes.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<uint64_t> d(sizes.size());
    uint64_t at = 0;
    for (size_t i : order) {
      d[i] = at;
      at += sizes[i] + rng() % 2;
    }
    return d;
  };
  for (int r = 0; r < n; ++r) {
    collie::ProgramArgs& a = (*args)[static_cast<size_t>(r)];
    a.sendCounts = counts[static_cast<size_t>(r)];
    a.recvCounts.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j)
      a.recvCounts[static_cast<size_t>(j)] = counts[static_cast<size_t>(j)][static_cast<size_t>(r)];
    a.sendDispls = displs(a.sendCounts);
    a.recvDispls = displs(a.recvCounts);
  }
}

// The largest slice with which `count` is one round of `algo` (see RoundRule).
uint64_t tightestSlice(const collie::AlgorithmInfo& algo, int n, uint64_t count) {
  switch (algo.rounds) {
    case collie::RoundRule::kOneSlot:
      return std::max<uint64_t>(count, 1);
    case collie::RoundRule::kRankSlots:
      return std::max<uint64_t>((count + static_cast<uint64_t>(n) - 1) / static_cast<uint64_t>(n), 1);
    case collie::RoundRule::kNone:
      break;
  }
  return 1;
}

class EveryAlgorithm : public ::testing::TestWithParam<const collie::AlgorithmInfo*> {};

TEST_P(EveryAlgorithm, VerifiedForOneTo64Ranks) {
  const collie::AlgorithmInfo& algo = *GetParam();
  const uint64_t seed = collie::test::testSeed();
  std::mt19937_64 rng(seed);
  int proved = 0;
  for (int n = 1; n <= 64; ++n) {
    const std::vector<int> roots = rooted(algo.collective) ? std::vector<int>{0, n / 2, n - 1} : std::vector<int>{0};
    const uint64_t nn = static_cast<uint64_t>(n);
    for (int root : roots) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, nn > 1 ? nn - 1 : 2, nn + 1, uint64_t{13}}) {
        for (uint64_t extra : {uint64_t{0}, uint64_t{3}}) {
          std::vector<collie::ProgramArgs> args(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            collie::ProgramArgs& a = args[static_cast<size_t>(r)];
            a.collective = algo.collective;
            a.nranks = n;
            a.rank = r;
            a.count = count;
            a.stride = count + extra;
            a.root = root;
          }
          if (algo.collective == Collective::kAllToAllv) randomSplits(n, count, rng, &args);
          std::vector<collie::Program> programs;
          for (const collie::ProgramArgs& a : args) programs.push_back(algo.build(a));
          for (bool inPlace : {false, true}) {
            uint64_t in = 0, out = 0;
            if (inPlace && !collie::inPlaceBases(programs[0], &in, &out)) continue;
            for (bool tight : {false, true}) {
              collie::VerifyOptions o;
              o.inPlace = inPlace;
              if (tight) {
                o.nslots = 2;
                o.sliceElems = tightestSlice(algo, n, count);
              }
              collie::Status s = collie::verifyPrograms(programs, o);
              ASSERT_TRUE(s.ok()) << algo.name << (inPlace ? " in place" : " out of place")
                                  << (tight ? ", two slots of " + std::to_string(o.sliceElems) : ", unbounded")
                                  << ", n " << n << ", root " << root << ", count " << count << ", stride "
                                  << count + extra << " (seed " << seed << "): " << s.message();
              ++proved;
            }
          }
        }
      }
    }
  }
  printf("%s %s: verified %d (nranks, root, count, stride, in-place, slots) combinations\n",
         collie::collectiveName(algo.collective), algo.name, proved);
}

std::string paramName(const ::testing::TestParamInfo<const collie::AlgorithmInfo*>& info) {
  return std::string(collie::collectiveName(info.param->collective)) + "_" + info.param->name;
}

std::vector<const collie::AlgorithmInfo*> allAlgorithms() {
  std::vector<const collie::AlgorithmInfo*> list;
  for (const collie::AlgorithmInfo& a : collie::algorithms()) list.push_back(&a);
  return list;
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryAlgorithm, ::testing::ValuesIn(allAlgorithms()), paramName);

TEST(Verifier, SlotsExposeARingThatDoesNotFitItsRound) {
  // Ring allreduce on 4 ranks with 8 elements per step and two 1-element
  // slots: every rank blocks in its first send, which the verifier reports.
  std::vector<collie::Program> programs;
  for (int r = 0; r < 4; ++r) {
    collie::ProgramArgs a;
    a.nranks = 4;
    a.rank = r;
    a.count = 32;
    programs.push_back(collie::buildAllReduceRing(a));
  }
  collie::VerifyOptions o;
  o.nslots = 2;
  o.sliceElems = 1;
  collie::Status s = collie::verifyPrograms(programs, o);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  o.sliceElems = 8;  // one round's worth: fine
  EXPECT_TRUE(collie::verifyPrograms(programs, o).ok());
}

}  // namespace
