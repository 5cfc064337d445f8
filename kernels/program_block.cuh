// The program kernel's body, one block's work: load the block's counters, run
// this rank's Program for the block's channel through the shared step runner
// (executor/step_runner.h) with the primitives of one protocol (Simple:
// kernels/device_prims.cuh; LL: device_prims_ll.cuh), drain, record a failure,
// store the counters back. The CUDA kernel (program_kernel.cuh) wraps it with
// its shared memory; the CPU emulation (emulator.cc) calls it from host threads.
#pragma once

#include <type_traits>

#include "executor/step_runner.h"
#include "kernels/device_ops.cuh"
#include "kernels/device_prims.cuh"
#include "kernels/device_prims_ll.cuh"
#include "kernels/launch.h"

namespace collie {

/// Where an LL launch's two staged slices begin in dynamic shared memory, in 8-byte words: after the four counter
/// arrays (posted, consumed, credited, clean). They end 16-byte aligned whatever the rank count; were they to end
/// 8-byte aligned, moves into and out of the stage would go element by element instead of by 16-byte vectors.
COLLIE_HD uint64_t llStageWords(uint64_t nranks) { return 4 * nranks; }

template <typename Prims>
__device__ Prims makePrims(const KernelArgs& a, int c, uint64_t* counters, int* handoff) {
  if constexpr (std::is_constructible<Prims, const KernelArgs&, int, uint64_t*, int*, uint32_t*>::value) {
    // LL: the two staged slices follow the four counter arrays in dynamic shared memory.
    return Prims(a, c, counters, handoff, reinterpret_cast<uint32_t*>(counters + llStageWords(a.layout.nranks)));
  } else {
    return Prims(a, c, counters, handoff);
  }
}

/// Elements one slice carries: a Simple slot, or an LL slot's payload.
template <typename T, bool LL>
__device__ uint64_t slicePerStep(const KernelArgs& a) {
  return LL ? llPayloadBytes(a.layout.llSlotBytes) / sizeof(T) : a.layout.slotBytes / sizeof(T);
}

/// Block `c` of `C` runs its channel's program. `counters` is the block's
/// shared memory (programSharedBytes), `handoff` one shared int; the block's
/// threads all call this together.
template <typename T, ReduceOp Op, bool LL>
__device__ void programBlock(const KernelArgs& a, int c, int C, uint64_t* counters, int* handoff) {
  // This block's counters (posted[n], consumed[n]) live in shared memory for
  // the launch and in a.counters between launches: kernels of one
  // communicator run in stream order, so each starts where the last stopped.
  // A third array, credited[n], is thread 0's knowledge of the peers' credits,
  // so that a send with room known needs no load: every launch ends with a
  // drain, so at the start every slice posted has been credited. A fourth,
  // clean[n] (kernels/device_prims_ll.cuh, "Stale lines"), is kept between
  // launches too.
  const int n = static_cast<int>(a.layout.nranks);
  const bool timed = a.phaseNs != nullptr && dev::tid() == 0;  // COLLIE_KERNEL_TIMING (launch.h, KernelPhase)
  const uint64_t tStart = timed ? dev::globalTimerNs() : 0;
  // "This rank's kernel for call seq has begun", for a peer's timeout report; every block writes the same value.
  if (dev::tid() == 0) dev::storeVolatile64(a.windows[a.rank] + kStartedOffset, a.seq + 1);
  const int fullProg = a.rounds > 1 ? a.channelProgram[kFullRound][c] : -1;
  if (fullProg < 0 && a.channelProgram[kLastRound][c] < 0) return;  // no work: its counters stay as they are
  uint64_t* const posted = a.counters + static_cast<size_t>(c) * n;
  uint64_t* const consumed = a.counters + static_cast<size_t>(C + c) * n;
  uint64_t* const clean = a.counters + static_cast<size_t>(2 * C + c) * n;
  for (int p = dev::tid(); p < n; p += dev::nthreads()) {
    counters[p] = posted[p];
    counters[n + p] = consumed[p];
    counters[2 * n + p] = posted[p];
    counters[3 * n + p] = clean[p];
  }
  // A communicator that failed once is broken: later launches do nothing.
  if (dev::tid() == 0) *handoff = dev::loadFlag(a.failed);
  dev::sync();
  const bool broken = *handoff != 0;
  // Every thread has read `handoff` before thread 0 reuses it for the primitives' answers: a lagging thread
  // could read the first answer instead (ThreadSanitizer reports it over the CPU emulation without this barrier).
  dev::sync();
  if (broken) return;

  // Taken before the primitives start their step clock (StepClock), so the steps one by one fit in the whole.
  const uint64_t tSteps = timed ? dev::globalTimerNs() : 0;
  using Prims = typename std::conditional<LL, DevicePrimsLL<T, Op>, DevicePrims<T, Op>>::type;
  Prims prims = makePrims<Prims>(a, c, counters, handoff);
  // The rounds follow each other through the slot FIFOs as the steps of one round do: no drain between them,
  // and channels advance independently (each owns its part of every block, and its scratch).
  StepFailure f;
  int lastSteps = 0;
  uint64_t r = 0;
  for (; r < a.rounds && f.code == 0; ++r) {
    const int kind = r + 1 < a.rounds ? kFullRound : kLastRound;
    const int prog = a.channelProgram[kind][c];
    if (prog < 0) continue;
    const uint64_t off = r * a.roundStride + a.channelOffset[kind][c];
    T* const bufs[3] = {a.bufs[0] ? static_cast<T*>(a.bufs[0]) + off : nullptr,
                        a.bufs[1] ? static_cast<T*>(a.bufs[1]) + off : nullptr,
                        reinterpret_cast<T*>(static_cast<char*>(a.bufs[2]) + a.scratchPerChannel * c)};
    const Step* steps = a.steps[prog] != nullptr ? a.steps[prog] : a.inlineSteps + a.inlineAt[prog];
    f = runSteps<T>(prims, steps, a.nsteps[prog], bufs, slicePerStep<T, LL>(a), a.divisor, a.splitSteps ? c : 0,
                    a.splitSteps ? C : 1, 16 / sizeof(T), DirectSteps{nullptr, a.directSteps[prog]});
    lastSteps = a.nsteps[prog];
  }
  const uint32_t failedRound = static_cast<uint32_t>(r > 0 ? r - 1 : 0);  // the loop stepped past it
  const uint64_t tDrain = timed ? dev::globalTimerNs() : 0;
  if (f.code == 0) {
    f.code = prims.drain(&f.peer);
    f.step = lastSteps;  // "after the last step"
  }
  const uint64_t tStore = timed ? dev::globalTimerNs() : 0;
  if (dev::tid() != 0) return;
  if (f.code != 0) {
    // The first block to fail records where; the host reads it through
    // collieCommGetAsyncError.
    if (dev::raiseFirst(a.failed)) {
      a.status->step = f.step;
      a.status->peer = f.peer;
      a.status->channel = c;
      a.status->round = failedRound;
      a.status->seq = a.seq;
      // A proxy's outbox stands where a remote peer's window would be: nothing to read there.
      a.status->peerStarted = f.peer >= 0 && f.peer < n && a.lost == nullptr
                                  ? dev::loadVolatile64(a.windows[f.peer] + kStartedOffset)
                                  : kPeerStartedUnknown;
      a.status->peerGaveUp = prims.gaveUp(f.peer) || (f.code == collieRemoteError && peerFailed(a, f.peer)) ? 1u : 0u;
      a.status->theirs = f.code == collieInvalidUsage ? prims.theirs(f.peer) : 0;
      dev::fenceSystem();
      dev::storeFlag(&a.status->code, static_cast<uint32_t>(f.code));
      dev::fenceSystem();
    }
    // A call refused (a peer's slice of another call, or a peer that refused first): nothing more runs here,
    // and the peers waiting on this rank stop too (executor/protocol.h, kRefusedOffset). Before giveUp's
    // withdrawal, which a peer acquires before it looks here.
    // Any other failure, likewise, so that peers waiting on this rank stop at once (kFailedOffset).
    dev::storeVolatile64(a.windows[a.rank] + (f.code == collieInvalidUsage ? kRefusedOffset : kFailedOffset), 1);
    // Every block that fails, after the record, so the host hears of the failure while this waits.
    prims.giveUp();
    return;
  }
  for (int p = 0; p < n; ++p) {
    posted[p] = counters[p];
    consumed[p] = counters[n + p];
    clean[p] = counters[3 * n + p];
  }
  if (timed) {
    const uint64_t tEnd = dev::globalTimerNs();
    dev::addCount(a.phaseNs + kPhaseSetup, tSteps - tStart);
    dev::addCount(a.phaseNs + kPhaseSteps, tDrain - tSteps);
    dev::addCount(a.phaseNs + kPhaseWaiting, prims.waitedNs());
    dev::addCount(a.phaseNs + kPhaseDrain, tStore - tDrain);
    dev::addCount(a.phaseNs + kPhaseStore, tEnd - tStore);
    dev::addCount(a.phaseNs + kPhaseBlocks, 1);
    dev::addCount(a.phaseNs + kPhasePost, prims.postNs());
    dev::addCount(a.phaseNs + kPhaseTake, prims.takeNs());
    dev::addCount(a.phaseNs + kPhaseMoves, prims.movesNs());
  }
}

/// Dynamic shared memory of a launch: counters (posted, consumed, credited, clean), and for LL two staged slices.
inline size_t programSharedBytes(const KernelArgs& a, bool ll) {
  return ll ? sizeof(uint64_t) * llStageWords(a.layout.nranks) + 2 * llPayloadBytes(a.layout.llSlotBytes)
            : 4 * sizeof(uint64_t) * a.layout.nranks;
}

}  // namespace collie
