// The shared step runner (executor/step_runner.h) on scripted primitives: one
// rank's program runs against peers that are rules, not threads, so a test can
// say exactly when a peer's slice arrives and see the order in which the runner
// posts, waits and takes. Which exchanges run together (exchangeBatchEnd), and
// that a batch sends everything before it waits for anything.
#include "executor/step_runner.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collie.h"
#include "common/programs.h"

namespace {

using collie::Buffer;
using collie::Range;
using collie::Step;
using collie::StepOp;

// One rank's primitives. Room is always there; a peer's next slice has arrived when `arrives(peer)` says so,
// and then holds `peerValue(peer)` in every element. A wait that the script cannot satisfy fails at once with
// collieTimeout: nothing else would ever change, so the real runner would wait forever there.
struct ScriptedPrims {
  static constexpr bool kReadsInPlace = false;
  static constexpr bool kJoinsReceives = false;

  ScriptedPrims(int nranks, uint64_t perSlice) : in(nranks, std::vector<float>(perSlice)), out(nranks), posted(nranks) {
    for (auto& slot : out) slot.resize(perSlice);
  }

  bool room(int) const { return true; }
  bool arrived(int p, uint64_t) {
    ++polls;
    return arrives(p);
  }
  int waitArrived(int p, uint64_t) {
    events.push_back("wait " + std::to_string(p));
    return arrives(p) ? 0 : collieTimeout;
  }
  int waitRoom(int) const { return 0; }
  int waitEither(bool sending, int q, bool receiving, int p) {
    events.push_back("either " + std::to_string(receiving ? p : q));
    return (sending && room(q)) || (receiving && arrives(p)) ? 0 : collieTimeout;
  }
  const float* inSlot(int p) {
    for (float& v : in[static_cast<size_t>(p)]) v = peerValue(p);
    return in[static_cast<size_t>(p)].data();
  }
  float* outSlot(int q) { return out[static_cast<size_t>(q)].data(); }
  void release(int p) { events.push_back("take " + std::to_string(p)); }
  void post(int q, uint64_t) {
    ++posted[static_cast<size_t>(q)];
    events.push_back("post " + std::to_string(q));
  }
  void copy(float* dst, const float* src, uint64_t n, int) { std::memmove(dst, src, n * sizeof(float)); }
  void reduce(float* dst, const float* a, const float* b, uint64_t n, int) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
  }
  void copy2(float* d1, float* d2, const float* src, uint64_t n, int) {
    copy(d1, src, n, 0);
    copy(d2, src, n, 0);
  }
  void reduce2(float* d1, float* d2, const float* a, const float* b, uint64_t n, int) {
    reduce(d1, a, b, n, 0);
    if (d2 != d1) copy(d2, d1, n, 0);
  }
  void localDone() {}
  void stepDone(int) {}

  int totalPosted() const {
    int k = 0;
    for (int c : posted) k += c;
    return k;
  }

  std::function<bool(int)> arrives = [](int) { return true; };
  std::function<float(int)> peerValue = [](int p) { return static_cast<float>(10 * (p + 1)); };
  std::vector<std::vector<float>> in, out;
  std::vector<int> posted;
  std::vector<std::string> events;
  int polls = 0;
};

// Runs rank `rank`'s program of a one-shot allreduce of `count` floats on `n` ranks, one channel.
collie::StepFailure runOneShot(ScriptedPrims& p, int n, int rank, uint64_t count, uint64_t perSlice,
                               std::vector<float>* output) {
  const std::vector<collie::Program> programs =
      collie::test::buildPrograms(collie::Collective::kAllReduce, "oneshot", n, count);
  const collie::Program& prog = programs[static_cast<size_t>(rank)];
  std::vector<float> input(count, 1.0f), scratch(prog.scratchCount);
  output->assign(count, -1.0f);
  float* bufs[3] = {input.data(), output->data(), scratch.data()};
  return collie::runSteps<float>(p, prog.steps.data(), static_cast<int>(prog.steps.size()), bufs, perSlice, 0, 0, 1, 1);
}

// The batch begins at the first exchange; the index of a one-shot program's first step that exchanges.
int firstExchange(const collie::Program& p) {
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (collie::stepIsExchange(p.steps[i].op)) return static_cast<int>(i);
  return -1;
}

