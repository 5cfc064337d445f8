// markDirectSends: which sends a peer of this process may read in place. A
// mark on a send whose bytes a later step writes would let the receiver read
// a value the sender has already replaced; a missing mark only costs a copy.
// So every case checks both: what must be marked and what must not.
#include "executor/direct_sends.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "collie.h"
#include "common/rank_threads.h"

namespace collie {
namespace {

ProgramArgs allReduce(int n, int rank, uint64_t count) {
  ProgramArgs a;
  a.collective = Collective::kAllReduce;
  a.nranks = n;
  a.rank = rank;
  a.count = count;
  return a;
}

// A hand-made program of rank `rank` of n.
Program program(int n, int rank, std::vector<Step> steps) {
  Program p;
  p.nranks = n;
  p.rank = rank;
  p.steps = std::move(steps);
  return p;
}

std::vector<uint8_t> marks(const Program& p, void* in, void* out, int divisor = 0, uint64_t minBytes = 0,
                           std::vector<bool> inProcess = {}) {
  if (inProcess.empty()) inProcess.assign(static_cast<size_t>(p.nranks), true);
  static float scratch[1 << 16];
  void* const bufs[3] = {in, out, scratch};
  std::vector<uint8_t> m;
  markDirectSends(p, bufs, sizeof(float), divisor, inProcess, minBytes, &m);
  return m;
}

TEST(DirectSends, RingAllReduceOutOfPlaceReadsEverySendButTheRunningSums) {
  std::vector<float> in(4096), out(4096);
  for (int r = 0; r < 4; ++r) {
    const Program p = buildAllReduceRing(allReduce(4, r, 4096));
    const std::vector<uint8_t> m = marks(p, in.data(), out.data());
    ASSERT_EQ(m.size(), p.steps.size());
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const StepOp op = p.steps[i].op;
      // kRecvReduceSend holds its sum in registers only; the rest hand over the input or what they just wrote,
      // which nothing later in an out-of-place ring writes again.
      const bool want = op == StepOp::kSend || op == StepOp::kRecvReduceCopySend || op == StepOp::kRecvCopySend;
      EXPECT_EQ(m[i] != 0, want) << "rank " << r << " step " << i << " " << stepOpName(op);
    }
  }
}

TEST(DirectSends, InPlaceTheFirstSendIsCopiedBecauseItsChunkIsWrittenLater) {
  std::vector<float> buf(4096);
  const Program p = buildAllReduceRing(allReduce(4, 1, 4096));
  const std::vector<uint8_t> m = marks(p, buf.data(), buf.data());
  ASSERT_EQ(p.steps[0].op, StepOp::kSend);
  EXPECT_EQ(m[0], 0);  // the allgather later writes the final sum of that chunk over it
  size_t forwarding = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (p.steps[i].op == StepOp::kRecvReduceCopySend || p.steps[i].op == StepOp::kRecvCopySend) {
      EXPECT_EQ(m[i], 1) << "step " << i;  // final values: nothing writes them again
      ++forwarding;
    }
  }
  EXPECT_EQ(forwarding, 3u);  // one reduce-scatter step, two allgather steps at 4 ranks
}

// With the causal order, an in-place ring reads every send in place but the running sums: the final sum of the
// chunk a rank sent first reaches it again only through the rank that read that chunk (at 2 ranks directly, at
// more around the ring).
TEST(DirectSends, InPlaceTheCausalOrderReadsTheFirstSendInPlaceToo) {
  for (int n : {2, 3, 4, 5, 8}) {
    std::vector<float> buf(4096);
    for (int r = 0; r < n; ++r) {
      const Program p = buildAllReduceRing(allReduce(n, r, 4096));
      static float scratch[16];
      void* const bufs[3] = {buf.data(), buf.data(), scratch};
      std::vector<uint8_t> m;
      markDirectSends(p, bufs, sizeof(float), 0, std::vector<bool>(static_cast<size_t>(n), true), 0, &m, true);
      ASSERT_EQ(m.size(), p.steps.size());
      for (size_t i = 0; i < p.steps.size(); ++i) {
        const StepOp op = p.steps[i].op;
        const bool want = stepSends(op) && op != StepOp::kRecvReduceSend;
        EXPECT_EQ(m[i] != 0, want) << n << " ranks, rank " << r << " step " << i << " " << stepOpName(op);
      }
    }
  }
}

