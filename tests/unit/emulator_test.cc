// The CPU emulation of the CUDA kernels (COLLIE_TEST_EMULATE_KERNELS, kernels/emulator.h)
// and the launch planning it shares with the CUDA executor (executor/launch_plan.h).
// Its exactness over every algorithm and collective is checked by the *_emulated
// ctest entries, which run the usual suites in this mode; here: what a launch
// carries, and how failures inside an emulated kernel reach the caller (a
// missing rank, an LL slice cut short).
#include "kernels/emulator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "core/comm.h"
#include "executor/emulated_executor.h"
#include "executor/launch_plan.h"
#include "executor/protocol.h"
#include "transport/shm/shm_window.h"

namespace {

using collie::test::ScopedEnv;

// Records what planLaunch asks to keep outside the launch parameters.
class RecordingStorage : public collie::LaunchStorage {
 public:
  collie::Status program(const collie::Program& p, const collie::Step** out) override {
    uploaded.push_back(&p);
    *out = p.steps.data();
    return collie::Status();
  }
  collie::Status scratch(size_t bytes, void** out) override {
    scratchBytes = bytes;
    buffer.resize(bytes);
    *out = buffer.data();
    return collie::Status();
  }
  std::vector<const collie::Program*> uploaded;
  size_t scratchBytes = 0;
  std::vector<char> buffer;
};

collie::Program programOf(int steps, uint64_t scratchCount) {
  collie::Program p;
  p.steps.resize(static_cast<size_t>(steps));
  for (int i = 0; i < steps; ++i) p.steps[static_cast<size_t>(i)].count = static_cast<uint64_t>(i + 1);
  p.scratchCount = scratchCount;
  return p;
}

collie::LaunchTables tablesOf(uint32_t channels) {
  collie::LaunchTables t;
  t.rank = 1;
  t.layout.nranks = 3;
  t.layout.nchannels = channels;
  t.layout.llSlotBytes = 4096;
  t.timeoutSec = 2.5;
  return t;
}

TEST(LaunchPlan, ProgramsTravelInlineWhileTheyFitTheRestAreStored) {
  const collie::Program shortOne = programOf(3, 0), longOne = programOf(collie::kInlineSteps, 100);
  // Channels 0 and 2 run the long program, 1 the short one: two distinct programs.
  const std::vector<collie::ChannelWork> work = {{&longOne, 0}, {&shortOne, 64}, {&longOne, 128}};
  collie::ExecArgs args;
  args.type = collieFloat32;
  args.seq = 7;
  args.lowLatency = true;
  RecordingStorage storage;
  collie::KernelArgs a;
  bool empty = true;
  ASSERT_TRUE(collie::planLaunch(work, args, tablesOf(4), &storage, &a, &empty).ok());
  EXPECT_FALSE(empty);
  // The first program met (40 steps) fills the inline space; the short one no longer fits and is stored.
  const int last = collie::kLastRound;
  EXPECT_EQ(a.channelProgram[last][0], 0);
  EXPECT_EQ(a.channelProgram[last][1], 1);
  EXPECT_EQ(a.channelProgram[last][2], 0);
  EXPECT_EQ(a.channelProgram[last][3], -1) << "a channel without work must not run";
  EXPECT_EQ(a.channelOffset[last][1], 64u);
  EXPECT_EQ(a.channelOffset[last][2], 128u);
  EXPECT_EQ(a.rounds, 1u);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(a.channelProgram[collie::kFullRound][c], -1) << "one round: the last";
  EXPECT_EQ(a.nsteps[0], collie::kInlineSteps);
  EXPECT_EQ(a.nsteps[1], 3);
  EXPECT_EQ(a.steps[0], nullptr);
  EXPECT_EQ(a.inlineAt[0], 0);
  ASSERT_EQ(storage.uploaded.size(), 1u);
  EXPECT_EQ(storage.uploaded[0], &shortOne);
  EXPECT_EQ(a.steps[1], shortOne.steps.data());
  // Scratch: the larger program's count, per channel, 256-byte aligned.
  EXPECT_EQ(a.scratchPerChannel, 512u);
  EXPECT_EQ(storage.scratchBytes, 4u * 512u);
  EXPECT_EQ(a.lowLatency, 1);
  EXPECT_EQ(a.seq, 7u);
  EXPECT_EQ(a.rank, 1);
  EXPECT_EQ(a.timeoutNs, 2500000000u);
}

TEST(LaunchPlan, SplitStepsRunOneProgramOnEveryChannelAndAProxyTurnsLLOff) {
  const collie::Program p = programOf(2, 0);
  collie::ExecArgs args;
  args.splitSteps = true;
  args.lowLatency = true;
  collie::LaunchTables t = tablesOf(3);
  const uint32_t lost[3] = {0, 0, 0};
  t.lost = lost;
  RecordingStorage storage;
  collie::KernelArgs a;
  bool empty = true;
  ASSERT_TRUE(collie::planLaunch({{&p, 0}}, args, t, &storage, &a, &empty).ok());
  EXPECT_EQ(a.splitSteps, 1);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(a.channelProgram[collie::kLastRound][c], 0) << "channel " << c;
  EXPECT_EQ(a.lowLatency, 0) << "an LL slice has no byte count the proxy could forward";
  EXPECT_EQ(a.bufs[2], nullptr);
}

// A call in rounds is one launch: both kinds of round, their programs shared where they are the same.
// Flags go at GPU scope to the peers that are threads of this process on this GPU, and to this rank itself;
// at system scope to every other peer, and to all with COLLIE_DEV_SYSTEM_SCOPE=1.
TEST(LaunchPlan, FlagsToRanksOfThisGpuAreAtGpuScope) {
  const collie::Program p = programOf(2, 0);
  collie::ExecArgs args;
  collie::LaunchTables t = tablesOf(1);
  t.layout.nranks = 4;
  collie::setInPlacePeers(&t, {true, false, false, true}, -1);  // rank 0 and 3 share our GPU; none read in place
  RecordingStorage storage;
  collie::KernelArgs a;
  bool empty = true;
  ASSERT_TRUE(collie::planLaunch({{&p, 0}}, args, t, &storage, &a, &empty).ok());
  EXPECT_EQ(a.gpuScopePeers, 0b1011u) << "ranks 0 and 3, and this rank (1)";
  EXPECT_EQ(a.readsInPlace, 0u);
  t.systemScope = true;
  collie::KernelArgs sys;
  ASSERT_TRUE(collie::planLaunch({{&p, 0}}, args, t, &storage, &sys, &empty).ok());
  EXPECT_EQ(sys.gpuScopePeers, 0u);
}

TEST(LaunchPlan, EveryRoundOfACallTravelsInOneLaunch) {
  const collie::Program fullPart = programOf(4, 8), fullRest = programOf(3, 0), lastPart = programOf(5, 0);
  collie::RoundPlan plan;
  plan.rounds = 7;
  plan.stride = 1000;
  plan.full = {{&fullPart, 0}, {&fullPart, 400}, {&fullRest, 800}};
  plan.last = {{&lastPart, 0}, {&fullPart, 96}};  // a last round on fewer channels
  collie::ExecArgs args;
  args.type = collieFloat64;
  RecordingStorage storage;
  collie::KernelArgs a;
  bool empty = true;
  ASSERT_TRUE(collie::planLaunch(plan, args, tablesOf(4), &storage, &a, &empty).ok());
  EXPECT_FALSE(empty);
  EXPECT_EQ(a.rounds, 7u);
  EXPECT_EQ(a.roundStride, 1000u);
  const int full = collie::kFullRound, last = collie::kLastRound;
  EXPECT_EQ(a.channelProgram[full][0], 0);
  EXPECT_EQ(a.channelProgram[full][1], 0);
  EXPECT_EQ(a.channelProgram[full][2], 1);
  EXPECT_EQ(a.channelProgram[full][3], -1);
  EXPECT_EQ(a.channelOffset[full][2], 800u);
  EXPECT_EQ(a.channelProgram[last][0], 2);
  EXPECT_EQ(a.channelProgram[last][1], 0) << "a program both kinds run travels once";
  EXPECT_EQ(a.channelProgram[last][2], -1);
  EXPECT_EQ(a.channelOffset[last][1], 96u);
  EXPECT_EQ(a.nsteps[0], 4);
  EXPECT_EQ(a.nsteps[1], 3);
  EXPECT_EQ(a.nsteps[2], 5);
  EXPECT_TRUE(storage.uploaded.empty()) << "12 steps fit inline";
  EXPECT_EQ(a.inlineAt[2], 7);
  EXPECT_EQ(a.scratchPerChannel, 256u);  // 8 doubles, 256-byte aligned
  // One round: the full kind is not looked at.
  plan.rounds = 1;
  ASSERT_TRUE(collie::planLaunch(plan, args, tablesOf(4), &storage, &a, &empty).ok());
  EXPECT_EQ(a.channelProgram[full][0], -1);
  EXPECT_EQ(a.roundStride, 0u);
  // A split program (all-to-all-v) never runs in rounds.
  plan.rounds = 2;
  args.splitSteps = true;
  EXPECT_FALSE(collie::planLaunch(plan, args, tablesOf(4), &storage, &a, &empty).ok());
}

TEST(LaunchPlan, NothingToRunAndTooManyChannels) {
  const collie::Program none = programOf(0, 0), p = programOf(1, 0);
  collie::ExecArgs args;
  RecordingStorage storage;
  collie::KernelArgs a;
  bool empty = false;
  ASSERT_TRUE(collie::planLaunch({{&none, 0}}, args, tablesOf(2), &storage, &a, &empty).ok());
  EXPECT_TRUE(empty);
  const collie::Status st = collie::planLaunch({{&p, 0}, {&p, 1}, {&p, 2}}, args, tablesOf(2), &storage, &a, &empty);
  EXPECT_FALSE(st.ok());
}

TEST(Emulator, ABadSettingIsRefusedAtInit) {
  collieComm_t comm = nullptr;
  auto refusedSaying = [&](const char* want) {
    EXPECT_EQ(collieCommInitAll(&comm, 1, nullptr), collieInvalidArgument);
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find(want), std::string::npos) << collieGetLastError(nullptr);
  };
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "many");
  refusedSaying("COLLIE_TEST_EMULATE_KERNELS must be 0..64");
  ScopedEnv two("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv timing("COLLIE_KERNEL_TIMING", "yes");
  refusedSaying("COLLIE_KERNEL_TIMING must be 0 or 1, not \"yes\"");
  ScopedEnv untimed("COLLIE_KERNEL_TIMING", "0");
  ScopedEnv fence("COLLIE_DEV_SYSTEM_FENCE", "2");
  refusedSaying("COLLIE_DEV_SYSTEM_FENCE must be 0 or 1, not \"2\"");
  ScopedEnv noFence("COLLIE_DEV_SYSTEM_FENCE", "0");
  ScopedEnv scope("COLLIE_DEV_SYSTEM_SCOPE", "on");
  refusedSaying("COLLIE_DEV_SYSTEM_SCOPE must be 0 or 1, not \"on\"");
  ScopedEnv globalScope("COLLIE_DEV_SYSTEM_SCOPE", "0");
  ScopedEnv posts("COLLIE_DEV_LL_SEPARATE_POSTS", "2");
  refusedSaying("COLLIE_DEV_LL_SEPARATE_POSTS must be 0 or 1, not \"2\"");
}

