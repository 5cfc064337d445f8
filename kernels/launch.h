// Host-only interface to the program kernel (kernels/program_kernel.cu): what
// the CUDA executor passes to one launch. Plain structs, so g++ code (the
// executor) and nvcc code (the kernel) agree on one layout.
#pragma once

#include <cstdint>

#include "algorithms/program.h"
#include "collie.h"
#include "executor/protocol.h"
#include "executor/reduce_ops.h"

namespace collie {

/// Programs up to this many steps travel inside the launch's parameters, so a
/// launch needs no copy and can be captured into a CUDA graph as is.
constexpr int kInlineSteps = 40;
/// Threads per block; each block runs one channel.
constexpr int kKernelThreads = 512;
constexpr int kMaxChannels = 32;

/// Shared by a communicator's host side and its kernels, in mapped pinned host
/// memory: the host raises `abort`; the first failing block records where.
struct DeviceStatus {
  volatile uint32_t abort;  // host -> device: every wait gives up with collieRemoteError
  volatile uint32_t code;   // device -> host: collieTimeout or collieRemoteError; 0 while healthy
  volatile int32_t step, peer, channel;
  volatile uint32_t round;  // the round (of a call in rounds) the failing block was in
  volatile uint64_t seq;
  // What the failing block read at `peer`'s kStartedOffset (executor/protocol.h) when it gave up;
  // kPeerStartedUnknown where it could not tell (a peer on another host).
  volatile uint64_t peerStarted;
  // 1: `peer` had given up first, and this block failed on seeing it (protocol.h, "Giving up").
  volatile uint32_t peerGaveUp;
  // With code collieInvalidUsage: the signature of `peer`'s slice, which belonged to another call than the
  // launch's (protocol.h, signature[][][]); 0 where `peer` had refused its call first (kRefusedOffset);
  // kAnotherCall where an LL line said no more than that (protocol.h, llOtherCall).
  volatile uint64_t theirs;
  // host -> device: bit r, rank r's process of this machine is gone (PeerWatch, ranks below 64): the waits on it
  // give up with collieRemoteError, the others go on. A rank that destroyed its communicator and exited owes
  // the calls still running nothing more.
  volatile uint64_t exited;
};
constexpr uint64_t kAnotherCall = ~uint64_t{0};
constexpr uint64_t kPeerStartedUnknown = ~uint64_t{0};

/// Distinct programs one launch may carry: a launch runs every round of a
/// call (executor.h's RoundPlan), whose rounds are of two kinds (full, and the
/// last), and a round's channel parts have at most two sizes (full parts and
/// the last one).
constexpr int kMaxPrograms = 4;
/// KernelArgs::channelProgram's first index: every round but the last, and the last.
constexpr int kFullRound = 0;
constexpr int kLastRound = 1;

/// COLLIE_KERNEL_TIMING=1: every block that had work adds how long it spent in each part of the kernel (ns of
/// the GPU's global timer) to KernelArgs::phaseNs, and counts itself there; the executor prints the means when
/// the communicator goes. Setup: the block's counters loaded and the broken-communicator flag read; steps: the
/// program's steps, every round; waiting: the part of the steps thread 0 spent polling for a peer's slice or
/// credit; drain: waiting for the peers' credits for everything sent; store: the counters written back. Then the
/// steps one by one: the time of step k (k < kTimedSteps; the last bucket also takes every later step, and each
/// round's steps count again), and the part of it spent waiting, to tell a step's own cost (its code, its loads)
/// from waiting for peers, which in small steps can be the smaller part. Within the
/// steps, thread 0's time in the primitives by what they do (posting, taking, moving), so that what is left of a
/// step is the step runner's own work.
constexpr int kTimedSteps = 4;
enum KernelPhase : int {
  kPhaseSetup,
  kPhaseSteps,
  kPhaseWaiting,
  kPhaseDrain,
  kPhaseStore,
  kPhaseBlocks,
  kPhasePost,      // within the steps: thread 0 in the primitives' posting (room, post, sendTogether)
  kPhaseTake,      // taking slices (arrived, waitArrived, release), their waiting included
  kPhaseMoves,     // moving and reducing elements (copy, reduce, copy2, reduce2, reduceMany)
  kPhaseStepTime,  // kTimedSteps words
  kPhaseStepWait = kPhaseStepTime + kTimedSteps,  // kTimedSteps words
  kPhaseWords = kPhaseStepWait + kTimedSteps
};

struct KernelArgs {
  // Program p: a device copy (steps[p]), or inlineSteps[inlineAt[p] ...] when steps[p] is nullptr.
  const Step* steps[kMaxPrograms] = {};
  int nsteps[kMaxPrograms] = {};
  int inlineAt[kMaxPrograms] = {};
  // The call's rounds, run in order by each block: round r advances the input and output by
  // r * roundStride elements, then by channelOffset[kind][c]; kind is kLastRound for the last round.
  uint64_t rounds = 1;
  uint64_t roundStride = 0;
  int8_t channelProgram[2][kMaxChannels];   // the program block c runs in a round of that kind; -1: no work
  uint64_t channelOffset[2][kMaxChannels];  // elements block c adds to the round's input and output
  int splitSteps = 0;                       // 1: every block moves its part of each step (ExecArgs::splitSteps)
  uint64_t scratchPerChannel = 0;           // bytes of scratch each block owns, from bufs[2]
  int lowLatency = 0;                       // 1: the LL protocol (executor/protocol.h), else Simple
  int systemFence = 0;                      // 1: COLLIE_DEV_SYSTEM_FENCE, a full fence before each Simple post
  int separatePosts = 0;                    // 1: COLLIE_DEV_LL_SEPARATE_POSTS, a batch's LL slices posted one by one
  int rank = 0;
  int divisor = 0;
  uint64_t seq = 0;
  // What every Simple slice this launch posts carries, and what the first slice each block takes from each peer
  // must carry (executor/protocol.h, signature[][][]): launchSignature of the call, or kPointToPoint for sends
  // and receives, whose Simple slices no receiver compares. LL lines carry 16 bits of it in their flags (llTag).
  uint64_t callSignature = kPointToPoint;
  void* bufs[3] = {nullptr, nullptr, nullptr};  // input, output, scratch (Buffer order)
  uint8_t* const* windows = nullptr;            // device array: every rank's window as we address it
  // device array: where rank p's slices, ready and credits for us land: our own window, or for a peer on
  // another host the proxy's inbox (executor/remote_proxy.h)
  uint8_t* const* inboxes = nullptr;
  uint64_t* sliceBytes = nullptr;  // the proxy's table of posted slice sizes (device address); null without one
  const uint32_t* lost = nullptr;  // [peer]: the proxy lost it (device address); null without a proxy
  uint64_t* counters = nullptr;    // device: posted[C][n], consumed[C][n], then clean[C][n] (the LL slots' age)
  uint32_t* failed = nullptr;      // device: set by the first failing block; others stop
  DeviceStatus* status = nullptr;  // device address of the mapped DeviceStatus
  WindowLayout layout;
  uint64_t timeoutNs = 0;
  uint64_t* phaseNs = nullptr;  // device: kPhaseWords sums (COLLIE_KERNEL_TIMING); null: not timed
  // Reading in place (executor/direct_sends.h), Simple launches only. Bit p of readsInPlace: rank p is a thread
  // of this process on this GPU (p < 64), so we write a source word with each slice we post to it and read one
  // with each slice it posts to us. Bit i of directSteps[prog]: step i's sends hand over our buffer in place.
  uint64_t readsInPlace = 0;
  uint64_t directSteps[kMaxPrograms] = {};
  // Bit p: rank p is this rank or a thread of this process on this GPU (p < 64), so the flags between us are
  // released and acquired at GPU scope; those of every other peer (another GPU, process or host: a proxy's
  // thread reads them) at system scope. COLLIE_DEV_SYSTEM_SCOPE=1 leaves it 0, to measure the difference.
  uint64_t gpuScopePeers = 0;
  Step inlineSteps[kInlineSteps];
};

// Kernel parameters are limited to 4 KiB on every architecture we build for.
static_assert(sizeof(KernelArgs) <= 4096, "KernelArgs must fit the kernel parameter space");

/// Loads every instantiation of the program kernel, and of the scaling kernel
/// of pre-multiplied sums, on the current device (see program_kernel.cu for why). Returns a cudaError_t as an int.
int preloadProgramKernels();

/// Launches the program on `stream` (a cudaStream_t) with one block per
/// channel (layout.nchannels). Returns the launch's cudaError_t as an int.
int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, void* stream);

}  // namespace collie
