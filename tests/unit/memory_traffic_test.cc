// Memory traffic per rank (algorithms/memory_traffic.h): each step kind counts
// what the step runner reads and writes; closed forms worked out by hand for
// ring allreduce, ring reduce-scatter and pairwise all-to-all agree with it;
// in place, a copy onto itself counts nothing; a send read in place costs the
// sender nothing; and across every registered algorithm the count is zero
// exactly for empty calls.
#include "algorithms/memory_traffic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "algorithms/registry.h"
#include "executor/direct_sends.h"

namespace {

using collie::Buffer;
using collie::Collective;
using collie::Program;
using collie::Step;
using collie::StepOp;

Step step(StepOp op, uint64_t count, uint64_t recvCount = 0) {
  Step s;
  s.op = op;
  s.count = count;
  s.recvCount = recvCount;
  s.src = {Buffer::kInput, 0};
  s.dst = {Buffer::kOutput, 0};
  return s;
}

Program build(Collective c, const char* algo, int n, int rank, uint64_t count) {
  collie::ProgramArgs args;
  args.collective = c;
  args.nranks = n;
  args.rank = rank;
  args.count = count;
  args.stride = count;
  return collie::findAlgorithm(c, algo)->build(args);
}

TEST(MemoryTraffic, EachStepKindCountsItsReadsAndWrites) {
  struct Want {
    StepOp op;
    uint64_t elems;  // for count 10, received 7
  };
  const Want wants[] = {{StepOp::kSend, 20},           {StepOp::kRecv, 20},
                        {StepOp::kRecvReduceSend, 30}, {StepOp::kRecvReduceCopy, 30},
                        {StepOp::kRecvCopySend, 30},   {StepOp::kCopy, 20},
                        {StepOp::kSendRecv, 20 + 14},  {StepOp::kSendRecvReduce, 20 + 21},
                        {StepOp::kReduce, 30},         {StepOp::kRecvReduceCopySend, 40},
                        {StepOp::kCopySend, 30}};
  for (const Want& w : wants) {
    Program p;
    p.steps.push_back(step(w.op, 10, 7));
    EXPECT_EQ(collie::memoryTrafficElems(p), w.elems) << collie::stepOpName(w.op);
  }
}

TEST(MemoryTraffic, CopyOntoItselfCountsNothing) {
  Program p;
  Step s = step(StepOp::kCopy, 10);
  s.src = {Buffer::kInput, 30};
  s.dst = {Buffer::kOutput, 10};
  p.steps.push_back(s);
  EXPECT_EQ(collie::memoryTrafficElems(p), 20u);             // two buffers
  EXPECT_EQ(collie::memoryTrafficElems(p, true, 0), 20u);    // in place, other addresses
  EXPECT_EQ(collie::memoryTrafficElems(p, true, 20), 0u);    // the output begins 20 after the input
  EXPECT_EQ(collie::memoryTrafficElems(p, true, -20), 20u);  // not 20 before it
  p.steps[0].src = {Buffer::kOutput, 10};                    // one buffer, one offset
  EXPECT_EQ(collie::memoryTrafficElems(p), 0u);
  p.steps[0].src = {Buffer::kOutput, 11};
  EXPECT_EQ(collie::memoryTrafficElems(p), 20u);
  p.steps[0].src = {Buffer::kOutput, 10};  // output to input, in place
  p.steps[0].dst = {Buffer::kInput, 30};
  EXPECT_EQ(collie::memoryTrafficElems(p, true, 20), 0u);
}

// Closed forms, from the algorithms' shapes (docs/algorithms.md), for counts the rank count divides.
TEST(MemoryTraffic, MatchesClosedFormsOfRingsAndPairwise) {
  for (int n = 2; n <= 9; ++n) {
    const uint64_t c = 12 * static_cast<uint64_t>(n);
    for (int r = 0; r < n; ++r) {
      // Ring allreduce, chunks of k = c/n: a send (2k), n-2 receive-reduce-sends (3k), a receive-reduce-copy
      // that sends its result on (4k), n-2 receive-copy-sends (3k), a receive (2k): k(6n-4).
      EXPECT_EQ(collie::memoryTrafficElems(build(Collective::kAllReduce, "ring", n, r, c)),
                c / n * (6 * static_cast<uint64_t>(n) - 4))
          << "ring allreduce n=" << n << " rank " << r;
      // Ring reduce-scatter of blocks of c: a send (2c), n-2 receive-reduce-sends (3c), a receive-reduce-copy (3c).
      EXPECT_EQ(collie::memoryTrafficElems(build(Collective::kReduceScatter, "ring", n, r, c)),
                c * (3 * static_cast<uint64_t>(n) - 1))
          << "ring reducescatter n=" << n << " rank " << r;
      // Ring allgather of blocks of c: its own block put in place and sent from one read (3c), n-2
      // receive-copy-sends (3c), a receive (2c).
      EXPECT_EQ(collie::memoryTrafficElems(build(Collective::kAllGather, "ring", n, r, c)),
                c * (3 * static_cast<uint64_t>(n) - 1))
          << "ring allgather n=" << n << " rank " << r;
      // Pairwise all-to-all of blocks of c: its own block copied (2c), n-1 exchanges of a block each way (4c).
      EXPECT_EQ(collie::memoryTrafficElems(build(Collective::kAllToAll, "pairwise", n, r, c)),
                c * (2 + 4 * (static_cast<uint64_t>(n) - 1)))
          << "pairwise alltoall n=" << n << " rank " << r;
      // Two-shot allreduce, chunks of k: its own chunk copied (2k, heading the joined exchanges), n-1 joined
      // exchanges that send (2k) and read what they receive once (k), n-1 allgather exchanges (4k): k(7n-5),
      // and 2k more for a second group's head at 9 ranks (a group holds at most kMaxJoinedSteps steps).
      const uint64_t un = static_cast<uint64_t>(n), heads = (un - 1) / collie::kMaxJoinedSteps;
      EXPECT_EQ(collie::memoryTrafficElems(build(Collective::kAllReduce, "twoshot", n, r, c)),
                c / un * (7 * un - 5 + 2 * heads))
          << "twoshot allreduce n=" << n << " rank " << r;
    }
  }
}

// With every send that may be read in place so read (markDirectSends, every peer a thread of this process):
// the closed forms of docs/design.md ("Ranks of one process read large sends in place"). A ring allreduce's
// running sums still go through slots; in place, the causal order lets the ring's first send be read in place.
TEST(MemoryTraffic, SendsReadInPlaceCostTheSenderNothing) {
  auto traffic = [&](const Program& p, bool inPlace, int64_t shift) {
    void* bufs[3];
    collie::placeholderBuffers(inPlace, shift * 4, bufs);
    std::vector<uint8_t> marks;
    const std::vector<bool> everyPeer(static_cast<size_t>(p.nranks), true);
    EXPECT_TRUE(collie::markDirectSends(p, bufs, 4, 0, everyPeer, 0, &marks, true));
    return collie::memoryTrafficElems(p, inPlace, shift, &marks);
  };
  for (int n = 2; n <= 9; ++n) {
    const uint64_t c = 12 * static_cast<uint64_t>(n), un = static_cast<uint64_t>(n);
    for (int r = 0; r < n; ++r) {
      // Ring allreduce, chunks of k = c/n: the send (0), n-2 receive-reduce-sends (3k), the receive-reduce-copy
      // whose result the next rank reads (3k), n-2 receive-copies it reads (2k), a receive (2k): k(5n-5).
      const Program ring = build(Collective::kAllReduce, "ring", n, r, c);
      EXPECT_EQ(traffic(ring, false, 0), c / un * (5 * un - 5)) << "ring allreduce n=" << n << " rank " << r;
      EXPECT_EQ(traffic(ring, true, 0), c / un * (5 * un - 5)) << "in place, n=" << n << " rank " << r;
      // Ring reduce-scatter: the send (0), n-2 receive-reduce-sends (3c), a receive-reduce-copy (3c).
      EXPECT_EQ(traffic(build(Collective::kReduceScatter, "ring", n, r, c), false, 0), c * (3 * un - 3))
          << "ring reducescatter n=" << n << " rank " << r;
      // Ring allgather: its block copied into place (2c, nothing in place), n-2 receive-copies (2c), a receive.
      const Program ag = build(Collective::kAllGather, "ring", n, r, c);
      EXPECT_EQ(traffic(ag, false, 0), c * 2 * un) << "ring allgather n=" << n << " rank " << r;
      EXPECT_EQ(traffic(ag, true, -static_cast<int64_t>(c) * r), c * (2 * un - 2)) << "in place, n=" << n;
      // Pairwise all-to-all: its own block copied (2c), n-1 exchanges that only receive (2c).
      EXPECT_EQ(traffic(build(Collective::kAllToAll, "pairwise", n, r, c), false, 0), c * 2 * un)
          << "pairwise alltoall n=" << n << " rank " << r;
      // Two-shot allreduce, chunks of k: the joined reduce-scatter reads its own chunk and the n-1 received ones
      // once and writes the result once ((n+1)k), the allgather's n-1 exchanges only receive (2k each): k(3n-1).
      // In place too: the causal order shows each rank's allgather writes a chunk only after the rank that
      // reduced it had read it. A group holds at most kMaxJoinedSteps steps: at 9 ranks the eighth exchange
      // heads a second one, reading and writing the chunk again (2k).
      const Program two = build(Collective::kAllReduce, "twoshot", n, r, c);
      const uint64_t heads = (un - 1) / collie::kMaxJoinedSteps;
      EXPECT_EQ(traffic(two, false, 0), c / un * (3 * un - 1 + 2 * heads)) << "twoshot n=" << n << " rank " << r;
      EXPECT_EQ(traffic(two, true, 0), c / un * (3 * un - 1 + 2 * heads)) << "in place, n=" << n << " rank " << r;
    }
  }
}

TEST(MemoryTraffic, InPlaceDropsTheCopiesOntoThemselves) {
  // Recursive doubling on a power of two copies its input to its output first; ring allgather copies its block
  // into place as it sends it (out of place: read, write, the peer's slot written; in place: read, slot).
  const uint64_t c = 40;
  for (int n = 2; n <= 8; ++n) {
    for (int r = 0; r < n; ++r) {
      if ((n & (n - 1)) == 0) {
        const Program rd = build(Collective::kAllReduce, "rd", n, r, c);
        EXPECT_EQ(collie::memoryTrafficElems(rd) - collie::memoryTrafficElems(rd, true, 0), 2 * c) << "n=" << n;
      }
      // In place, a rank's allgather input is its block of the output: the output begins rank x c before it.
      const Program ag = build(Collective::kAllGather, "ring", n, r, c);
      const int64_t shift = -static_cast<int64_t>(c) * r;
      EXPECT_EQ(collie::memoryTrafficElems(ag) - collie::memoryTrafficElems(ag, true, shift), c) << "n=" << n;
    }
  }
}

TEST(MemoryTraffic, EveryAlgorithmCountsNothingOnlyForEmptyCalls) {
  for (const collie::AlgorithmInfo& a : collie::algorithms()) {
    if (a.collective == Collective::kAllToAllv) continue;  // its counts come from the caller's splits
    for (int n = 2; n <= 9; ++n) {
      for (uint64_t c : {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n) + 1, uint64_t{1000}}) {
        uint64_t most = 0;
        for (int r = 0; r < n; ++r) {
          most = std::max(most, collie::memoryTrafficElems(build(a.collective, a.name, n, r, c)));
        }
        // Some rank moves data whenever there is any: every collective here reaches another rank.
        EXPECT_EQ(most == 0, c == 0) << collie::collectiveName(a.collective) << " " << a.name << " n=" << n << " count "
                                     << c;
      }
    }
  }
}

}  // namespace
