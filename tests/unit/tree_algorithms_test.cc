// Shapes of the logarithmic algorithms (Bruck allgather, recursive-halving
// reduce-scatter, binomial broadcast and reduce): phase and step counts,
// partners, scratch, round rules; and the verifier catching a halving
// reduce-scatter whose fold-in step is missing. Correctness for 1..64 ranks is
// verifier_test's.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "common/programs.h"

namespace {

using collie::Collective;
using collie::Program;
using collie::StepOp;
using collie::test::buildPrograms;
using collie::test::countOps;

int ceilLog2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

TEST(AllGatherBruck, ThreePhasesAtFiveRanks) {
  const int n = 5;
  const std::vector<Program> programs = buildPrograms(Collective::kAllGather, "bruck", n, 3);
  ASSERT_EQ(programs.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const Program& p = programs[r];
    ASSERT_EQ(p.steps.size(), static_cast<size_t>(n));  // the own-block copy, then one exchange per block
    EXPECT_EQ(p.steps[0].op, StepOp::kCopy);
    EXPECT_EQ(countOps(p, StepOp::kSendRecv), static_cast<size_t>(n - 1));
    // Phases at distances 1, 2, 4: one block, two blocks, then the one missing block.
    std::vector<int> distances;
    for (const collie::Step& s : p.steps) {
      if (s.op != StepOp::kSendRecv) continue;
      EXPECT_EQ(s.recvCount, 3u);
      const int d = (s.recvPeer - r + n) % n;
      EXPECT_EQ(s.sendPeer, (r - d + n) % n);
      distances.push_back(d);
    }
    EXPECT_EQ(distances, (std::vector<int>{1, 2, 2, 4}));
    EXPECT_EQ(p.scratchCount, 0u);
  }
  EXPECT_EQ(collie::findAlgorithm(Collective::kAllGather, "bruck")->rounds, collie::RoundRule::kNone);
  EXPECT_TRUE(collie::verifyPrograms(programs).ok());
}

TEST(ReduceScatterHalving, PartnersAtDistancesFourTwoOne) {
  const int n = 8;
  const std::vector<Program> programs = buildPrograms(Collective::kReduceScatter, "halving", n, 2);
  ASSERT_EQ(programs.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const Program& p = programs[r];
    std::vector<int> partners;
    uint64_t sentBlocks = 0;
    for (const collie::Step& s : p.steps) {
      if (s.op != StepOp::kSendRecvReduce) continue;
      EXPECT_EQ(s.sendPeer, s.recvPeer);  // pairwise
      if (partners.empty() || partners.back() != s.sendPeer) partners.push_back(s.sendPeer);
      sentBlocks += s.count / 2;
    }
    EXPECT_EQ(partners, (std::vector<int>{r ^ 4, r ^ 2, r ^ 1}));
    EXPECT_EQ(sentBlocks, static_cast<uint64_t>(n - 1));  // as many as the ring sends
    EXPECT_EQ(countOps(p, StepOp::kSendRecvReduce), static_cast<size_t>(n - 1));
    EXPECT_EQ(p.scratchCount, 4u * 2);  // the half kept at the first phase
    EXPECT_TRUE(p.steps.back().finalize);
  }
  EXPECT_TRUE(collie::verifyPrograms(programs).ok());
}

TEST(ReduceScatterHalving, FoldsOddRanksBelowTwiceTheRemainder) {
  // n = 6: p = 4, rem = 2; ranks 1 and 3 hand everything to 0 and 2.
  const int n = 6;
  const std::vector<Program> programs = buildPrograms(Collective::kReduceScatter, "halving", n, 5);
  for (int odd : {1, 3}) {
    const Program& p = programs[odd];
    ASSERT_EQ(p.steps.size(), static_cast<size_t>(n + 1));
    EXPECT_EQ(countOps(p, StepOp::kSend), static_cast<size_t>(n));
    EXPECT_EQ(p.steps.back().op, StepOp::kRecv);
    EXPECT_EQ(p.steps.back().recvPeer, odd - 1);
    EXPECT_TRUE(p.steps.back().finalize);
    EXPECT_EQ(p.scratchCount, 0u);
  }
  // The folding even rank reduces all n blocks in scratch; virtual rank 0
  // (real 0, blocks {0,1}) exchanges with virtual 2 (real 4, block {4}), then virtual 1 (real 2).
  const Program& even = programs[0];
  EXPECT_EQ(countOps(even, StepOp::kRecvReduceCopy), static_cast<size_t>(n));
  EXPECT_EQ(even.scratchCount, static_cast<uint64_t>(n) * 5);
  std::set<int> partners;
  for (const collie::Step& s : even.steps)
    if (s.op == StepOp::kSendRecvReduce) partners.insert(s.sendPeer);
  EXPECT_EQ(partners, (std::set<int>{4, 2}));
  EXPECT_TRUE(collie::verifyPrograms(programs).ok());
}

TEST(ReduceScatterHalving, VerifierCatchesAMissingFoldIn) {
  const int n = 6;
  std::vector<Program> programs = buildPrograms(Collective::kReduceScatter, "halving", n, 4);
  ASSERT_TRUE(collie::verifyPrograms(programs).ok());
  // Rank 0 forgets to fold rank 1's input in: it copies its own input to
  // scratch instead, and rank 1 sends nothing, only waits for its block.
  for (collie::Step& s : programs[0].steps)
    if (s.op == StepOp::kRecvReduceCopy) {
      s.op = StepOp::kCopy;
      s.recvPeer = -1;
    }
  std::vector<collie::Step> waitOnly;
  for (const collie::Step& s : programs[1].steps)
    if (s.op != StepOp::kSend) waitOnly.push_back(s);
  programs[1].steps = waitOnly;
  const collie::Status s = collie::verifyPrograms(programs);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("wrong set of contributions"), std::string::npos) << s.message();
}