// What `counter` (one of the emulation's counts) grows by in one allreduce of `count` floats (the algorithm and
// protocol the caller's settings pick) on `n` ranks as threads, with `variable` set to `setting`.
uint64_t countedInOneAllReduce(int n, uint64_t (*counter)(), const char* variable, const char* setting,
                               size_t count = 3000) {
  ScopedEnv set(variable, setting);
  collie::test::Comms c(n);
  EXPECT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  const uint64_t before = counter();
  collie::test::onRanks(n, [&](int r) {
    std::vector<float> mine(count, 1.0f);
    EXPECT_EQ(collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum, c[r], nullptr),
              collieSuccess);
    for (float v : mine) EXPECT_EQ(v, static_cast<float>(n));
  });
  return counter() - before;
}

// A batch's LL slices go out in one pass of the block (kernels/device_prims_ll.cuh, sendTogether): the 7 sends of
// a one-shot allreduce of 2 floats at 8 ranks take 3 barriers in all where one by one they take 3 each, 18 fewer
// per rank; COLLIE_DEV_LL_SEPARATE_POSTS=1 posts them one by one again. Counted through the kernels' own code (the
// emulation counts the barriers blocks pass).
TEST(Emulator, AnLLBatchsSlicesGoOutInOnePass) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv proto("COLLIE_PROTO", "ll");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:oneshot");
  ScopedEnv channels("COLLIE_CHANNELS", "1");
  const int n = 8;
  const uint64_t together =
      countedInOneAllReduce(n, collie::emu::barriersTaken, "COLLIE_DEV_LL_SEPARATE_POSTS", "0", 2);
  const uint64_t apart = countedInOneAllReduce(n, collie::emu::barriersTaken, "COLLIE_DEV_LL_SEPARATE_POSTS", "1", 2);
  EXPECT_GE(apart, together + static_cast<uint64_t>(n * (3 * (n - 1) - 3))) << together << " against " << apart;
}