// A one-shot allreduce whose peers each send only once this rank has sent to all of them (as peers do that
// post all their sends before they take anything): one after another, the first exchange would wait for its
// receive before the second sends, and never finish. As a batch, every send goes out first.
TEST(StepRunner, AOneShotsSmallExchangesSendEverythingBeforeTheyWait) {
  for (int n : {3, 4, 8}) {
    for (int rank : {0, 1, n - 1}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " rank=" + std::to_string(rank));
      ScriptedPrims p(n, 4);
      p.arrives = [&](int) { return p.totalPosted() == n - 1; };
      std::vector<float> out;
      const collie::StepFailure f = runOneShot(p, n, rank, 4, 4, &out);
      ASSERT_EQ(f.code, 0) << "failed at step " << f.step << " on peer " << f.peer;
      // Every post before the first take.
      size_t firstTake = p.events.size(), lastPost = 0;
      for (size_t i = 0; i < p.events.size(); ++i) {
        if (p.events[i].rfind("take", 0) == 0 && firstTake == p.events.size()) firstTake = i;
        if (p.events[i].rfind("post", 0) == 0) lastPost = i;
      }
      EXPECT_LT(lastPost, firstTake);
      // Nothing left to send, so each receive waited once for its slice and was never polled.
      EXPECT_EQ(p.polls, 0);
      // The sum in rank order: this rank's input is 1, peer j's slice 10 (j + 1).
      float expected = 0;
      for (int j = 0; j < n; ++j) expected += j == rank ? 1.0f : static_cast<float>(10 * (j + 1));
      for (float v : out) EXPECT_EQ(v, expected);
    }
  }
}

// Split into two slices each, the same exchanges keep their turns (a large call runs step by step), so the
// script above cannot be satisfied: the first receive fails, named by its step and peer.
TEST(StepRunner, ExchangesOfMoreThanASliceRunOneAfterAnother) {
  const int n = 4, rank = 1;
  ScriptedPrims p(n, 2);
  p.arrives = [&](int) { return p.totalPosted() >= 2 * (n - 1); };
  std::vector<float> out;
  const collie::StepFailure f = runOneShot(p, n, rank, 4, 2, &out);
  const collie::Program prog = collie::test::buildPrograms(collie::Collective::kAllReduce, "oneshot", n, 4)[1];
  EXPECT_EQ(f.code, collieTimeout);
  EXPECT_EQ(f.step, firstExchange(prog));
  EXPECT_EQ(f.peer, prog.steps[static_cast<size_t>(firstExchange(prog))].recvPeer);
  EXPECT_EQ(p.totalPosted(), 2);  // the first exchange's two slices, nothing of the next
}

// Peers that answer at once: a batch and single exchanges give the same output.
TEST(StepRunner, AOneShotGivesTheSameSumInOneBatchOrStepByStep) {
  for (uint64_t perSlice : {uint64_t{1}, uint64_t{3}, uint64_t{5}}) {
    ScriptedPrims p(5, perSlice);
    std::vector<float> out;
    ASSERT_EQ(runOneShot(p, 5, 2, 5, perSlice, &out).code, 0) << perSlice;
    for (float v : out) EXPECT_EQ(v, 10.0f + 20.0f + 1.0f + 40.0f + 50.0f) << perSlice;
  }
}

Step exchange(int to, int from, Range src, uint64_t count, Range dst, uint64_t recvCount) {
  Step s;
  s.op = StepOp::kSendRecv;
  s.sendPeer = to;
  s.recvPeer = from;
  s.src = src;
  s.dst = dst;
  s.count = count;
  s.recvCount = recvCount;
  return s;
}

// The batch the runner would run from `head`, in the exchange group that begins there.
int batchEnd(const std::vector<Step>& steps, float* const* bufs, uint64_t perSlice = 4, int head = 0) {
  const int group = collie::exchangeGroupEnd(steps.data(), static_cast<int>(steps.size()), head);
  return collie::exchangeBatchEnd<float>(steps.data(), group, head, bufs, perSlice, 0, 1, 1);
}

