// Shapes of the gather, scatter and all-to-all algorithms (step counts, peers,
// scratch), an all-to-all-v with a skewed split proved by the verifier, and the
// verifier catching an all-to-all-v whose counts disagree between two ranks.
// Correctness for 1..64 ranks is verifier_test's.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "common/programs.h"

namespace {

using collie::Collective;
using collie::Program;
using collie::ProgramArgs;
using collie::StepOp;
using collie::test::buildPrograms;
using collie::test::countOps;

TEST(GatherLinear, RootReceivesFromEveryOtherRank) {
  const int n = 5, root = 2;
  const std::vector<Program> programs = buildPrograms(Collective::kGather, "linear", n, 7, root);
  ASSERT_EQ(programs.size(), static_cast<size_t>(n));
  const Program& p = programs[root];
  EXPECT_EQ(countOps(p, StepOp::kRecv), static_cast<size_t>(n - 1));
  EXPECT_EQ(countOps(p, StepOp::kCopy), 1u);
  std::set<int> from;
  for (const collie::Step& s : p.steps)
    if (s.op == StepOp::kRecv) {
      from.insert(s.recvPeer);
      EXPECT_EQ(s.dst.offset, static_cast<uint64_t>(s.recvPeer) * 7);  // block r lands at r*stride
    }
  EXPECT_EQ(from.size(), static_cast<size_t>(n - 1));
  EXPECT_EQ(from.count(root), 0u);
  for (int r = 0; r < n; ++r) {
    if (r == root) continue;
    ASSERT_EQ(programs[r].steps.size(), 1u);
    EXPECT_EQ(programs[r].steps[0].op, StepOp::kSend);
    EXPECT_EQ(programs[r].steps[0].sendPeer, root);
  }
  EXPECT_TRUE(collie::verifyPrograms(programs).ok());
}

TEST(GatherBinomial, RootHasLog2Children) {
  const int n = 8, root = 3;
  const std::vector<Program> programs = buildPrograms(Collective::kGather, "binomial", n, 4, root);
  ASSERT_EQ(programs.size(), static_cast<size_t>(n));
  const Program& p = programs[root];
  std::set<int> children;
  for (const collie::Step& s : p.steps)
    if (s.op == StepOp::kRecv) children.insert(s.recvPeer);
  // Relative ranks 1, 2 and 4.
  EXPECT_EQ(children, (std::set<int>{(root + 1) % n, (root + 2) % n, (root + 4) % n}));
  EXPECT_EQ(countOps(p, StepOp::kRecv), static_cast<size_t>(n - 1));  // one step per block
  EXPECT_EQ(p.scratchCount, 0u);                                      // the root receives into its output
  // Relative rank 4 collects blocks 5, 6, 7 in scratch and sends 4 blocks to the root; a leaf needs no scratch.
  const Program& inner = programs[(root + 4) % n];
  EXPECT_EQ(inner.scratchCount, 3u * 4);
  EXPECT_EQ(countOps(inner, StepOp::kSend), 4u);
  EXPECT_EQ(programs[(root + 7) % n].scratchCount, 0u);
  EXPECT_TRUE(collie::verifyPrograms(programs).ok());
}

TEST(ScatterBinomial, MirrorsTheGather) {
  const int n = 8, root = 5;
  const std::vector<Program> gather = buildPrograms(Collective::kGather, "binomial", n, 4, root);
  const std::vector<Program> scatter = buildPrograms(Collective::kScatter, "binomial", n, 4, root);
  ASSERT_EQ(scatter.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(scatter[r].steps.size(), gather[r].steps.size());
    EXPECT_EQ(countOps(scatter[r], StepOp::kSend), countOps(gather[r], StepOp::kRecv));
    EXPECT_EQ(scatter[r].scratchCount, gather[r].scratchCount);
  }
  // The root sends the largest subtree (relative rank 4) first.
  ASSERT_FALSE(scatter[root].steps.empty());
  EXPECT_EQ(scatter[root].steps.front().sendPeer, (root + 4) % n);
  EXPECT_EQ(scatter[root].steps.back().op, StepOp::kCopy);
  EXPECT_TRUE(collie::verifyPrograms(scatter).ok());
}

TEST(AllToAllPairwise, ExchangesWithRankPlusAndMinusK) {
  const int n = 6;
  for (Collective c : {Collective::kAllToAll}) {
    const std::vector<Program> programs = buildPrograms(c, "pairwise", n, 3);
    ASSERT_EQ(programs.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const Program& p = programs[r];
      ASSERT_EQ(p.steps.size(), static_cast<size_t>(n));
      EXPECT_EQ(p.steps[0].op, StepOp::kCopy);
      EXPECT_EQ(p.steps[0].src.offset, static_cast<uint64_t>(r) * 3);
      for (int k = 1; k < n; ++k) {
        const collie::Step& s = p.steps[static_cast<size_t>(k)];
        EXPECT_EQ(s.op, StepOp::kSendRecv);
        EXPECT_EQ(s.sendPeer, (r + k) % n);
        EXPECT_EQ(s.recvPeer, (r - k + n) % n);
        EXPECT_EQ(s.src.offset, static_cast<uint64_t>(s.sendPeer) * 3);
        EXPECT_EQ(s.dst.offset, static_cast<uint64_t>(s.recvPeer) * 3);
      }
    }
    EXPECT_TRUE(collie::verifyPrograms(programs).ok());
  }
  EXPECT_EQ(collie::findAlgorithm(Collective::kAllToAll, "pairwise")->rounds, collie::RoundRule::kNone);
  EXPECT_EQ(collie::findAlgorithm(Collective::kAllToAllv, "pairwise")->rounds, collie::RoundRule::kNone);
}

// counts[i][j]: elements from rank i to rank j, packed in peer order on both sides.
std::vector<Program> allToAllv(const std::vector<std::vector<uint64_t>>& counts) {
  const int n = static_cast<int>(counts.size());
  std::vector<Program> programs;
  for (int r = 0; r < n; ++r) {
    ProgramArgs a;
    a.collective = Collective::kAllToAllv;
    a.nranks = n;
    a.rank = r;
    uint64_t sendAt = 0, recvAt = 0;
    for (int j = 0; j < n; ++j) {
      a.sendCounts.push_back(counts[r][j]);
      a.sendDispls.push_back(sendAt);
      sendAt += counts[r][j];
      a.recvCounts.push_back(counts[j][r]);
      a.recvDispls.push_back(recvAt);
      recvAt += counts[j][r];
    }
    programs.push_back(collie::buildAllToAllPairwise(a));
  }
  return programs;
}

TEST(AllToAllvPairwise, SkewedSplitIsVerified) {
  // Every rank sends 5 + rank elements to rank 2 and nothing to anyone else.
  const int n = 5, sink = 2;
  std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n, 0));
  for (int r = 0; r < n; ++r) counts[r][sink] = 5 + static_cast<uint64_t>(r);
  const std::vector<Program> programs = allToAllv(counts);
  // The sink receives from everyone; the others only send to it (every other exchange is empty, left out).
  EXPECT_EQ(programs[sink].steps.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (r == sink) continue;
    ASSERT_EQ(programs[r].steps.size(), 1u);  // no self-copy (nothing to itself), one exchange
    EXPECT_EQ(programs[r].steps[0].op, StepOp::kSendRecv);
    EXPECT_EQ(programs[r].steps[0].sendPeer, sink);
    EXPECT_EQ(programs[r].steps[0].recvCount, 0u);
  }
  for (uint64_t slice : {uint64_t{0}, uint64_t{1}}) {
    collie::VerifyOptions o;
    o.sliceElems = slice;
    o.nslots = slice ? 2 : 0;
    collie::Status s = collie::verifyPrograms(programs, o);
    EXPECT_TRUE(s.ok()) << s.message();
  }
}

