// Shapes of the rhd, tree, oneshot and twoshot allreduces: step counts and
// peers, the fold-in of non-powers of two, the rank order of one-shot's
// reductions (which makes every rank's result the same bits), two-shot's joined
// reduce-scatter, and the double binary tree's leaves. Correctness for 1..64 ranks is verifier_test's.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "common/programs.h"

namespace {

using collie::AlgorithmInfo;
using collie::Buffer;
using collie::Collective;
using collie::Program;
using collie::ProgramArgs;
using collie::Step;
using collie::StepOp;
using collie::test::buildPrograms;
using collie::test::countOps;

// Every rank's program of the allreduce algorithm `name`.
std::vector<Program> build(const char* name, int n, uint64_t count) {
  return buildPrograms(Collective::kAllReduce, name, n, count);
}

TEST(AllReduceAlgorithms, RegisteredWithTheirRoundRules) {
  const struct {
    const char* name;
    collie::RoundRule rounds;
  } expected[] = {{"rhd", collie::RoundRule::kNone},        {"tree", collie::RoundRule::kOneSlot},
                  {"oneshot", collie::RoundRule::kOneSlot}, {"twoshot", collie::RoundRule::kRankSlots},
                  {"hier", collie::RoundRule::kNodeSlots},  {"rd", collie::RoundRule::kOneSlot}};
  for (const auto& e : expected) {
    const collie::AlgorithmInfo* a = collie::findAlgorithm(Collective::kAllReduce, e.name);
    ASSERT_NE(a, nullptr) << e.name;
    EXPECT_EQ(a->rounds, e.rounds) << e.name;
  }
  EXPECT_STREQ(collie::defaultAlgorithm(Collective::kAllReduce)->name, "ring");
}

TEST(RhdAllReduce, PowerOfTwoHalvesThenDoubles) {
  const int n = 8;
  const std::vector<Program> programs = build("rhd", n, 1000);
  ASSERT_EQ(programs.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const Program& p = programs[static_cast<size_t>(r)];
    ASSERT_EQ(p.steps.size(), 1u + 2 * 3) << p.describe();  // the copy, then 2 log2(8) exchanges
    EXPECT_EQ(p.steps[0].op, StepOp::kCopy);
    EXPECT_EQ(p.scratchCount, 0u);
    const int partners[] = {r ^ 4, r ^ 2, r ^ 1, r ^ 1, r ^ 2, r ^ 4};
    uint64_t sent = 0;
    for (int i = 0; i < 6; ++i) {
      const Step& s = p.steps[static_cast<size_t>(1 + i)];
      EXPECT_EQ(s.op, i < 3 ? StepOp::kSendRecvReduce : StepOp::kSendRecv) << p.describe();
      EXPECT_EQ(s.sendPeer, partners[i]);
      EXPECT_EQ(s.recvPeer, partners[i]);
      EXPECT_EQ(s.finalize, i == 2);  // the last halving completes the rank's chunk
      sent += s.sent();
    }
    EXPECT_EQ(sent, 2u * (1000 - 1000 / n));  // 2(n-1)/n of the buffer, like the ring
  }
}

TEST(RhdAllReduce, FoldedOutRankSitsOut) {
  // n = 6: p = 4, rem = 2; ranks 1 and 3 fold into 0 and 2.
  const std::vector<Program> programs = build("rhd", 6, 60);
  for (int odd : {1, 3}) {
    const Program& p = programs[static_cast<size_t>(odd)];
    ASSERT_EQ(p.steps.size(), 2u) << p.describe();
    EXPECT_EQ(p.steps[0].op, StepOp::kSend);
    EXPECT_EQ(p.steps[0].sendPeer, odd - 1);
    EXPECT_EQ(p.steps[0].count, 60u);
    EXPECT_EQ(p.steps[1].op, StepOp::kRecv);
    EXPECT_EQ(p.steps[1].recvPeer, odd - 1);
  }
  for (int even : {0, 2}) {
    const Program& p = programs[static_cast<size_t>(even)];
    ASSERT_EQ(p.steps.size(), 1u + 2 * 2 + 1) << p.describe();  // fold, 2 log2(4) exchanges, unfold
    EXPECT_EQ(p.steps.front().op, StepOp::kRecvReduceCopy);
    EXPECT_EQ(p.steps.front().recvPeer, even + 1);
    EXPECT_EQ(p.steps.back().op, StepOp::kSend);
    EXPECT_EQ(p.steps.back().sendPeer, even + 1);
  }
  for (int r : {4, 5}) EXPECT_EQ(programs[static_cast<size_t>(r)].steps.size(), 1u + 2 * 2);
  // No exchange involves a folded-out rank.
  for (const Program& p : programs)
    for (const Step& s : p.steps)
      if (collie::stepIsExchange(s.op)) {
        EXPECT_TRUE(s.sendPeer != 1 && s.sendPeer != 3) << p.describe();
      }
}

// The contributing rank of each source a direct reduction reads: its own part
// from the input, or a scratch block filled by a copy (its own) or an exchange (the peer's).
std::vector<int> reductionOrder(const Program& p, uint64_t* finalized) {
  std::map<uint64_t, int> scratchOwner;
  std::vector<int> order;
  *finalized = 0;
  bool reducing = false;
  for (const Step& s : p.steps) {
    if (s.op == StepOp::kCopy && s.dst.buffer == Buffer::kScratch) {
      scratchOwner[s.dst.offset] = p.rank;
    } else if (s.op == StepOp::kSendRecv && !reducing) {
      scratchOwner[s.dst.offset] = s.recvPeer;
    } else if ((s.op == StepOp::kCopy && s.dst.buffer == Buffer::kOutput) || s.op == StepOp::kReduce) {
      EXPECT_EQ(s.op == StepOp::kCopy, !reducing) << "one copy, then the reduces";
      reducing = true;
      order.push_back(s.src.buffer == Buffer::kInput ? p.rank : scratchOwner.at(s.src.offset));
      *finalized += s.finalize;
    }
  }
  return order;
}

TEST(DirectAllReduce, OneShotReducesInRankOrder) {
  for (int n : {1, 2, 3, 5, 8}) {
    for (const Program& p : build("oneshot", n, 40)) {
      uint64_t finalized = 0;
      const std::vector<int> order = reductionOrder(p, &finalized);
      ASSERT_EQ(order.size(), static_cast<size_t>(n)) << p.describe();
      for (int j = 0; j < n; ++j) EXPECT_EQ(order[static_cast<size_t>(j)], j) << p.describe();
      EXPECT_EQ(finalized, 1u);
      EXPECT_TRUE(p.steps.back().op != StepOp::kReduce || p.steps.back().finalize);
    }
  }
}

// Two-shot's reduce-scatter: a copy of the own chunk heads the joined exchanges that reduce every other rank's
// contribution into it (program.h, "Joined steps"), in groups of at most kMaxJoinedSteps steps, the last
// exchange finalizing; then the allgather's exchanges. One rank reduces each chunk, so every rank gets its bits.
TEST(DirectAllReduce, TwoShotJoinsItsReduceScatter) {
  for (int n : {1, 2, 3, 8, 9, 17}) {
    const uint64_t count = 5 * static_cast<uint64_t>(n) + 2;  // chunks of two sizes
    const std::vector<Program> programs = build("twoshot", n, count);
    for (const Program& p : programs) {
      const int r = p.rank;
      const collie::Chunk own = collie::balancedChunk(count, n, r);
      ASSERT_EQ(p.steps.size(), static_cast<size_t>(2 * n - 1)) << p.describe();
      EXPECT_EQ(p.scratchCount, 0u);
      const Step& copy = p.steps[0];
      EXPECT_EQ(copy.op, StepOp::kCopy);
      EXPECT_EQ(copy.src.buffer, Buffer::kInput);
      EXPECT_EQ(copy.src.offset, own.offset);
      EXPECT_EQ(copy.dst.buffer, Buffer::kOutput);
      EXPECT_EQ(copy.dst.offset, own.offset);
      EXPECT_EQ(copy.finalize, n == 1);
      for (int k = 1; k < n; ++k) {
        const Step& s = p.steps[static_cast<size_t>(k)];
        EXPECT_EQ(s.op, StepOp::kSendRecvReduce) << p.describe();
        EXPECT_EQ(s.sendPeer, (r + k) % n);
        EXPECT_EQ(s.recvPeer, (r - k + n) % n);
        EXPECT_EQ(s.count, collie::balancedChunk(count, n, (r + k) % n).count);
        EXPECT_EQ(s.recvCount, own.count);
        EXPECT_EQ(s.dst.offset, own.offset);
        EXPECT_EQ(s.joined, k % collie::kMaxJoinedSteps != 0) << "step " << k;
        EXPECT_EQ(s.finalize, k == n - 1);
        const Step& g = p.steps[static_cast<size_t>(n - 1 + k)];
        EXPECT_EQ(g.op, StepOp::kSendRecv);
        EXPECT_FALSE(g.joined);
      }
      // Groups of at most kMaxJoinedSteps, whatever n.
      for (int head = 0; head < static_cast<int>(p.steps.size());) {
        const int end = collie::joinedGroupEnd(p.steps.data(), static_cast<int>(p.steps.size()), head);
        EXPECT_LE(end - head, collie::kMaxJoinedSteps);
        head = end;
      }
    }
    // Joined or one step after another, in place or not, with two slots of one element: no deadlock, every
    // contribution once.
    for (int mode = 0; mode < 4; ++mode) {
      collie::VerifyOptions o;
      o.joinReceives = mode < 2;
      o.inPlace = (mode & 1) != 0;
      o.nslots = 2;
      o.sliceElems = 1;
      const collie::Status st = collie::verifyPrograms(programs, o);
      EXPECT_TRUE(st.ok()) << "n " << n << " mode " << mode << ": " << st.message();
    }
  }
}

TEST(DirectAllReduce, StepCounts) {
  const int n = 5;
  const std::vector<Program> one = build("oneshot", n, 40), two = build("twoshot", n, 40);
  for (int r = 0; r < n; ++r) {
    const Program& a = one[static_cast<size_t>(r)];
    const Program& b = two[static_cast<size_t>(r)];
    const size_t ownCopy = r > 0 ? 1 : 0;  // rank 0 reads its own input first, before the output is written
    EXPECT_EQ(a.steps.size(), ownCopy + (n - 1) + 1 + (n - 1)) << a.describe();
    EXPECT_EQ(countOps(a, StepOp::kSendRecv), static_cast<size_t>(n - 1));
    EXPECT_EQ(countOps(a, StepOp::kReduce), static_cast<size_t>(n - 1));
    EXPECT_EQ(a.scratchCount, (n - 1 + ownCopy) * 40);
    EXPECT_EQ(b.steps.size(), static_cast<size_t>(2 * n - 1)) << b.describe();
    EXPECT_EQ(countOps(b, StepOp::kSendRecv), static_cast<size_t>(n - 1));
    EXPECT_EQ(countOps(b, StepOp::kSendRecvReduce), static_cast<size_t>(n - 1));
    EXPECT_EQ(b.scratchCount, 0u);
    // Pairwise order: step k sends to rank+k and receives from rank-k.
    for (int k = 1; k < n; ++k) {
      const Step& s = a.steps[ownCopy + static_cast<size_t>(k - 1)];
      EXPECT_EQ(s.sendPeer, (r + k) % n);
      EXPECT_EQ(s.recvPeer, (r - k + n) % n);
    }
  }
  EXPECT_EQ(build("oneshot", 1, 7)[0].steps.size(), 1u);
  EXPECT_EQ(build("twoshot", 1, 7)[0].steps.size(), 1u);
}

// Whether rank p.rank is a leaf of tree t (carrying half t): it sends its own
// input half up unreduced.
bool leafIn(const Program& p, int t) {
  const collie::Chunk half = collie::balancedChunk(p.count, 2, t);
  for (const Step& s : p.steps)
    if (s.op == StepOp::kSend && s.src.buffer == Buffer::kInput && s.src.offset == half.offset) return true;
  return false;
}

TEST(TreeAllReduce, EveryRankIsALeafInExactlyOneTree) {
  for (int n = 2; n <= 64; ++n) {
    const std::vector<Program> programs = build("tree", n, 2 * static_cast<uint64_t>(n));
    int leaves[2] = {0, 0};
    for (const Program& p : programs) {
      const bool l0 = leafIn(p, 0), l1 = leafIn(p, 1);
      EXPECT_TRUE(l0 || l1) << "n " << n << ": rank " << p.rank << " is a leaf in neither tree\n" << p.describe();
      EXPECT_FALSE(l0 && l1) << "n " << n << ": rank " << p.rank << " is a leaf in both trees\n" << p.describe();
      leaves[0] += l0;
      leaves[1] += l1;
      // Leaf in tree 0 exactly when odd: tree 1 is the mirror.
      EXPECT_EQ(l0, p.rank % 2 == 1) << "n " << n;
      EXPECT_TRUE(p.steps.size() == 4 || p.steps.size() == 6) << p.describe();
    }
    EXPECT_EQ(leaves[0], n / 2);
    EXPECT_EQ(leaves[1], (n + 1) / 2);
  }
}

TEST(TreeAllReduce, EightRanksMatchTheDiagram) {
  const std::vector<Program> programs = build("tree", 8, 16);
  // Parent of each rank in tree 0 and tree 1 (-1: root), read off the header's diagram.
  const int parent0[] = {-1, 2, 4, 2, 0, 6, 4, 6};
  const int parent1[] = {1, 3, 1, 7, 5, 3, 5, -1};
  for (int r = 0; r < 8; ++r) {
    const Program& p = programs[static_cast<size_t>(r)];
    // The up-going step of each tree: the leaf's send or the internal node's last reduce.
    int up[2] = {-1, -1};
    for (const Step& s : p.steps) {
      const int t = s.src.offset == 0 ? 0 : 1;
      if ((s.op == StepOp::kSend && s.src.buffer == Buffer::kInput) || s.op == StepOp::kRecvReduceSend)
        up[t] = s.sendPeer;
    }
    EXPECT_EQ(up[0], parent0[r]) << p.describe();
    EXPECT_EQ(up[1], parent1[r]) << p.describe();
    const bool oneChild = r == 0 || r == 7;  // the roots
    EXPECT_EQ(p.steps.size(), oneChild ? 4u : 6u) << p.describe();
  }
}

TEST(TreeAllReduce, RootsFinalizeTheirHalf) {
  for (int n : {2, 3, 7, 8, 13}) {
    const std::vector<Program> programs = build("tree", n, 10);
    int finalizers[2] = {0, 0};
    for (const Program& p : programs)
      for (const Step& s : p.steps)
        if (s.finalize) ++finalizers[s.dst.offset == 0 ? 0 : 1];
    EXPECT_EQ(finalizers[0], 1) << n;
    EXPECT_EQ(finalizers[1], 1) << n;
    EXPECT_TRUE(collie::verifyPrograms(programs).ok());
  }
}

// Hierarchical allreduce crosses nodes only in its middle phase, with the
// rank of the same local index on each other node, and sends 2(K-1)/n of the
// buffer across nodes per rank (K nodes of L): a flat ring over the same
// ranks sends 2(n-1)/n, some of it across nodes at every step.
TEST(HierAllReduce, CrossesNodesOnlyBetweenRanksOfOneLocalIndex) {
  const AlgorithmInfo* hier = collie::findAlgorithm(Collective::kAllReduce, "hier");
  ASSERT_NE(hier, nullptr);
  const struct { int n, perNode; } shapes[] = {{4, 2}, {6, 3}, {6, 2}, {8, 4}, {12, 4}};
  const uint64_t count = 1200;  // divides by every n and L above
  for (const auto& shape : shapes) {
    ProgramArgs args;
    args.collective = Collective::kAllReduce;
    args.nranks = shape.n;
    args.count = count;
    args.ranksPerNode = shape.perNode;
    std::vector<Program> programs;
    for (int r = 0; r < shape.n; ++r) {
      args.rank = r;
      programs.push_back(hier->build(args));
    }
    const int nodes = shape.n / shape.perNode;
    for (const Program& p : programs) {
      uint64_t across = 0;
      for (const Step& s : p.steps) {
        if (s.sendPeer < 0 || s.sendPeer / shape.perNode == p.rank / shape.perNode) continue;
        EXPECT_EQ(s.sendPeer % shape.perNode, p.rank % shape.perNode) << p.describe();
        across += s.sent();
      }
      EXPECT_EQ(across, 2 * static_cast<uint64_t>(nodes - 1) * count / static_cast<uint64_t>(shape.n))
          << "n " << shape.n << ", nodes of " << shape.perNode << "\n"
          << p.describe();
    }
    EXPECT_TRUE(collie::verifyPrograms(programs).ok()) << shape.n << " " << shape.perNode;
  }
}

// Recursive doubling: log2 p exchanges of the whole buffer with rank ^ mask
// (p the largest power of two <= n), each followed by one local reduce; the
// ranks above p hand their input to rank - p and get the result back.
TEST(RdAllReduce, ExchangesWithRankXorMask) {
  for (int n : {2, 4, 6, 8}) {
    const std::vector<Program> programs = build("rd", n, 100);
    const int p = n >= 8 ? 8 : (n >= 4 ? 4 : 2), hops = p == 8 ? 3 : (p == 4 ? 2 : 1);
    for (const Program& prog : programs) {
      const int r = prog.rank;
      if (r >= p) {
        ASSERT_EQ(prog.steps.size(), 2u) << prog.describe();
        EXPECT_EQ(prog.steps[0].op, StepOp::kSend);
        EXPECT_EQ(prog.steps[0].sendPeer, r - p);
        EXPECT_EQ(prog.steps[1].op, StepOp::kRecv);
        EXPECT_EQ(prog.steps[1].recvPeer, r - p);
        continue;
      }
      std::vector<int> partners;
      for (const Step& s : prog.steps)
        if (s.op == StepOp::kSendRecv) {
          EXPECT_EQ(s.sendPeer, s.recvPeer);
          EXPECT_EQ(s.count, 100u);
          partners.push_back(s.sendPeer);
        }
      ASSERT_EQ(partners.size(), static_cast<size_t>(hops)) << prog.describe();
      for (int k = 0; k < hops; ++k) EXPECT_EQ(partners[static_cast<size_t>(k)], r ^ (1 << k));
      EXPECT_EQ(countOps(prog, StepOp::kReduce), static_cast<size_t>(hops));
      EXPECT_EQ(prog.scratchCount, 100u);
      // Only the last reduce completes the sum (avg divides there).
      size_t lastReduce = 0;
      for (size_t i = 0; i < prog.steps.size(); ++i)
        if (prog.steps[i].op == StepOp::kReduce) lastReduce = i;
      for (size_t i = 0; i < prog.steps.size(); ++i) EXPECT_EQ(prog.steps[i].finalize, i == lastReduce) << i;
    }
    EXPECT_TRUE(collie::verifyPrograms(programs).ok()) << n;
  }
}

}  // namespace