TEST(BroadcastBinomial, RootSendsLog2TimesLeavesNever) {
  for (int n : {2, 5, 8, 13}) {
    const int root = n / 2;
    const std::vector<Program> programs = buildPrograms(Collective::kBroadcast, "binomial", n, 7, root);
    ASSERT_EQ(programs.size(), static_cast<size_t>(n));
    EXPECT_EQ(countOps(programs[root], StepOp::kSend), static_cast<size_t>(ceilLog2(n))) << n;
    EXPECT_EQ(programs[root].steps.front().op, StepOp::kCopy);
    // Largest subtree first: the root's first send goes to relative rank 2^(ceil(log2 n)-1).
    EXPECT_EQ(programs[root].steps[1].sendPeer, (root + (1 << (ceilLog2(n) - 1))) % n);
    size_t sends = 0;
    for (int r = 0; r < n; ++r) {
      const int v = (r - root + n) % n;
      sends += countOps(programs[r], StepOp::kSend);
      if (v % 2 == 1 || v == n - 1) {  // a leaf: odd relative rank, or the last one
        ASSERT_EQ(programs[r].steps.size(), 1u);
        EXPECT_EQ(programs[r].steps[0].op, StepOp::kRecv);
      }
      EXPECT_EQ(programs[r].scratchCount, 0u);
    }
    EXPECT_EQ(sends, static_cast<size_t>(n - 1));  // a tree: one edge per non-root rank
    EXPECT_TRUE(collie::verifyPrograms(programs).ok());
  }
}

TEST(ReduceBinomial, IsTheBroadcastTreeBackwards) {
  const int n = 11, root = 4;
  const std::vector<Program> bcast = buildPrograms(Collective::kBroadcast, "binomial", n, 6, root);
  const std::vector<Program> reduce = buildPrograms(Collective::kReduce, "binomial", n, 6, root);
  ASSERT_EQ(reduce.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    // Every broadcast send to a child is a receive from it; the parent receive is the send.
    std::vector<int> children, fromChildren;
    for (const collie::Step& s : bcast[r].steps)
      if (s.op == StepOp::kSend) children.insert(children.begin(), s.sendPeer);
    for (const collie::Step& s : reduce[r].steps)
      if (collie::stepReceives(s.op)) fromChildren.push_back(s.recvPeer);
    EXPECT_EQ(fromChildren, children) << "rank " << r;  // smallest subtree first
    // Scratch only where two or more children must be summed before the send.
    EXPECT_EQ(reduce[r].scratchCount, r != root && children.size() >= 2 ? 6u : 0u) << "rank " << r;
  }
  EXPECT_EQ(countOps(reduce[root], StepOp::kRecvReduceCopy), static_cast<size_t>(ceilLog2(n)));
  EXPECT_TRUE(reduce[root].steps.back().finalize);
  for (bool inPlace : {false, true}) {
    collie::VerifyOptions o;
    o.inPlace = inPlace;
    const collie::Status s = collie::verifyPrograms(reduce, o);
    EXPECT_TRUE(s.ok()) << s.message();
  }
}

}  // namespace
