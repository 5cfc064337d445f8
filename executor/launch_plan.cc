#include "executor/launch_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "base/env.h"
#include "base/log.h"
#include "executor/direct_sends.h"
#include "executor/remote_proxy.h"

namespace collie {

Status planLaunch(const std::vector<ChannelWork>& work, const ExecArgs& args, const LaunchTables& tables,
                  LaunchStorage* storage, KernelArgs* a, bool* empty) {
  RoundPlan plan;
  plan.last = work;
  return planLaunch(plan, args, tables, storage, a, empty);
}

Status planLaunch(const RoundPlan& plan, const ExecArgs& args, const LaunchTables& tables, LaunchStorage* storage,
                  KernelArgs* a, bool* empty) {
  *empty = true;
  if (plan.last.empty() || plan.rounds == 0) return Status();
  if (args.splitSteps && plan.rounds != 1)
    return Status::error(collieInternalError, "a split program runs in one round");
  const size_t es = typeSize(args.type);
  // The distinct programs of both kinds of round (at most kMaxPrograms), inline while they fit.
  const Program* programs[kMaxPrograms] = {};
  int nprograms = 0, inlineUsed = 0;
  uint64_t scratchCount = 0, totalSteps = 0;
  for (int kind : {kFullRound, kLastRound})
    for (size_t c = 0; c < static_cast<size_t>(kMaxChannels); ++c) {
      a->channelProgram[kind][c] = -1;
      a->channelOffset[kind][c] = 0;
    }
  for (int kind : {kFullRound, kLastRound}) {
    if (kind == kFullRound && plan.rounds == 1) continue;  // only the last round runs
    const std::vector<ChannelWork>& work = kind == kFullRound ? plan.full : plan.last;
    if (work.size() > tables.layout.nchannels)
      return Status::error(collieInternalError, "%zu channels of work for a launch of %u blocks", work.size(),
                           tables.layout.nchannels);
    for (size_t c = 0; c < work.size(); ++c) {
      const Program* p = work[c].program;
      int index = 0;
      while (index < nprograms && programs[index] != p) ++index;
      if (index == nprograms) {
        if (nprograms == kMaxPrograms)
          return Status::error(collieInternalError, "a launch carries more than %d distinct programs", kMaxPrograms);
        programs[nprograms++] = p;
        scratchCount = std::max(scratchCount, p->scratchCount);
        totalSteps += p->steps.size();
      }
      a->channelProgram[kind][c] = static_cast<int8_t>(index);
      a->channelOffset[kind][c] = work[c].offset;
    }
  }
  a->rounds = plan.rounds;
  a->roundStride = plan.rounds > 1 ? plan.stride : 0;
  if (totalSteps == 0) return Status();
  for (int p = 0; p < nprograms; ++p) {
    const std::vector<Step>& steps = programs[p]->steps;
    a->nsteps[p] = static_cast<int>(steps.size());
    if (inlineUsed + steps.size() <= static_cast<size_t>(kInlineSteps)) {
      memcpy(a->inlineSteps + inlineUsed, steps.data(), steps.size() * sizeof(Step));
      a->inlineAt[p] = inlineUsed;
      inlineUsed += static_cast<int>(steps.size());
    } else {
      COLLIE_RETURN_IF_ERROR(storage->program(*programs[p], &a->steps[p]));
    }
  }
  if (args.splitSteps) {
    // One program on every channel, each moving its part of each step.
    for (size_t c = 0; c < tables.layout.nchannels; ++c) a->channelProgram[kLastRound][c] = 0;
    a->splitSteps = 1;
  }
  // Channels run at once, so each has scratch of its own.
  a->scratchPerChannel = (scratchCount * es + 255) & ~size_t{255};
  if (a->scratchPerChannel > 0)
    COLLIE_RETURN_IF_ERROR(storage->scratch(a->scratchPerChannel * tables.layout.nchannels, &a->bufs[2]));
  a->rank = tables.rank;
  a->divisor = args.divisor;
  a->seq = args.seq;
  a->callSignature = launchSignature(args.callSignature);
  // LL slices carry no byte count a proxy could read: never LL through one.
  a->lowLatency = args.lowLatency && tables.layout.llSlotBytes > 0 && tables.lost == nullptr ? 1 : 0;
  a->bufs[0] = const_cast<void*>(args.input);
  a->bufs[1] = args.output;
  a->windows = tables.windows;
  a->inboxes = tables.inboxes;
  a->sliceBytes = tables.sliceBytes;
  a->lost = tables.lost;
  a->counters = tables.counters;
  a->failed = tables.failed;
  a->status = tables.status;
  a->layout = tables.layout;
  a->timeoutNs = static_cast<uint64_t>(tables.timeoutSec * 1e9);
  a->phaseNs = tables.phaseNs;
  a->systemFence = tables.systemFence ? 1 : 0;
  a->separatePosts = tables.separatePosts ? 1 : 0;
  if (!tables.systemScope) {
    a->gpuScopePeers = tables.inPlaceMask;
    if (tables.rank < 64) a->gpuScopePeers |= uint64_t{1} << tables.rank;
  }
  // Reading in place (executor/direct_sends.h), which LL has not. The marks are found on round 0's buffers of
  // channel 0 and hold for every round and channel: each runs its program on the input and output advanced by
  // the same number of elements, so what overlaps in one overlaps in all; and none writes another's elements,
  // each being a complete collective on its part of every block (executor.h). The drain that ends every block
  // (device_prims.cuh) keeps the launch running until the peers have read all it handed over.
  if (!a->lowLatency && tables.directMinBytes >= 0) {
    a->readsInPlace = tables.inPlaceMask;
    std::vector<uint8_t> marks;
    void* const bufs[3] = {a->bufs[0], a->bufs[1], nullptr};  // scratch is never read in place
    for (int p = 0; p < nprograms; ++p) {
      if (!markDirectSends(*programs[p], bufs, es, args.divisor, tables.inPlacePeers,
                           static_cast<uint64_t>(tables.directMinBytes), &marks, !args.splitSteps))
        continue;
      for (size_t i = 0; i < marks.size() && i < 64; ++i)
        if (marks[i] != 0) a->directSteps[p] |= uint64_t{1} << i;
    }
  }
  *empty = false;
  return Status();
}

bool directSendsOf(const LaunchTables& tables, const Program& p, void* const* bufs, size_t elemSize, int divisor,
                   std::vector<uint8_t>* marks) {
  return tables.directMinBytes >= 0 && markDirectSends(p, bufs, elemSize, divisor, tables.inPlacePeers,
                                                       static_cast<uint64_t>(tables.directMinBytes), marks, true);
}

void setInPlacePeers(LaunchTables* tables, const std::vector<bool>& peers, int64_t minBytes) {
  tables->inPlacePeers.assign(peers.size(), false);
  tables->inPlaceMask = 0;
  for (size_t r = 0; r < peers.size() && r < 64; ++r) {
    tables->inPlacePeers[r] = peers[r];
    if (peers[r]) tables->inPlaceMask |= uint64_t{1} << r;
  }
  tables->directMinBytes = tables->inPlaceMask != 0 ? minBytes : -1;
}

void RecentLaunches::record(uint64_t seq, const Program& program, const ExecArgs& args) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[seq % kKept];
  if (e.seq == seq) return;  // the other channels' parts of the same call
  e.seq = seq;
  e.name = program.algorithm + " " + collectiveName(program.collective);
  e.callSignature = args.callSignature != 0 ? launchSignature(args.callSignature) : 0;  // what peers compare
  e.collectiveSeq = args.collectiveSeq;
}