// Hand-made pairs of programs: rank 0 sends its buffer to rank 1, then receives into it from rank 1.
// Whether rank 1 reads before it sends decides whether rank 0's receive comes after the read.
TEST(DirectSends, ALaterWriteIsOrderedOnlyByAChainFromTheRead) {
  const Range buf{Buffer::kOutput, 0};
  Program zero;
  zero.nranks = 2;
  zero.rank = 0;
  zero.steps = {makeStep(StepOp::kSend, 1, -1, buf, Range{}, 64), makeStep(StepOp::kRecv, -1, 1, Range{}, buf, 64)};
  Program readsFirst = zero, sendsFirst = zero;
  readsFirst.rank = sendsFirst.rank = 1;
  readsFirst.steps = {makeStep(StepOp::kRecv, -1, 0, Range{}, Range{Buffer::kScratch, 0}, 64),
                      makeStep(StepOp::kSend, 0, -1, Range{Buffer::kInput, 0}, Range{}, 64)};
  sendsFirst.steps = {readsFirst.steps[1], readsFirst.steps[0]};
  const ReadOrder ordered = readOrderFrom({zero, readsFirst}, 0), racing = readOrderFrom({zero, sendsFirst}, 0);
  EXPECT_EQ(ordered.stepDone, (std::vector<int>{1, -1}));
  EXPECT_EQ(racing.stepDone, (std::vector<int>{INT_MAX, -1}));
  EXPECT_EQ(ordered.sliceChain, (std::vector<int>{-1, -1})) << "rank 1 does not forward what it reads";
  // Rank 1 sends to rank 0 before reading: it could still be reading while rank 0 writes.
  std::vector<float> in(64), out(64);
  static float scratch[64];
  void* const bufs[3] = {in.data(), out.data(), scratch};
  const std::vector<bool> all{true, true};
  std::vector<uint8_t> m;
  markDirectSends(zero, bufs, sizeof(float), 0, all, 0, &m, false, &ordered);
  EXPECT_EQ(m[0], 1);
  markDirectSends(zero, bufs, sizeof(float), 0, all, 0, &m, false, &racing);
  EXPECT_EQ(m[0], 0);
  markDirectSends(zero, bufs, sizeof(float), 0, all, 0, &m);
  EXPECT_EQ(m[0], 0) << "without the causal order a later write always keeps the send in the slots";
}

// A receiver that forwards slice by slice what it reads (a ring's reduce-and-forward) orders each slice, not
// the end of its step: rank 0 may take back exactly what it sent, slice for slice, but nothing else there.
TEST(DirectSends, AForwardingChainOrdersWhatComesBackSliceBySlice) {
  const Range buf{Buffer::kOutput, 0}, scratch{Buffer::kScratch, 0};
  const int n = 2;
  const Program one =
      program(n, 1, {makeStep(StepOp::kRecvReduceCopySend, 0, 0, Range{Buffer::kInput, 0}, scratch, 64)});
  const Program back = program(
      n, 0, {makeStep(StepOp::kSend, 1, -1, buf, Range{}, 64), makeStep(StepOp::kRecv, -1, 1, Range{}, buf, 64)});
  const ReadOrder o = readOrderFrom({back, one}, 0);
  EXPECT_EQ(o.stepDone[0], INT_MAX) << "rank 1's step is not over when it sends";
  EXPECT_EQ(o.sliceChain[0], 1);
  std::vector<float> in(128), out(128);
  static float scratchBuf[128];
  void* const bufs[3] = {in.data(), out.data(), scratchBuf};
  const std::vector<bool> all{true, true};
  std::vector<uint8_t> m;
  markDirectSends(back, bufs, sizeof(float), 0, all, 0, &m, false, &o);
  EXPECT_EQ(m[0], 1);
  // The same chain, but what comes back lands one element further: its slices no longer line up with the read.
  Program shifted = back;
  shifted.steps[1] = makeStep(StepOp::kRecv, -1, 1, Range{}, Range{Buffer::kOutput, 1}, 64);
  const ReadOrder os = readOrderFrom({shifted, one}, 0);
  EXPECT_EQ(os.sliceChain[0], 1);
  markDirectSends(shifted, bufs, sizeof(float), 0, all, 0, &m, false, &os);
  EXPECT_EQ(m[0], 0);
}

