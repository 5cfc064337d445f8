// One launch serving every rank of a direct_oneshot allreduce (COLLIE_DIRECT_ONE_LAUNCH=1), where every rank is a
// thread of this process on this GPU: rank 0 launches one grid that runs every rank's one-shot with that rank's own
// arguments (kernels/direct_kernels.h, DirectGroupArgs), in place of a launch per rank. What it may save is what n
// launches cost beyond one: the host's time in each, and the skew between the ranks' kernels, whose blocks wait for
// each other; what it costs is a meeting of the ranks on the host and events between their streams. Only figures
// from a GPU decide between the two, so it is a switch, off by default.
//
// The ranks' enqueues meet twice on the process's board (executor/peer_board.h):
//   1. each rank but 0 records its ready event where its stream reached the call, and posts it with its kernel
//      arguments and blocks; rank 0's stream waits for every ready event, then rank 0 launches the group's grid and
//      records its done event;
//   2. rank 0 posts its done event (none where its launch failed); every other rank's stream waits for it, so
//      that what each rank queues next comes after the whole grid, as after its own launch.
// A stream being captured into a CUDA graph takes no part: where any rank's is, every rank launches its own kernel
// (the meetings still happen, in step), since a replay would not repeat the meetings and the events between
// streams would tie the ranks' graphs together. Calls that differ are refused on every rank before any launch, as
// direct_ce's are.
#include <cuda_runtime.h>

#include "base/cuda_check.h"
#include "executor/cuda_executor.h"
#include "executor/peer_board.h"

namespace collie {

void CudaExecutor::setOneLaunch(bool on) { oneLaunch_ = on && board_ != nullptr && directGpuScope_; }

uint64_t CudaExecutor::oneLaunchCalls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return oneLaunchCalls_;
}

Status CudaExecutor::oneLaunchCall(const DirectArgs& d, int blocks, const ExecArgs& args, bool captured,
                                   double* waitSecs) {
  constexpr const char* kWhat = "allreduce direct_oneshot (COLLIE_DIRECT_ONE_LAUNCH=1)";
  const int n = static_cast<int>(layout_.nranks), me = rank_;
  PeerBoard::Post mine;
  mine.signature = args.callSignature;
  mine.direct = d;
  mine.blocks = blocks;
  mine.captured = captured;
  const bool leader = me == 0;
  COLLIE_RETURN_IF_ERROR(
      meetPeers(PeerBoard::kReady, leader || captured ? nullptr : board_->readyEvent(), args, kWhat, &mine, waitSecs));
  // One grid sized by one rank's call would run a peer's body over buffers sized by another: every rank compares
  // every peer, so where two calls differ every rank refuses, before any launch.
  COLLIE_RETURN_IF_ERROR(postsAgree(args, kWhat));
  bool anyCaptured = false;
  for (int q = 0; q < n; ++q) anyCaptured = anyCaptured || posts_[static_cast<size_t>(q)].captured;
  Status launched;
  void* done = nullptr;
  if (anyCaptured) {
    launched = cudaStatus(static_cast<cudaError_t>(launchDirect(d, DirectKind::kOneShotAllReduce, args.type, args.op,
                                                                blocks, kDirectMaxThreads, args.stream)),
                          "launching the direct kernel");
  } else if (leader) {
    DirectGroupArgs g;
    g.nranks = n;
    g.blocks = blocks;
    for (int q = 0; q < n && launched.ok(); ++q) {
      g.args[q] = posts_[static_cast<size_t>(q)].direct;
      if (q != me) launched = waitForPeer(posts_[static_cast<size_t>(q)], args, kWhat);
    }
    if (launched.ok())
      launched =
          cudaStatus(static_cast<cudaError_t>(launchDirectGroup(g, args.type, args.op, kDirectMaxThreads, args.stream)),
                     "launching one direct kernel for every rank");
    if (launched.ok()) done = board_->doneEvent();
  }
  // The second meeting whatever happened above: a rank rewrites its post only after every peer has met it again.
  const Status met = meetPeers(PeerBoard::kDone, done, args, kWhat, &mine, waitSecs);
  COLLIE_RETURN_IF_ERROR(launched);
  COLLIE_RETURN_IF_ERROR(met);
  if (anyCaptured) return Status();
  if (!leader) {
    const PeerBoard::Post& root = posts_[0];
    if (root.event == nullptr)
      return Status::error(collieRemoteError,
                           "rank %d: rank 0 could not launch the kernel serving every rank of %s collective #%llu "
                           "(rank 0's error says why)",
                           rank_, kWhat, static_cast<unsigned long long>(args.collectiveSeq));
    COLLIE_RETURN_IF_ERROR(waitForPeer(root, args, kWhat));
  }
  ++oneLaunchCalls_;
  return Status();
}

}  // namespace collie