std::string RecentLaunches::name(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& e = entries_[seq % kKept];
  return e.seq == seq ? e.name : std::string("collective");
}

std::string RecentLaunches::mismatch(uint64_t seq, int rank, int peer, uint64_t theirs) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Entry& e = entries_[seq % kKept];
  if (e.seq != seq)
    return "rank " + std::to_string(rank) + " refused rank " + std::to_string(peer) + "'s data of another call " +
           "than its own call #" + std::to_string(seq) +
           " (COLLIE_CHECK=1 compares calls before they run and names what differs)";
  if (theirs != 0 && theirs != kPointToPoint) {
    // A kernel's signature has no collective number (protocol.h, launchSignature), and an LL line's tag says no
    // more than that the call differs (llOtherCall): which call of the peer's it was is not known.
    const std::string here = e.callSignature != 0
                                 ? "its collective #" + std::to_string(e.collectiveSeq) + " (" + e.name + ")"
                                 : std::string("a send/receive");
    return "rank " + std::to_string(peer) + " sent rank " + std::to_string(rank) + " data of another call while rank " +
           std::to_string(rank) + " ran " + here +
           ": the collective, data type, operator, count, root or algorithm differs, or a call was skipped "
           "(COLLIE_CHECK=1 compares them before each call and names what differs)";
  }
  return callMismatch(rank, peer, theirs, e.callSignature, e.collectiveSeq, e.name);
}