TEST(StepRunner, OnlyExchangesThatCannotTouchEachOthersDataRunTogether) {
  std::vector<float> in(64), out(64), scratch(64);
  float* apart[3] = {in.data(), out.data(), scratch.data()};
  float* inPlace[3] = {in.data(), in.data(), scratch.data()};
  const Range in0{Buffer::kInput, 0}, in4{Buffer::kInput, 4}, out0{Buffer::kOutput, 0}, out4{Buffer::kOutput, 4},
      out8{Buffer::kOutput, 8}, tmp0{Buffer::kScratch, 0}, tmp4{Buffer::kScratch, 4};

  // Distinct peers, distinct places: together, in place or not.
  std::vector<Step> s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(2, 2, in0, 4, tmp4, 4)};
  EXPECT_EQ(batchEnd(s, apart), 2);
  EXPECT_EQ(batchEnd(s, inPlace), 2);
  // The same peer to send to, or to receive from: one after another.
  s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(1, 2, in0, 4, tmp4, 4)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(2, 3, in0, 4, tmp4, 4)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  // The second receives into what the first sends, or sends what the first receives, or both receive into
  // one place.
  s = {exchange(1, 3, out0, 4, tmp0, 4), exchange(2, 2, in0, 4, out0, 4)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(2, 2, tmp0, 4, out0, 4)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  s = {exchange(1, 3, in0, 4, out0, 4), exchange(2, 2, in4, 4, out0, 4)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  // Ranges that only touch do not overlap; one element more does.
  s = {exchange(1, 3, in0, 4, out4, 4), exchange(2, 2, in4, 4, out8, 4)};
  EXPECT_EQ(batchEnd(s, apart), 2);
  EXPECT_EQ(batchEnd(s, inPlace), 1);  // the output is the input: the first receives into what the second sends
  s = {exchange(1, 3, in0, 4, out0, 5), exchange(2, 2, in4, 4, out4, 4)};
  EXPECT_EQ(batchEnd(s, apart, 8), 1);
  // More than one slice on either side, a reducing exchange at the head, or a joined step: alone.
  s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(2, 2, in0, 4, tmp4, 4)};
  EXPECT_EQ(batchEnd(s, apart, 3), 1);
  s[1].recvCount = 5;
  EXPECT_EQ(batchEnd(s, apart, 4), 1);
  s = {exchange(1, 3, in0, 4, tmp0, 4), exchange(2, 2, in0, 4, tmp4, 4)};
  s[0].op = StepOp::kSendRecvReduce;
  EXPECT_EQ(batchEnd(s, apart), 1);
  s[0].op = StepOp::kSendRecv;
  s[1].op = StepOp::kSendRecvReduce;
  s[1].joined = true;
  EXPECT_EQ(batchEnd(s, apart), 1);
  // A copy between exchanges ends the batch; a batch never passes kMaxBatchedExchanges.
  s = {exchange(1, 7, in0, 1, tmp0, 1), Step{}, exchange(2, 6, in0, 1, tmp4, 1)};
  EXPECT_EQ(batchEnd(s, apart), 1);
  s.clear();
  for (int k = 0; k < 12; ++k)
    s.push_back(exchange(k + 1, 12 - k, in0, 1, Range{Buffer::kScratch, static_cast<uint64_t>(k)}, 1));
  EXPECT_EQ(batchEnd(s, apart), collie::kMaxBatchedExchanges);
  EXPECT_EQ(batchEnd(s, apart, 4, collie::kMaxBatchedExchanges), 12);
}

// The collectives whose small calls gain: a one-shot allreduce and a pairwise all-to-all run all their
// exchanges as one batch out of place; a recursive-doubling allreduce, whose exchanges each send what the one
// before received, runs none together.
TEST(StepRunner, WhichProgramsBatch) {
  const int n = 5;
  const uint64_t count = 4;
  std::vector<float> in(4 * n * count), out(4 * n * count), scratch(4 * n * count);
  float* bufs[3] = {in.data(), out.data(), scratch.data()};
  auto longest = [&](const collie::Program& p) {
    int best = 0;
    for (int i = 0; i < static_cast<int>(p.steps.size()); ++i)
      best = std::max(best, batchEnd(p.steps, bufs, 64, i) - i);
    return best;
  };
  for (const collie::Program& p : collie::test::buildPrograms(collie::Collective::kAllReduce, "oneshot", n, count))
    EXPECT_EQ(longest(p), n - 1) << "rank " << p.rank;
  for (const collie::Program& p : collie::test::buildPrograms(collie::Collective::kAllToAll, "pairwise", n, count))
    EXPECT_EQ(longest(p), n - 1) << "rank " << p.rank;
  for (const collie::Program& p : collie::test::buildPrograms(collie::Collective::kAllReduce, "rd", n, count))
    EXPECT_EQ(longest(p), 1) << "rank " << p.rank;
}

}  // namespace
