// Every collective x every registered algorithm, run through the public C API
// on the host backend with ranks as threads, chosen with COLLIE_ALGO. For each
// (algorithm, nranks): all 12 types (4, one per element size, on 7 and 8 ranks, with tiny slots or with
// COLLIE_TEST_TYPES=sizes: test_util.h), the reduction operators rotated over the
// cases (float32 and int32 get all five), counts 0, 1, 13, 1009 and one that
// takes several rounds, in place and out of place, roots varied. Inputs random
// (seed printed), outputs poisoned, references independent. The full product
// (types x ops x counts x placements x roots) would take minutes per
// algorithm; the sample is printed per test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "collie.h"
#include "common/coll_map.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace {

using collie::test::Coll;
using collie::test::ScopedEnv;

struct Param {
  const collie::AlgorithmInfo* algo;
  int nranks;
  bool tinySlots;  // 4 KiB slots, 2 per connection: many rounds, full FIFOs
  int channels;    // > 1: the GPU's channel split, run on the host
};

class AlgorithmsApiTest : public ::testing::TestWithParam<Param> {};

TEST_P(AlgorithmsApiTest, ExactForTypesOpsCountsPlacementsRoots) {
  const Param p = GetParam();
  Coll coll;
  ASSERT_TRUE(collie::test::toColl(p.algo->collective, &coll));
  const uint64_t seed = collie::test::testSeed();
  const std::string spec = std::string(collie::collectiveName(p.algo->collective)) + ":" + p.algo->name;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", p.tinySlots ? "4096" : nullptr);
  ScopedEnv slots("COLLIE_SLOTS", p.tinySlots ? "2" : nullptr);
  const std::string channels = std::to_string(p.channels);
  ScopedEnv channelsEnv("COLLIE_CHANNELS", p.channels > 1 ? channels.c_str() : nullptr);
  collie::test::Comms comms(p.nranks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t several = p.tinySlots ? 3 * 1024 + 5 : 65537;  // more than one round for every type
  int cases = 0;
  const std::string err = collie::test::runSweep(
      comms, coll, p.tinySlots, {0, 1, 13, 1009, several}, [&](int index) { return (index * 7 + p.nranks) % p.nranks; },
      seed, spec, &cases);
  ASSERT_EQ(err, "");
  printf(
      "%s nranks %d%s: %d cases exact (%s; ops rotated, all 5 for float32 and int32; counts 0 1 13 1009 %zu;"
      " both placements; roots varied)\n",
      spec.c_str(), p.nranks, p.tinySlots ? " tiny slots" : "", cases,
      collie::test::sweepTypesLabel(p.nranks, p.tinySlots).c_str(), several);
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (const collie::AlgorithmInfo& a : collie::algorithms()) {
    Coll unused;
    // Direct algorithms need ranks that map each other's buffers, which the host executor refuses (and
    // tests/unit/verifier_direct_test.cc shows refusing).
    if (!collie::test::toColl(a.collective, &unused) || a.mapsPeers) continue;
    for (int n : {1, 2, 3, 4, 5, 7, 8}) v.push_back({&a, n, false, 1});
    v.push_back({&a, 6, true, 1});
    v.push_back({&a, 5, true, 3});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Registry, AlgorithmsApiTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(collie::collectiveName(info.param.algo->collective)) + "_" + info.param.algo->name + "_n" +
         std::to_string(info.param.nranks) + (info.param.tinySlots ? "_tinyslots" : "") +
         (info.param.channels > 1 ? "_" + std::to_string(info.param.channels) + "channels" : "");
});

}  // namespace