// The chain may pass through other ranks: 0 -> 1 -> 2 -> 0. Rank 1 sends once its read is done, rank 2 passes
// it on; a rank that sends before it reads orders nothing.
TEST(DirectSends, TheCausalOrderFollowsChainsThroughOtherRanks) {
  const Range scratch{Buffer::kScratch, 0}, out{Buffer::kOutput, 0};
  const int n = 3;
  const Program zero = program(
      n, 0, {makeStep(StepOp::kSend, 1, -1, out, Range{}, 64), makeStep(StepOp::kRecv, -1, 2, Range{}, out, 64)});
  const Program readsThenSends = program(n, 1,
                                         {makeStep(StepOp::kRecv, -1, 0, Range{}, scratch, 64),
                                          makeStep(StepOp::kSend, 2, -1, Range{Buffer::kInput, 0}, Range{}, 64)});
  const Program two = program(n, 2, {makeStep(StepOp::kRecvCopySend, 0, 1, Range{}, scratch, 64)});
  EXPECT_EQ(readOrderFrom({zero, readsThenSends, two}, 0).stepDone[0], 1);
  // Forwarding slice by slice all the way round also orders each slice.
  const Program forwards = program(n, 1, {makeStep(StepOp::kRecvCopySend, 2, 0, Range{}, scratch, 64)});
  const ReadOrder f = readOrderFrom({zero, forwards, two}, 0);
  EXPECT_EQ(f.stepDone[0], INT_MAX);
  EXPECT_EQ(f.sliceChain[0], 1);
  // Rank 1 sends to 2 before it reads from 0: nothing orders its read before rank 0's receive.
  const Program sendsBeforeReading = program(n, 1,
                                             {makeStep(StepOp::kSend, 2, -1, Range{Buffer::kInput, 0}, Range{}, 64),
                                              makeStep(StepOp::kRecv, -1, 0, Range{}, scratch, 64)});
  const ReadOrder s = readOrderFrom({zero, sendsBeforeReading, two}, 0);
  EXPECT_EQ(s.stepDone[0], INT_MAX);
  EXPECT_EQ(s.sliceChain[0], -1);
  // Programs whose sends and receives do not pair up are not ordered at all.
  EXPECT_TRUE(readOrderFrom({zero, readsThenSends}, 0).stepDone.empty());
}

// A group of joined steps (program.h) runs as one step: its later steps send while its earlier ones still read.
// Rank 1 reduces what rank 0 and rank 2 send into one range; rank 2 sends to rank 0 once it has what rank 1 sent
// it. Run one after another, rank 1's step with rank 2 begins after it read rank 0's send, so rank 0 may write
// its buffer once rank 2's data is in; joined, rank 1 sends to rank 2 while it reads, and nothing orders it.
TEST(DirectSends, TheStepsOfAJoinedGroupStartTogether) {
  const Range buf{Buffer::kOutput, 0}, out{Buffer::kOutput, 0}, scratch{Buffer::kScratch, 0};
  const int n = 3;
  const Program zero = program(
      n, 0,
      {exchangeStep(StepOp::kSendRecv, 1, 1, buf, 64, scratch, 64), makeStep(StepOp::kRecv, -1, 2, Range{}, buf, 64)});
  Program one = program(n, 1,
                        {makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, 0}, out, 64),
                         exchangeStep(StepOp::kSendRecvReduce, 0, 0, Range{Buffer::kInput, 64}, 64, out, 64),
                         exchangeStep(StepOp::kSendRecvReduce, 2, 2, Range{Buffer::kInput, 128}, 64, out, 64)});
  const Program two = program(n, 2,
                              {exchangeStep(StepOp::kSendRecv, 1, 1, Range{Buffer::kInput, 0}, 64, scratch, 64),
                               makeStep(StepOp::kSend, 0, -1, Range{Buffer::kInput, 0}, Range{}, 64)});
  EXPECT_EQ(readOrderFrom({zero, one, two}, 0).stepDone[0], 1);
  one.steps[1].joined = one.steps[2].joined = true;
  EXPECT_EQ(readOrderFrom({zero, one, two}, 0).stepDone[0], INT_MAX);
}

// An exchange group (program.h, exchangeGroupEnd) may run as a batch, every send before any receive: rank 1's
// exchange with rank 2 may send while its exchange with rank 0 still reads. With a copy between them they are two
// groups, and rank 1 sends to rank 2 only once it has read rank 0's send, which orders rank 0's later write.
TEST(DirectSends, TheStepsOfAnExchangeGroupStartTogether) {
  const Range buf{Buffer::kOutput, 0}, scratch{Buffer::kScratch, 0};
  const int n = 3;
  const Program zero = program(
      n, 0,
      {exchangeStep(StepOp::kSendRecv, 1, 1, buf, 64, scratch, 64), makeStep(StepOp::kRecv, -1, 2, Range{}, buf, 64)});
  const Step withZero = exchangeStep(StepOp::kSendRecv, 0, 0, Range{Buffer::kInput, 0}, 64, scratch, 64);
  const Step withTwo =
      exchangeStep(StepOp::kSendRecv, 2, 2, Range{Buffer::kInput, 64}, 64, Range{Buffer::kScratch, 64}, 64);
  const Step copy = makeStep(StepOp::kCopy, -1, -1, scratch, Range{Buffer::kOutput, 0}, 64);
  const Program two = program(n, 2,
                              {exchangeStep(StepOp::kSendRecv, 1, 1, Range{Buffer::kInput, 0}, 64, scratch, 64),
                               makeStep(StepOp::kSend, 0, -1, Range{Buffer::kInput, 0}, Range{}, 64)});
  EXPECT_EQ(readOrderFrom({zero, program(n, 1, {withZero, copy, withTwo}), two}, 0).stepDone[0], 1);
  EXPECT_EQ(readOrderFrom({zero, program(n, 1, {withZero, withTwo}), two}, 0).stepDone[0], INT_MAX);
}

