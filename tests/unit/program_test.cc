// Ring allreduce programs: proved by the verifier for 1..64 ranks and awkward
// counts, and the verifier itself shown to catch broken programs.
#include <gtest/gtest.h>

#include "algorithms/registry.h"
#include "algorithms/verifier.h"
#include "common/programs.h"

namespace {

std::vector<collie::Program> ringPrograms(int n, uint64_t count) {
  std::vector<collie::Program> programs;
  for (int r = 0; r < n; ++r) {
    collie::ProgramArgs a;
    a.nranks = n;
    a.rank = r;
    a.count = count;
    programs.push_back(collie::buildAllReduceRing(a));
  }
  return programs;
}

TEST(RingAllReduce, VerifiedForEveryRankCount) {
  for (int n = 1; n <= 64; ++n) {
    for (uint64_t count : {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n - 1 > 0 ? n - 1 : 1),
                           static_cast<uint64_t>(n + 1), uint64_t{97}}) {
      collie::Status s = collie::verifyPrograms(ringPrograms(n, count));
      ASSERT_TRUE(s.ok()) << s.message();
    }
  }
}

TEST(RingAllReduce, StepCountAndShape) {
  const collie::Program p = ringPrograms(5, 100)[2];
  // n reduce-scatter steps (send + n-1 receives), n-1 allgather receives: the last reduce-scatter step sends
  // the chunk it completes on as each slice is done, where the allgather would begin with a send of it.
  ASSERT_EQ(p.steps.size(), 2u * 5 - 1);
  EXPECT_EQ(p.steps.front().op, collie::StepOp::kSend);
  EXPECT_EQ(p.steps[4].op, collie::StepOp::kRecvReduceCopySend);
  EXPECT_TRUE(p.steps[4].finalize);
  EXPECT_EQ(p.steps[4].sendPeer, 3);
  EXPECT_EQ(p.steps[4].recvPeer, 1);
  EXPECT_EQ(p.steps[4].dst.buffer, collie::Buffer::kOutput);
  EXPECT_EQ(p.steps.back().op, collie::StepOp::kRecv);
  EXPECT_EQ(collie::defaultAlgorithm(collie::Collective::kAllReduce)->name, std::string("ring"));
  EXPECT_NE(p.describe().find("recvReduceSend"), std::string::npos);
  EXPECT_NE(p.describe().find("recvReduceCopySend"), std::string::npos);
}

TEST(RingAllReduce, BalancedChunksCoverEverythingOnce) {
  for (uint64_t count : {0u, 1u, 7u, 64u, 1000003u}) {
    for (int parts : {1, 3, 8, 64}) {
      uint64_t next = 0;
      for (int c = 0; c < parts; ++c) {
        collie::Chunk k = collie::balancedChunk(count, parts, c);
        EXPECT_EQ(k.offset, next);
        next += k.count;
      }
      EXPECT_EQ(next, count);
    }
  }
}

TEST(Verifier, CatchesBrokenPrograms) {
  // Dropping a rank's last reduce-scatter step loses contributions and leaves a message unreceived.
  auto programs = ringPrograms(4, 8);
  programs[1].steps.erase(programs[1].steps.begin() + 3);
  EXPECT_FALSE(collie::verifyPrograms(programs).ok());

  // Rank 0 of 2 reducing the finished chunk it receives with its own input again double-counts.
  programs = ringPrograms(2, 4);
  collie::Step& last = programs[0].steps.back();
  last.op = collie::StepOp::kRecvReduceCopy;
  last.src = collie::Range{collie::Buffer::kInput, last.dst.offset};
  collie::Status s = collie::verifyPrograms(programs);
  EXPECT_NE(s.message().find("double-counts"), std::string::npos) << s.message();

  // A receive from a rank that never sends deadlocks.
  programs = ringPrograms(3, 6);
  programs[2].steps[1].recvPeer = 0;
  s = collie::verifyPrograms(programs);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();

  // Forgetting avg's division is caught.
  programs = ringPrograms(2, 4);
  for (auto& p : programs)
    for (auto& st : p.steps) st.finalize = false;
  s = collie::verifyPrograms(programs);
  EXPECT_NE(s.message().find("never finalized"), std::string::npos) << s.message();
}

}  // namespace

