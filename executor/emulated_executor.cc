#include "executor/emulated_executor.h"

#include <cstring>
#include <utility>

#include "executor/remote_proxy.h"

namespace collie {

EmulatedExecutor::EmulatedExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows,
                                   double timeoutSec, int threadsPerBlock, KernelSwitches switches)
    : launcher_(static_cast<int>(layout.nchannels), threadsPerBlock) {
  const size_t n = windows.size();
  uint8_t* const mine = windows[static_cast<size_t>(rank)];
  windows_ = std::move(windows);
  windows_.resize(2 * n, mine);  // then the inboxes: every peer's slices land in our window
  counters_.assign(3 * static_cast<size_t>(layout.nchannels) * n, 0);
  tables_.rank = rank;
  tables_.layout = layout;
  tables_.windows = windows_.data();
  tables_.inboxes = windows_.data() + n;
  tables_.counters = counters_.data();
  tables_.failed = &failed_;
  tables_.status = &status_;
  tables_.timeoutSec = timeoutSec;
  tables_.systemFence = switches.systemFence;
  tables_.systemScope = switches.systemScope;
  tables_.separatePosts = switches.separatePosts;
  if (switches.timing) {
    phaseNs_.assign(kPhaseWords, 0);
    tables_.phaseNs = phaseNs_.data();
  }
}

EmulatedExecutor::~EmulatedExecutor() {
  if (!phaseNs_.empty()) reportKernelPhases(tables_.rank, phaseNs_.data());
}

void EmulatedExecutor::setInProcessPeers(const std::vector<bool>& inProcess, int64_t minBytes) {
  setInPlacePeers(&tables_, inProcess, minBytes);
}

void EmulatedExecutor::attachProxy(const RemoteProxy& proxy) {
  const size_t n = windows_.size() / 2;
  for (size_t r = 0; r < n; ++r) {
    if (!proxy.remote(static_cast<int>(r))) continue;
    windows_[r] = proxy.outbox(static_cast<int>(r));
    windows_[n + r] = proxy.inbox();
  }
  tables_.sliceBytes = proxy.sliceBytes();
  tables_.lost = proxy.lost();
  proxy_ = &proxy;
}

Status EmulatedExecutor::run(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  RoundPlan plan;
  plan.last = work;
  return runRounds(plan, args);
}

Status EmulatedExecutor::runRounds(const RoundPlan& plan, ExecArgs args) {
  std::lock_guard<std::mutex> lock(mu_);
  COLLIE_RETURN_IF_ERROR(refuseDirectSteps(plan, "host (the kernels emulated)"));
  // As on the GPU, a communicator whose launch failed is broken: report it again.
  COLLIE_RETURN_IF_ERROR(asyncStatus());
  KernelArgs a;
  bool empty = true;
  COLLIE_RETURN_IF_ERROR(planLaunch(plan, args, tables_, this, &a, &empty));
  if (empty) return Status();
  launches_.record(args.seq, *plan.last[0].program, args);
  const int rc = emu::launchProgram(a, args.type, args.op, &launcher_);
  if (rc != 0) return Status::error(static_cast<collieResult_t>(rc), "emulated launch of type %d failed", args.type);
  COLLIE_RETURN_IF_ERROR(asyncStatus());
  return checkDrained();
}

// Checked after every launch that succeeded, so that a drain that lets a launch end early fails the suite at once.
// Otherwise it would only show as a rare overwrite, when a later launch takes a slot its peer has not read yet.
Status EmulatedExecutor::checkDrained() const {
  const WindowLayout& l = tables_.layout;
  const size_t n = l.nranks;
  for (uint32_t c = 0; c < l.nchannels; ++c) {
    for (size_t q = 0; q < n; ++q) {
      const uint64_t posted = counters_[c * n + q];  // posted[c][q], stored by the block at the end of the launch
      const uint64_t credit = __atomic_load_n(
          reinterpret_cast<const uint64_t*>(tables_.inboxes[q] + l.creditOffset(c, static_cast<int>(q))),
          __ATOMIC_ACQUIRE);
      if (credit < posted)
        return Status::error(collieInternalError,
                             "rank %d: an emulated launch ended with %llu slices to rank %zu on channel %u posted "
                             "and only %llu credited back: its drain returned early",
                             tables_.rank, static_cast<unsigned long long>(posted), q, c,
                             static_cast<unsigned long long>(credit));
    }
  }
  return Status();
}

Status EmulatedExecutor::localCopy(void* dst, const void* src, size_t bytes, collieStream_t) {
  if (dst != src) memmove(dst, src, bytes);
  return Status();
}

void EmulatedExecutor::abort() { __atomic_store_n(&status_.abort, 1u, __ATOMIC_RELAXED); }

Status EmulatedExecutor::asyncStatus() const {
  return launchFailure(status_, tables_.rank, "in the emulated kernel", launches_, proxy_);
}

Status EmulatedExecutor::program(const Program& program, const Step** out) {
  // The launch is over before run() returns, and the program outlives the call.
  *out = program.steps.data();
  return Status();
}

Status EmulatedExecutor::scratch(size_t bytes, void** out) {
  if (bytes > scratch_.size() * sizeof(uint64_t)) scratch_.resize((bytes + 7) / 8);
  *out = scratch_.empty() ? nullptr : scratch_.data();
  return Status();
}

}  // namespace collie