TEST(AllToAllvPairwise, VerifierCatchesMismatchedCounts) {
  const int n = 4;
  std::vector<std::vector<uint64_t>> counts(n, std::vector<uint64_t>(n, 0));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) counts[i][j] = static_cast<uint64_t>(1 + (i + 2 * j) % 3);
  ASSERT_TRUE(collie::verifyPrograms(allToAllv(counts)).ok());
  // Rank 3 expects one element more from rank 1 than rank 1 sends it.
  std::vector<Program> programs = allToAllv(counts);
  ProgramArgs a;
  a.collective = Collective::kAllToAllv;
  a.nranks = n;
  a.rank = 3;
  a.sendCounts = programs[3].sendCounts;
  a.sendDispls = programs[3].sendDispls;
  a.recvCounts = programs[3].recvCounts;
  a.recvDispls = programs[3].recvDispls;
  a.recvCounts[1] += 1;
  for (int j = 2; j < n; ++j) a.recvDispls[static_cast<size_t>(j)] += 1;  // keep the blocks apart
  programs[3] = collie::buildAllToAllPairwise(a);
  collie::Status s = collie::verifyPrograms(programs);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("differs"), std::string::npos) << s.message();
}

// Hierarchical broadcast and reduce send 1/L of the buffer per rank across
// nodes (L ranks to a node), between ranks of one local index, where the
// chain sends the whole buffer across through one rank per node.
TEST(HierRooted, EachRankCarriesOnePieceAcrossNodes) {
  const struct { int n, perNode, root; } shapes[] = {{4, 2, 0}, {6, 3, 4}, {6, 2, 3}, {8, 4, 5}, {12, 4, 11}};
  const uint64_t count = 1200;  // divides by every L above
  for (Collective c : {Collective::kBroadcast, Collective::kReduce}) {
    for (const auto& shape : shapes) {
      const std::vector<Program> programs = buildPrograms(c, "hier", shape.n, count, shape.root, shape.perNode);
      ASSERT_EQ(programs.size(), static_cast<size_t>(shape.n));
      uint64_t total = 0;
      for (const Program& p : programs) {
        uint64_t across = 0;
        for (const collie::Step& s : p.steps) {
          if (s.sendPeer < 0 || s.sendPeer / shape.perNode == p.rank / shape.perNode) continue;
          EXPECT_EQ(s.sendPeer % shape.perNode, p.rank % shape.perNode) << p.describe();
          across += s.sent();
        }
        EXPECT_LE(across, count / static_cast<uint64_t>(shape.perNode)) << p.describe();
        total += across;
        // What a rank receives only to pass on to another node it forwards slice by slice
        // (appendForwarding): never a receive into a range, then a separate send of it across nodes.
        for (size_t i = 1; i < p.steps.size(); ++i) {
          const collie::Step &a = p.steps[i - 1], &b = p.steps[i];
          const bool received = a.op == collie::StepOp::kRecv || a.op == collie::StepOp::kRecvReduceCopy;
          const bool across = b.sendPeer >= 0 && b.sendPeer / shape.perNode != p.rank / shape.perNode;
          EXPECT_FALSE(received && across && b.op == collie::StepOp::kSend && a.dst.buffer == b.src.buffer &&
                       a.dst.offset == b.src.offset && a.count == b.count)
              << "unfused forward at step " << i << "\n"
              << p.describe();
        }
        // Only the root of a reduce completes the reduction (avg divides once).
        if (c == Collective::kReduce && p.rank != shape.root) {
          for (const collie::Step& s : p.steps) EXPECT_FALSE(s.finalize) << p.describe();
        }
      }
      // Every node but the root's receives (broadcast) or sends (reduce) the buffer once, in L pieces.
      EXPECT_EQ(total, count * static_cast<uint64_t>(shape.n / shape.perNode - 1))
          << collie::collectiveName(c) << " n " << shape.n;
      EXPECT_TRUE(collie::verifyPrograms(programs).ok()) << collie::collectiveName(c) << " n " << shape.n;
    }
  }
}

}  // namespace