// A Simple post's release store is its only fence; COLLIE_DEV_SYSTEM_FENCE=1 adds the full one before it, one per
// slice posted. Counted through the kernels' own code (the emulation counts dev::fenceSystem).
TEST(Emulator, SimplePostsTakeAFullFenceOnlyWhenAsked) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv proto("COLLIE_PROTO", "simple");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  const int n = 3;
  EXPECT_EQ(countedInOneAllReduce(n, collie::emu::fencesTaken, "COLLIE_DEV_SYSTEM_FENCE", "0"), 0u);
  // Ring allreduce posts 2(n-1) slices per rank and channel at least.
  EXPECT_GE(countedInOneAllReduce(n, collie::emu::fencesTaken, "COLLIE_DEV_SYSTEM_FENCE", "1"),
            static_cast<uint64_t>(n * 2 * (n - 1)));
}

// Ranks that are threads of one process (here: emulated on one host, as on one GPU) release and acquire their
// flags at GPU scope, with either protocol; COLLIE_DEV_SYSTEM_SCOPE=1 puts every flag at system scope. Counted
// through the kernels' own code (the emulation counts dev::loadAcquireSys and storeReleaseSys).
TEST(Emulator, FlagsBetweenRanksOfOneGpuAreAtGpuScope) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  const int n = 3;
  for (const char* proto : {"simple", "ll"}) {
    ScopedEnv protocol("COLLIE_PROTO", proto);
    EXPECT_EQ(countedInOneAllReduce(n, collie::emu::systemScopeTaken, "COLLIE_DEV_SYSTEM_SCOPE", "0"), 0u) << proto;
    // Simple: a release per slice posted and per slice taken, 2(n-1) of each per rank and channel at least. LL:
    // the drain's loads of the credits at least, one per peer sent to.
    EXPECT_GE(countedInOneAllReduce(n, collie::emu::systemScopeTaken, "COLLIE_DEV_SYSTEM_SCOPE", "1"),
              static_cast<uint64_t>(std::string(proto) == "ll" ? n : n * 4 * (n - 1)))
        << proto;
  }
}

