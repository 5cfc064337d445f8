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
  // Direct algorithms run among the ranks of one node, which map each other's buffers; their kernels take up
  // to 8 ranks (kernels/direct_kernels.h). Proved to 32 ranks (3.7 s for all six; to 64, 80 s).
  if (algo.mapsPeers) options.maxRanks = 32;
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

// Rank 0's two exchanges form one group: run as a batch, both send before either waits, so rank 2, which
// sends to rank 0 only once it has rank 0's data, is answered; one after another, rank 0 waits in its first
// exchange for rank 2, which waits for rank 0's second: a deadlock. The batch is what every executor runs.
TEST(Verifier, AGroupOfExchangesRunsAsABatch) {
  using collie::Buffer;
  using collie::Range;
  using collie::StepOp;
  const Range in{Buffer::kInput, 0}, tmp0{Buffer::kScratch, 0}, tmp1{Buffer::kScratch, 2};
  auto program = [](int rank, std::vector<collie::Step> steps) {
    collie::Program p;
    p.collective = collie::Collective::kAllToAll;
    p.algorithm = "test";
    p.nranks = 3;
    p.rank = rank;
    p.count = 1;
    p.scratchCount = 4;
    p.steps = std::move(steps);
    return p;
  };
  std::vector<collie::Program> programs = {program(0, {collie::exchangeStep(StepOp::kSendRecv, 1, 2, in, 1, tmp0, 1),
                                                       collie::exchangeStep(StepOp::kSendRecv, 2, 1, in, 1, tmp1, 1)}),
                                           program(1, {collie::exchangeStep(StepOp::kSendRecv, 0, 0, in, 1, tmp0, 1)}),
                                           program(2, {collie::makeStep(StepOp::kRecv, -1, 0, Range{}, tmp0, 1),
                                                       collie::makeStep(StepOp::kSend, 0, -1, in, Range{}, 1)})};
  collie::VerifyOptions o;
  o.sliceElems = 1;
  o.nslots = 2;
  const collie::Status batched = collie::verifyPrograms(programs, o);
  // These programs compute no all-to-all: what shows that every step ran is the end's check of the output.
  EXPECT_NE(batched.message().find("rank 0 step 2 (end): output never written"), std::string::npos)
      << batched.message();
  o.batchExchanges = false;
  const collie::Status oneByOne = collie::verifyPrograms(programs, o);
  EXPECT_NE(oneByOne.message().find("rank 0 step 0 (sendRecv): deadlock: waits for a message"), std::string::npos)
      << oneByOne.message();
  // Two slices each way: each keeps its turn, as in the executors, and the verifier finds the deadlock.
  o.batchExchanges = true;
  for (collie::Program& p : programs)
    for (collie::Step& st : p.steps) st.count = st.recvCount = st.sent() || st.received() ? 2 : 0;
  EXPECT_NE(collie::verifyPrograms(programs, o).message().find("deadlock"), std::string::npos);
}

}  // namespace