// In place, a one-shot allreduce copies the sum over its input after its exchanges. Its peers' exchanges form
// one group, so none of their posts shows that they have read this rank's input: no send of it is ordered
// before that copy, and none may be read in place.
TEST(DirectSends, AnInPlaceOneShotsSendsAreNeverOrderedBeforeItsCopy) {
  for (int n : {3, 4, 5}) {
    std::vector<Program> all;
    for (int r = 0; r < n; ++r) all.push_back(buildAllReduceOneShot(allReduce(n, r, 64)));
    for (int r = 0; r < n; ++r) {
      const ReadOrder o = readOrderFrom(all, r);
      ASSERT_EQ(o.stepDone.size(), all[static_cast<size_t>(r)].steps.size());
      for (size_t i = 0; i < o.stepDone.size(); ++i) {
        if (all[static_cast<size_t>(r)].steps[i].sent() > 0) {
          EXPECT_EQ(o.stepDone[i], INT_MAX) << "n " << n << " rank " << r << " step " << i;
        }
      }
    }
  }
}

TEST(DirectSends, EveryRanksProgramIsRebuiltOnlyWhereItCanBe) {
  std::vector<Program> all;
  const Program ring = buildAllReduceRing(allReduce(4, 2, 4096));
  ASSERT_TRUE(everyRanksProgram(ring, &all));
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[1].rank, 1);
  EXPECT_EQ(all[2].steps.size(), ring.steps.size());
  Program changed = ring;
  changed.steps.pop_back();
  EXPECT_FALSE(everyRanksProgram(changed, &all)) << "not what the registry builds";
  ProgramArgs a = allReduce(4, 1, 4096);
  a.ranksPerNode = 2;
  EXPECT_FALSE(everyRanksProgram(buildAllReduceHier(a), &all)) << "the node size is not in a Program";
}

TEST(DirectSends, PeersOutsideTheProcessAndSmallSendsAreNeverRead) {
  std::vector<float> in(4096), out(4096);
  const Program p = buildAllReduceRing(allReduce(3, 0, 4096));
  for (uint8_t v : marks(p, in.data(), out.data(), 0, 0, {true, false, false})) EXPECT_EQ(v, 0);
  // Each step sends a third of 16 KiB.
  for (uint8_t v : marks(p, in.data(), out.data(), 0, 8192)) EXPECT_EQ(v, 0);
  bool any = false;
  for (uint8_t v : marks(p, in.data(), out.data(), 0, 4096)) any = any || v != 0;
  EXPECT_TRUE(any);
}

TEST(DirectSends, AForwardedReceiveThatDividesIsCopied) {
  // What a dividing kRecvCopySend writes (the mean) is not what it forwards (the sum it received).
  Program p;
  p.nranks = 3;
  p.steps.push_back(makeStep(StepOp::kRecvCopySend, 2, 0, Range{}, Range{Buffer::kOutput, 0}, 64, true));
  std::vector<float> in(64), out(64);
  EXPECT_EQ(marks(p, in.data(), out.data(), 3)[0], 0);
  EXPECT_EQ(marks(p, in.data(), out.data(), 0)[0], 1);
  // A dividing kRecvReduceCopySend sends what it writes, divided: read in place.
  p.steps[0] =
      makeStep(StepOp::kRecvReduceCopySend, 2, 0, Range{Buffer::kInput, 0}, Range{Buffer::kOutput, 0}, 64, true);
  EXPECT_EQ(marks(p, in.data(), out.data(), 3)[0], 1);
}

