// Every registered algorithm, proved by the verifier with the default sweep of
// collie::verifyAlgorithm (algorithms/verify_sweep.h): 1..64 ranks; counts 0,
// 1, n-1, n+1 and a prime; rank blocks further apart than the count (as when a
// call runs in rounds); several roots; out of place and in place; unbounded
// slots and two slots of the tightest slice the round rule allows;
// all-to-all-v with random splits from the test seed. One test per algorithm,
// so ctest runs them in parallel. And a ring allreduce whose steps do not fit
// two slots, which the verifier reports as a deadlock.
#include "algorithms/verifier.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verify_sweep.h"
#include "common/test_util.h"

namespace {

class EveryAlgorithm : public ::testing::TestWithParam<const collie::AlgorithmInfo*> {};

TEST_P(EveryAlgorithm, VerifiedForOneTo64Ranks) {
  const collie::AlgorithmInfo& algo = *GetParam();
  collie::SweepOptions options;
  options.seed = collie::test::testSeed();
  long proved = 0;
  const collie::Status s = collie::verifyAlgorithm(algo, options, &proved);
  ASSERT_TRUE(s.ok()) << s.message();
  printf("%s %s: verified %ld (nranks, root, count, stride, in-place, slots) combinations\n",
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
  const std::vector<collie::Program> programs =
      collie::buildPrograms(*collie::findAlgorithm(collie::Collective::kAllReduce, "ring"), 4, 32, 32, 0);
  collie::VerifyOptions o;
  o.nslots = 2;
  o.sliceElems = 1;
  collie::Status s = collie::verifyPrograms(programs, o);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  o.sliceElems = 8;  // one round's worth: fine
  EXPECT_TRUE(collie::verifyPrograms(programs, o).ok());
}

}  // namespace