// COLLIE_KERNEL_TIMING=1: every block that ran adds its parts' times and counts itself, once per launch; the
// kernels' own code does it, here on the CPU.
void checkKernelTiming(const char* proto) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv timing("COLLIE_KERNEL_TIMING", "1");
  ScopedEnv channels("COLLIE_CHANNELS", "2");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  ScopedEnv protocol("COLLIE_PROTO", proto);
  const int n = 2, calls = 3;
  collie::test::Comms c(n);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  collie::test::onRanks(n, [&](int r) {
    std::vector<float> mine(100000, 1.0f);  // both channels get work
    for (int call = 0; call < calls; ++call)
      EXPECT_EQ(collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum, c[r], nullptr),
                collieSuccess);
  });
  for (int r = 0; r < n; ++r) {
    const auto* exec = dynamic_cast<const collie::EmulatedExecutor*>(c[r]->executor.get());
    ASSERT_NE(exec, nullptr);
    const uint64_t* sums = exec->kernelPhases();
    ASSERT_NE(sums, nullptr);
    EXPECT_EQ(sums[collie::kPhaseBlocks], static_cast<uint64_t>(2 * calls)) << "rank " << r;
    // 3 x 400 KB through slots, each block waiting on its peer at every step: well over a microsecond.
    EXPECT_GT(sums[collie::kPhaseSteps], 1000u) << "rank " << r;
    // Waiting is part of the steps; a ring step waits for its peer's slice at least once.
    EXPECT_GT(sums[collie::kPhaseWaiting], 0u) << "rank " << r;
    EXPECT_LE(sums[collie::kPhaseWaiting], sums[collie::kPhaseSteps]) << "rank " << r;
    // Step by step (two ring steps at 2 ranks): the steps' times fit in the whole, and their waiting is all of it.
    uint64_t time = 0, waited = 0;
    for (int k = 0; k < collie::kTimedSteps; ++k) {
      time += sums[collie::kPhaseStepTime + k];
      waited += sums[collie::kPhaseStepWait + k];
      EXPECT_LE(sums[collie::kPhaseStepWait + k], sums[collie::kPhaseStepTime + k]) << "rank " << r << " step " << k;
    }
    EXPECT_GT(sums[collie::kPhaseStepTime], 0u) << "rank " << r;
    EXPECT_GT(sums[collie::kPhaseStepTime + 1], 0u) << "rank " << r;
    EXPECT_LE(time, sums[collie::kPhaseSteps]) << "rank " << r;
    EXPECT_EQ(waited, sums[collie::kPhaseWaiting]) << "rank " << r;
    // Within the steps, the primitives by what they do: a ring step posts, takes and moves, and the three parts
    // (thread 0's, never nested) fit in the steps.
    const uint64_t post = sums[collie::kPhasePost], take = sums[collie::kPhaseTake], moves = sums[collie::kPhaseMoves];
    EXPECT_GT(post, 0u) << "rank " << r;
    EXPECT_GT(take, 0u) << "rank " << r;
    EXPECT_GT(moves, 0u) << "rank " << r;
    EXPECT_LE(post + take + moves, sums[collie::kPhaseSteps]) << "rank " << r;
  }
  ScopedEnv off("COLLIE_KERNEL_TIMING", "0");
  collie::test::Comms untimed(1);
  ASSERT_EQ(untimed.result, collieSuccess) << collieGetLastError(nullptr);
  const auto* exec = dynamic_cast<const collie::EmulatedExecutor*>(untimed[0]->executor.get());
  ASSERT_NE(exec, nullptr);
  EXPECT_EQ(exec->kernelPhases(), nullptr);
}