Status launchFailure(const DeviceStatus& status, int rank, const char* where, const RecentLaunches& launches,
                     const RemoteProxy* proxy, const std::string& exited) {
  // Written last by the failing block, after the fields below (a kernel may
  // be writing them while the host asks): acquire, then read them.
  const uint32_t raw = __atomic_load_n(&status.code, __ATOMIC_ACQUIRE);
  if (raw == 0) return Status();
  const collieResult_t code = static_cast<collieResult_t>(raw);
  const int peer = static_cast<int>(status.peer);
  // A call refused (executor/protocol.h, signature[][][]): the host executor's sentence, and where.
  if (code == collieInvalidUsage)
    return Status::error(code, "%s; found %s", launches.mismatch(status.seq, rank, peer, status.theirs).c_str(), where);
  // A peer the proxy lost: its reason (UCX's) says more than "aborted".
  std::string why = proxy != nullptr && peer >= 0 && code == collieRemoteError ? proxy->failure(peer) : "";
  // A peer that reads our sends in place, or hands us its own, and failed first: its error says why.
  if (why.empty() && code == collieRemoteError && status.peerGaveUp != 0)
    why = "rank " + std::to_string(peer) + " had given up this call first (its own error says why)";
  // A peer process gone: the kernels were stopped for it, whichever peer this block waited on.
  if (why.empty() && code == collieRemoteError) why = exited;
  const std::string what = code == collieTimeout ? std::string("timed out ") + where
                           : why.empty()         ? std::string("was aborted ") + where
                                                 : std::string("failed ") + where + ": " + why;
  // What the peer's kernel had begun tells a stalled peer (its kernel never ran: its host thread blocked, or its
  // kernel could not start on a shared GPU) from one that waits in turn. Both numbers are given, not compared:
  // call numbers match across ranks only while every call is a collective of all of them (a send/receive counts
  // on the ranks that take part), and a graph replay marks the number it was captured with.
  std::string started;
  const uint64_t mark = status.peerStarted;
  const unsigned long long seq = static_cast<unsigned long long>(status.seq);
  if (code == collieTimeout && peer >= 0 && mark != kPeerStartedUnknown) {
    char buf[160];
    if (mark == 0)
      snprintf(buf, sizeof(buf), "; rank %d had started no kernel yet", peer);
    else
      snprintf(buf, sizeof(buf), "; the newest kernel rank %d had started was its call #%llu (this is #%llu here)",
               peer, static_cast<unsigned long long>(mark - 1), seq);
    started = buf;
  }
  // A call in rounds runs them all in one launch (Executor::runRounds): past the first, say which.
  char round[32] = "";
  if (status.round > 0) snprintf(round, sizeof(round), ", round %u", static_cast<unsigned>(status.round));
  return Status::error(code, "rank %d waiting on rank %d at step %d (channel %d%s) of %s #%llu %s%s", rank, peer,
                       static_cast<int>(status.step), static_cast<int>(status.channel), round,
                       launches.name(status.seq).c_str(), seq, what.c_str(), started.c_str());
}

namespace {

Status kernelSwitch(const char* name, bool* on) {
  bool bad = false;
  const int64_t v = env::getInt(name, 0, &bad);
  *on = !bad && v == 1;
  if (bad || (v != 0 && v != 1))
    return Status::error(collieInvalidArgument, "%s must be 0 or 1, not \"%s\"", name,
                         env::get(name).value_or("").c_str());
  return Status();
}

}  // namespace

Status readKernelSwitches(KernelSwitches* out) {
  COLLIE_RETURN_IF_ERROR(kernelSwitch("COLLIE_KERNEL_TIMING", &out->timing));
  COLLIE_RETURN_IF_ERROR(kernelSwitch("COLLIE_DEV_SYSTEM_SCOPE", &out->systemScope));
  COLLIE_RETURN_IF_ERROR(kernelSwitch("COLLIE_DEV_LL_SEPARATE_POSTS", &out->separatePosts));
  return kernelSwitch("COLLIE_DEV_SYSTEM_FENCE", &out->systemFence);
}

void reportKernelPhases(int rank, const uint64_t* sums) {
  const uint64_t blocks = sums[kPhaseBlocks];
  if (blocks == 0) {
    COLLIE_WARN("rank %d: kernel timing (COLLIE_KERNEL_TIMING=1): no block ran to the end", rank);
    return;
  }
  const auto us = [&](int phase) { return static_cast<double>(sums[phase]) / static_cast<double>(blocks) / 1e3; };
  // WARN, the default level: whoever set the variable wants to see it.
  // Step by step: "step 0 3.10 (0.40 waiting), step 1 ...", the last bucket with every later step.
  std::string bySteps;
  for (int k = 0; k < kTimedSteps; ++k) {
    if (sums[kPhaseStepTime + k] == 0) continue;
    char part[96];
    snprintf(part, sizeof(part), "%sstep %d%s %.2f (%.2f waiting)", bySteps.empty() ? "" : ", ", k,
             k == kTimedSteps - 1 ? " and later" : "", us(kPhaseStepTime + k), us(kPhaseStepWait + k));
    bySteps += part;
  }
  COLLIE_WARN(
      "rank %d: kernel timing (COLLIE_KERNEL_TIMING=1), mean per block over %llu blocks that ran to the end: "
      "setup %.2f us, steps %.2f us (%.2f us of it waiting for peers; in the primitives: posting %.2f, taking "
      "%.2f with its waiting, moving %.2f), drain %.2f us, store %.2f us; by step, us: %s",
      rank, static_cast<unsigned long long>(blocks), us(kPhaseSetup), us(kPhaseSteps), us(kPhaseWaiting),
      us(kPhasePost), us(kPhaseTake), us(kPhaseMoves), us(kPhaseDrain), us(kPhaseStore),
      bySteps.empty() ? "none" : bySteps.c_str());
}

}  // namespace collie