TEST(DirectSends, ScratchAndOverwrittenRangesAreCopied) {
  Program p;
  p.nranks = 2;
  std::vector<float> in(128), out(128);
  p.steps.push_back(makeStep(StepOp::kSend, 1, -1, Range{Buffer::kScratch, 0}, Range{}, 64));
  p.steps.push_back(makeStep(StepOp::kSend, 1, -1, Range{Buffer::kOutput, 0}, Range{}, 64));
  p.steps.push_back(makeStep(StepOp::kSend, 1, -1, Range{Buffer::kOutput, 64}, Range{}, 64));
  // A later receive overlaps the second send's last element only, and not the third.
  p.steps.push_back(makeStep(StepOp::kRecv, -1, 1, Range{}, Range{Buffer::kOutput, 63}, 1));
  const std::vector<uint8_t> m = marks(p, in.data(), out.data());
  EXPECT_EQ(m[0], 0);
  EXPECT_EQ(m[1], 0);
  EXPECT_EQ(m[2], 1);
  // An exchange that receives over what it sends must copy; into another range it need not.
  Program x;
  x.nranks = 2;
  x.steps.push_back(
      exchangeStep(StepOp::kSendRecv, 1, 1, Range{Buffer::kOutput, 0}, 64, Range{Buffer::kOutput, 32}, 64));
  x.steps.push_back(
      exchangeStep(StepOp::kSendRecv, 1, 1, Range{Buffer::kInput, 0}, 64, Range{Buffer::kOutput, 64}, 64));
  const std::vector<uint8_t> mx = marks(x, in.data(), out.data());
  EXPECT_EQ(mx[0], 0);
  EXPECT_EQ(mx[1], 1);
}

TEST(DirectSends, AllToAllOutOfPlaceReadsEveryExchangeInPlace) {
  ProgramArgs a;
  a.collective = Collective::kAllToAll;
  a.nranks = 5;
  a.rank = 2;
  a.count = 100;
  const Program p = buildAllToAllPairwise(a);
  std::vector<float> in(500), out(500);
  const std::vector<uint8_t> m = marks(p, in.data(), out.data());
  size_t exchanges = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!stepIsExchange(p.steps[i].op)) continue;
    EXPECT_EQ(m[i], 1) << "step " << i;
    ++exchanges;
  }
  EXPECT_EQ(exchanges, 4u);
}

// A peer reads what a rank hands over in place until it credits it: the rank must not return before then, or
// the caller's next writes (here at once, from the same thread) would change what the peer is still reading.
// Every rank reads in place here; the results would be wrong, and ThreadSanitizer would report the race
// (scripts/sanitize.sh), if a call returned early.
TEST(DirectSends, ACallReturnsOnlyOnceItsPeersHaveReadItsBuffers) {
  test::ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", "0");
  test::ScopedEnv ring("COLLIE_ALGO", "allreduce:ring,allgather:ring");
  const int n = 3;
  const size_t count = 3 * 20000 + 1;
  test::Comms c(n);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::string> errors(n);
  test::onRanks(n, [&](int r) {
    std::vector<float> in(count), out(count), all(count * n);
    for (int iter = 0; iter < 20 && errors[static_cast<size_t>(r)].empty(); ++iter) {
      for (size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * (iter + 1)) + static_cast<float>(i % 7);
      if (collieAllReduce(in.data(), out.data(), count, collieFloat32, collieSum, c[r], nullptr) != collieSuccess ||
          collieAllGather(in.data(), all.data(), count, collieFloat32, c[r], nullptr) != collieSuccess) {
        errors[static_cast<size_t>(r)] = collieGetLastError(c[r]);
        break;
      }
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(6 * (iter + 1)) + 3.0f * static_cast<float>(i % 7);
        if (out[i] != want) {
          errors[static_cast<size_t>(r)] = "allreduce, call " + std::to_string(iter) + ", element " +
                                           std::to_string(i) + ": " + std::to_string(out[i]) +
                                           " != " + std::to_string(want);
          break;
        }
        for (int q = 0; q < n && errors[static_cast<size_t>(r)].empty(); ++q) {
          const float from = static_cast<float>((q + 1) * (iter + 1)) + static_cast<float>(i % 7);
          if (all[static_cast<size_t>(q) * count + i] != from)
            errors[static_cast<size_t>(r)] = "allgather, call " + std::to_string(iter) + ", rank " + std::to_string(q) +
                                             "'s element " + std::to_string(i);
        }
      }
      // At once, while a slower peer could still be reading them if the calls had returned early.
      std::fill(in.begin(), in.end(), -1.0f);
      std::fill(out.begin(), out.end(), -1.0f);
      std::fill(all.begin(), all.end(), -1.0f);
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

}  // namespace
}  // namespace collie