TEST(Emulator, KernelTimingCountsEveryBlockThatRan) {
  for (const char* proto : {"simple", "ll"}) {
    SCOPED_TRACE(proto);
    checkKernelTiming(proto);
  }
}

// A rank that never calls: the emulated kernels of the others time out on the
// kernel's own deadline, name the rank they wait on, and the communicator is broken.
TEST(Emulator, AMissingRankTimesOutInsideTheKernel) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "3");
  ScopedEnv timeout("COLLIE_TIMEOUT", "1");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  collie::test::Comms c(3);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieResult_t> rc(2);
  std::vector<std::string> text(2);
  collie::test::onRanks(2, [&](int r) {
    std::vector<float> mine(1000, 1.0f);
    rc[static_cast<size_t>(r)] =
        collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum, c[r], nullptr);
    text[static_cast<size_t>(r)] = collieGetLastError(c[r]);
  });
  // Rank 1 waits on rank 0, which may time out first and give up: rank 1 then fails at once, naming it
  // (executor/protocol.h, "Giving up"), rather than timing out in turn.
  const bool second = rc[1] == collieRemoteError;
  if (second) {
    EXPECT_NE(text[1].find("failed in the emulated kernel: rank 0 had given up this call first"), std::string::npos)
        << text[1];
  }
  for (int r = 0; r < 2; ++r) {
    const bool timedOut = r == 0 || !second;
    EXPECT_EQ(rc[static_cast<size_t>(r)], timedOut ? collieTimeout : collieRemoteError) << text[static_cast<size_t>(r)];
    EXPECT_NE(text[static_cast<size_t>(r)].find("rank " + std::to_string(r) + " waiting on rank"), std::string::npos)
        << text[static_cast<size_t>(r)];
    if (timedOut) {
      EXPECT_NE(text[static_cast<size_t>(r)].find("of ring allreduce #0 timed out in the emulated kernel"),
                std::string::npos)
          << text[static_cast<size_t>(r)];
    }
  }
  // Rank 0's ring predecessor is rank 2, which never came: its kernel never began. Rank 1 waited on rank 0,
  // whose kernel had begun (and waited in turn).
  EXPECT_NE(text[0].find("waiting on rank 2"), std::string::npos) << text[0];
  EXPECT_NE(text[0].find("rank 2 had started no kernel yet"), std::string::npos) << text[0];
  if (!second) {
    EXPECT_NE(text[1].find("the newest kernel rank 0 had started was its call #0 (this is #0 here)"), std::string::npos)
        << text[1];
  }
  float x = 1;
  EXPECT_EQ(collieAllReduce(&x, &x, 1, collieFloat32, collieSum, c[0], nullptr), collieTimeout);
  // Named in full in the refusal: a kernel's failure that no call returned is said nowhere else.
  const std::string later = collieGetLastError(c[0]);
  EXPECT_NE(later.find("broken by an earlier failure (collieTimeout: collieAllReduce: rank 0 waiting on rank 2"),
            std::string::npos)
      << later;
}