namespace {

TEST(Verifier, CatchesAWrongBlock) {
  // A reduce-scatter whose rank 1 keeps block 0 instead of block 1.
  std::vector<collie::Program> programs;
  for (int r = 0; r < 3; ++r) {
    collie::ProgramArgs a;
    a.collective = collie::Collective::kReduceScatter;
    a.nranks = 3;
    a.rank = r;
    a.count = 4;
    programs.push_back(collie::buildReduceScatterRing(a));
  }
  programs[1].steps.back().dst.offset = 0;
  programs[1].steps.back().src.offset = 0;
  collie::Status s = collie::verifyPrograms(programs);
  EXPECT_FALSE(s.ok());
}

}  // namespace

namespace {

using collie::Buffer;
using collie::Range;
using collie::Step;
using collie::StepOp;

// Joined steps (program.h) must form a group the executors can run as one; each broken rule is named.
TEST(Verifier, CatchesMalformedJoinedSteps) {
  const struct {
    const char* what;
    void (*breakIt)(collie::Program*);
    const char* message;
  } cases[] = {
      {"a joined allgather exchange", [](collie::Program* p) { p->steps.back().joined = true; }, "joined, but"},
      {"a joined first step", [](collie::Program* p) { p->steps[0].joined = true; }, "joined, but"},
      {"another destination", [](collie::Program* p) { p->steps[2].dst.offset += 1; }, "writes another range"},
      {"an early division", [](collie::Program* p) { p->steps[1].finalize = true; }, "finalizes before the last"},
      {"one peer twice", [](collie::Program* p) { p->steps[2].recvPeer = p->steps[1].recvPeer; }, "earlier step"},
      {"a send heading a group",
       [](collie::Program* p) {
         p->steps[0].op = StepOp::kSend;
         p->steps[0].sendPeer = (p->rank + 1) % p->nranks;
       },
       "heads a group"},
  };
  for (const auto& c : cases) {
    for (bool joinReceives : {true, false}) {
      std::vector<collie::Program> programs =
          collie::test::buildPrograms(collie::Collective::kAllReduce, "twoshot", 4, 40);
      ASSERT_TRUE(programs[0].steps[1].joined && programs[0].steps[2].joined) << programs[0].describe();
      c.breakIt(&programs[0]);
      collie::VerifyOptions o;
      o.joinReceives = joinReceives;
      const collie::Status s = collie::verifyPrograms(programs, o);
      EXPECT_NE(s.message().find(c.message), std::string::npos)
          << c.what << (joinReceives ? ", joined" : ", one after another") << ": " << s.message();
    }
  }
}

// A group holds every receive's slot until the same slice has arrived from all its peers: a peer that sends to
// us only after another has finished its exchange with us waits forever, though the steps one after another
// would not. Rank 0 joins its exchanges with ranks 1 and 2; rank 2 waits for rank 1 before it sends to rank 0,
// and rank 1 finishes only once rank 0 takes its slices. One slot of one element per connection.
TEST(Verifier, JoinedStepsThatWaitOnEachOtherDeadlock) {
  std::vector<collie::Program> programs(3);
  for (int r = 0; r < 3; ++r) {
    programs[r].nranks = 3;
    programs[r].rank = r;
    programs[r].count = 4;
  }
  const Range in{Buffer::kInput, 0}, out{Buffer::kOutput, 0};
  programs[0].steps.push_back(collie::makeStep(StepOp::kCopy, -1, -1, in, out, 4));
  for (int peer : {1, 2}) {
    Step s = collie::exchangeStep(StepOp::kSendRecvReduce, peer, peer, in, 4, out, 4);
    s.joined = true;
    s.finalize = peer == 2;
    programs[0].steps.push_back(s);
  }
  programs[1].steps.push_back(collie::exchangeStep(StepOp::kSendRecv, 0, 0, in, 4, out, 4));
  programs[1].steps.push_back(collie::makeStep(StepOp::kSend, 2, -1, in, out, 4));
  programs[2].steps.push_back(collie::makeStep(StepOp::kRecv, -1, 1, in, out, 4));
  programs[2].steps.push_back(collie::exchangeStep(StepOp::kSendRecv, 0, 0, in, 4, out, 4));
  collie::VerifyOptions o;
  o.nslots = 1;
  o.sliceElems = 1;
  collie::Status s = collie::verifyPrograms(programs, o);
  EXPECT_NE(s.message().find("deadlock: joined steps wait"), std::string::npos) << s.message();
  // One after another, rank 0 finishes with rank 1 first, and the calls end (with outputs no allreduce has).
  o.joinReceives = false;
  s = collie::verifyPrograms(programs, o);
  EXPECT_EQ(s.message().find("deadlock"), std::string::npos) << s.message();
  EXPECT_FALSE(s.ok());
}

}  // namespace