// A rank whose kernel failed marks its window (executor/protocol.h, kFailedOffset), and a peer waiting on it
// fails at once, naming it, instead of waiting out its own timeout. LL, where no slice is read in place, so the
// giving-up protocol of ranks that read each other's sends plays no part: the mark alone tells rank 1. Rank 2
// never calls; rank 0 waits on it and times out after 1 s; rank 1 calls 0.6 s late and waits on rank 0, so that
// its own timeout would come 0.6 s after rank 0's.
TEST(Emulator, ARankWaitingOnOneThatFailedFailsAtOnce) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv timeout("COLLIE_TIMEOUT", "1");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  ScopedEnv proto("COLLIE_PROTO", "ll");
  collie::test::Comms c(3);
  ASSERT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<collieResult_t> rc(2);
  std::vector<std::string> text(2);
  std::vector<double> took(2);
  collie::test::onRanks(2, [&](int r) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> mine(1000, 1.0f);
    rc[static_cast<size_t>(r)] =
        collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum, c[r], nullptr);
    took[static_cast<size_t>(r)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    text[static_cast<size_t>(r)] = collieGetLastError(c[r]);
  });
  EXPECT_EQ(rc[0], collieTimeout) << text[0];
  EXPECT_NE(text[0].find("waiting on rank 2"), std::string::npos) << text[0];
  EXPECT_EQ(rc[1], collieRemoteError) << text[1];
  EXPECT_NE(text[1].find("rank 1 waiting on rank 0"), std::string::npos) << text[1];
  EXPECT_NE(text[1].find("failed in the emulated kernel: rank 0 had given up this call first"), std::string::npos)
      << text[1];
  EXPECT_LT(took[1], 0.9) << "rank 1 waited out its own timeout";
}

// The report of a timed-out wait says which call the peer's newest kernel was (an earlier one: a stalled host
// thread, or a kernel that could not start on a shared GPU), that it had started none, or nothing where it
// cannot tell (a peer behind the proxy).
TEST(Emulator, ATimeoutSaysWhetherThePeersKernelHadStarted) {
  collie::RecentLaunches launches;
  collie::DeviceStatus st{};
  st.code = static_cast<uint32_t>(collieTimeout);
  st.peer = 2;
  st.step = 1;
  st.channel = 3;
  st.seq = 70;
  auto text = [&](uint64_t mark) {
    st.peerStarted = mark;
    return collie::launchFailure(st, 0, "on the GPU", launches, nullptr).message();
  };
  EXPECT_NE(text(0).find("rank 0 waiting on rank 2 at step 1 (channel 3) of collective #70 timed out on the GPU; "
                         "rank 2 had started no kernel yet"),
            std::string::npos)
      << text(0);
  EXPECT_NE(text(70).find("; the newest kernel rank 2 had started was its call #69 (this is #70 here)"),
            std::string::npos)
      << text(70);
  EXPECT_NE(text(71).find("; the newest kernel rank 2 had started was its call #70 (this is #70 here)"),
            std::string::npos)
      << text(71);
  const std::string unknown = text(collie::kPeerStartedUnknown);
  EXPECT_EQ(unknown.find("; rank 2"), std::string::npos) << unknown;
  // A call in rounds runs them in one launch: past the first, the report names the round.
  st.round = 12;
  EXPECT_NE(text(0).find("at step 1 (channel 3, round 12) of collective #70"), std::string::npos) << text(0);
}

// Rank 0 of two makes a 32-float LL ring allreduce; rank 1 never calls. In its place, the first line of rank 1's
// first slice to rank 0 (channel 0, slice 0; the slice is 16 floats, half of the call), and none of the others.
// The line's flag is that of rank 0's own first line to rank 1 (the same slice of the same call), read from rank
// 1's window while rank 0's call runs, with `tagFlip` XORed into its tag (protocol.h, llTag). Returns rank 0's
// result and its error's sentence.
std::pair<collieResult_t, std::string> llFirstLineOnly(uint32_t tagFlip) {
  ScopedEnv emulate("COLLIE_TEST_EMULATE_KERNELS", "2");
  ScopedEnv timeout("COLLIE_TIMEOUT", "2");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  ScopedEnv proto("COLLIE_PROTO", "ll");
  collie::test::Comms c(2);
  EXPECT_EQ(c.result, collieSuccess) << collieGetLastError(nullptr);
  if (c.result != collieSuccess) return {c.result, ""};
  uint8_t* window = c[0]->windows->window(0);
  collie::WindowHeader h;
  std::memcpy(&h, window, sizeof(h));
  EXPECT_EQ(h.magic, collie::kWindowMagic);
  EXPECT_GT(h.llSlotBytes, 0u) << "the emulated kernels' windows have LL slots";
  const collie::WindowLayout layout = collie::layoutOf(h);
  std::vector<float> mine(32, 1.0f);
  collieResult_t result = collieSuccess;
  std::thread rank0([&] {
    result = collieAllReduce(mine.data(), mine.data(), mine.size(), collieFloat32, collieSum, c[0], nullptr);
  });
  const uint64_t* sent = reinterpret_cast<const uint64_t*>(c[1]->windows->window(1) + layout.llSlotOffset(0, 0, 0));
  uint64_t first = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while ((first = __atomic_load_n(sent, __ATOMIC_ACQUIRE)) == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1))
    std::this_thread::yield();
  EXPECT_NE(first, 0u) << "rank 0 posted no LL line to rank 1 within 1 s";
  const uint64_t flag = (first >> 32) ^ (static_cast<uint64_t>(tagFlip) << collie::kLLTagShift);
  __atomic_store_n(reinterpret_cast<uint64_t*>(window + layout.llSlotOffset(0, 1, 0)), flag << 32 | 0x3f800000u,
                   __ATOMIC_RELEASE);  // 1.0f
  rank0.join();
  return {result, collieGetLastError(c[0])};
}

// An LL slice whose first line came but whose other lines never do (a sender
// killed half-way through writing it): the receiver's wait for each line is
// bounded too, so the call times out naming the sender instead of spinning for
// ever (ctest's timeout would fail this test if it did).
TEST(Emulator, AnLLSliceWhoseLinesNeverComeTimesOut) {
  const auto [result, text] = llFirstLineOnly(0);
  EXPECT_EQ(result, collieTimeout) << text;
  EXPECT_NE(text.find("rank 0 waiting on rank 1"), std::string::npos) << text;
}

// The same line with another call's tag in its flag: rank 0 refuses it at once, with collieInvalidUsage naming
// rank 1, instead of taking it (were the other lines there) or timing out.
TEST(Emulator, AnLLLineOfAnotherCallIsRefused) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto [result, text] = llFirstLineOnly(0x5a);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5)
      << "the refusal waited for the timeout";
  EXPECT_EQ(result, collieInvalidUsage) << text;
  EXPECT_NE(text.find("rank 1 sent rank 0 data of another call while rank 0 ran its collective #0"), std::string::npos)
      << text;
}

}  // namespace
