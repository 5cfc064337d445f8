// direct_ce (cuda_executor.h, "Direct algorithms"): the direct all-to-all(-v), allgather and broadcast moved by the
// copy engine, a cudaMemcpyAsync per peer on the call's stream, where every rank is a thread of this process. The
// copies move what the direct program moves: rank r pushes block q of its input into block r of rank q's output
// (all-to-all; all-to-all-v at q's displacement for r, from q's post) and its input into block r of every output
// (allgather); every rank pulls the root's input into its own output (broadcast), so that a broadcast's copies run
// on every rank's stream at once, as the kernel spreads them over every rank's grid.
//
// No kernel waits for peers, so the host orders the copies with events, and the ranks' enqueues meet twice
// (executor/peer_board.h):
//   1. each records its ready event where its stream reached the call, and posts it with its buffers; once every
//      rank has, its stream waits for the ready events of the peers whose buffers it touches (an output is free,
//      an input written);
//   2. after its copies, each records its done event and posts it; once every rank has, its stream waits for
//      every peer's done event (its output is complete, and its input no longer read).
// The copy engines run beside the SMs, so these calls leave the SMs to other work; the cost is two meetings on the
// host per call, and no capture into a CUDA graph (checkDirect refuses it).
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/cuda_check.h"
#include "executor/cuda_executor.h"
#include "executor/peer_board.h"
#include "transport/cuda_ipc/device_windows.h"

namespace collie {

Status CudaExecutor::openPeerBoard(const DeviceWindows& windows) {
  std::vector<std::pair<int, const void*>> others;
  for (int r = 0; r < static_cast<int>(layout_.nranks); ++r)
    if (r != rank_) others.emplace_back(r, windows.window(r));
  cudaEvent_t ready = nullptr, done = nullptr;
  Status made = cudaStatus(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreate");
  if (made.ok()) made = cudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
  if (!made.ok()) {
    if (ready != nullptr) (void)cudaEventDestroy(ready);
    return made;
  }
  board_ = std::make_unique<PeerBoard>(rank_, windows.window(rank_), std::move(others), ready, done,
                                       [](void* ev) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(ev)); });
  return Status();
}

Status CudaExecutor::meetPeers(PeerBoard::Meeting m, void* event, const ExecArgs& args, const char* what,
                               PeerBoard::Post* mine, double* waitSecs) {
  mine->event = event;
  if (event != nullptr)
    COLLIE_RETURN_IF_ERROR(
        cudaStatus(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(args.stream)),
                   (std::string("cudaEventRecord for a meeting of ") + what + "'s ranks").c_str()));
  const auto start = std::chrono::steady_clock::now();
  Status met = board_->meet(
      args.collectiveSeq, m, *mine, tables_.timeoutSec, [this] { return whyStopWaiting(); }, what, &posts_);
  *waitSecs += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return met;
}

Status CudaExecutor::waitForPeer(const PeerBoard::Post& peer, const ExecArgs& args, const char* what) {
  return cudaStatus(
      cudaStreamWaitEvent(static_cast<cudaStream_t>(args.stream), static_cast<cudaEvent_t>(peer.event), 0),
      (std::string("cudaStreamWaitEvent on a peer's event of ") + what).c_str());
}

Status CudaExecutor::postsAgree(const ExecArgs& args, const char* what) const {
  for (int q = 0; q < static_cast<int>(layout_.nranks); ++q) {
    const uint64_t theirs = posts_[static_cast<size_t>(q)].signature;
    if (theirs != args.callSignature)
      return Status::error(collieInvalidUsage, "%s",
                           callMismatch(rank_, q, theirs, args.callSignature, args.collectiveSeq, what).c_str());
  }
  return Status();
}

namespace {

static_assert(kDirectMaxRanks <= PeerBoard::Post::kMaxRanks, "a post holds every peer's all-to-all-v counts");

// All-to-all-v's posts: OK where every pair's counts agree (what r sends q is what q receives from r), else the
// first pair that does not, as every rank finds it.
Status pairsAgree(const std::vector<PeerBoard::Post>& posts, int n, uint64_t collectiveSeq) {
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q) {
      const uint64_t sent = posts[static_cast<size_t>(r)].sendCount[q];
      const uint64_t got = posts[static_cast<size_t>(q)].recvCount[r];
      if (sent != got)
        return Status::error(collieInvalidUsage,
                             "alltoallv direct_ce collective #%llu: rank %d sends rank %d %llu elements, which "
                             "receives %llu from it: the counts differ (COLLIE_CHECK=1 compares them before each "
                             "call); refused on every rank before any copy",
                             static_cast<unsigned long long>(collectiveSeq), r, q,
                             static_cast<unsigned long long>(sent), static_cast<unsigned long long>(got));
    }
  return Status();
}

}  // namespace

Status CudaExecutor::copyEngineCall(const Program& program, const ExecArgs& args, double* waitSecs) {
  cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
  const int n = static_cast<int>(layout_.nranks), me = rank_;
  const size_t es = typeSize(args.type);
  const size_t bytes = static_cast<size_t>(program.count) * es, stride = static_cast<size_t>(program.stride) * es;
  const Collective c = program.collective;
  PeerBoard::Post mine;
  mine.input = args.input;
  mine.output = args.output;
  mine.signature = args.callSignature;
  if (c == Collective::kAllToAllv)
    for (int q = 0; q < n; ++q) {
      const size_t uq = static_cast<size_t>(q);
      mine.sendCount[q] = program.sendCounts[uq];
      mine.recvCount[q] = program.recvCounts[uq];
      mine.recvDispl[q] = program.recvDispls[uq];
    }
  const std::string name = std::string(collectiveName(c)) + " " + program.algorithm;
  auto waitFor = [&](const PeerBoard::Post& p) { return waitForPeer(p, args, "direct_ce"); };
  const std::vector<PeerBoard::Post>& posts = posts_;  // every rank's, after each meeting
  COLLIE_RETURN_IF_ERROR(meetPeers(PeerBoard::kReady, board_->readyEvent(), args, "direct_ce", &mine, waitSecs));
  // Every rank compares every peer, so where two calls differ every rank refuses, before any copy.
  COLLIE_RETURN_IF_ERROR(postsAgree(args, name.c_str()));
  // All-to-all-v: every rank sees every rank's counts here, so every rank refuses alike where a pair's differ.
  if (c == Collective::kAllToAllv) COLLIE_RETURN_IF_ERROR(pairsAgree(posts, n, args.collectiveSeq));
  if (c == Collective::kBroadcast) {
    const PeerBoard::Post& root = posts[static_cast<size_t>(program.root)];
    if (me != program.root) COLLIE_RETURN_IF_ERROR(waitFor(root));
    if (bytes > 0 && args.output != root.input)
      COLLIE_RETURN_IF_ERROR(
          cudaStatus(cudaMemcpyAsync(args.output, root.input, bytes, cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync of a direct_ce call"));
  }
  // Its own block first, then ranks r+1, r+2, ..., as the direct kernels go, so that the ranks' copies go to
  // different peers at a time.
  const bool v = c == Collective::kAllToAllv;
  for (int k = 0; k < n && c != Collective::kBroadcast && (bytes > 0 || v); ++k) {
    const int q = (me + k) % n;
    const PeerBoard::Post& peer = posts[static_cast<size_t>(q)];
    const uint8_t* src = static_cast<const uint8_t*>(args.input);
    uint8_t* dst = static_cast<uint8_t*>(peer.output);
    size_t len = bytes;
    if (v) {
      const size_t uq = static_cast<size_t>(q), um = static_cast<size_t>(me);
      len = static_cast<size_t>(program.sendCounts[uq]) * es;
      if (len == 0) continue;
      src += static_cast<size_t>(program.sendDispls[uq]) * es;
      dst += static_cast<size_t>(peer.recvDispl[um]) * es;
    } else if (c == Collective::kAllToAll) {
      src += static_cast<size_t>(q) * stride;
      dst += static_cast<size_t>(me) * stride;
    } else if (c == Collective::kAllGather) {
      dst += static_cast<size_t>(me) * stride;
    }
    if (q != me) COLLIE_RETURN_IF_ERROR(waitFor(peer));
    if (dst != src)
      COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, stream),
                                        "cudaMemcpyAsync of a direct_ce call"));
  }
  COLLIE_RETURN_IF_ERROR(meetPeers(PeerBoard::kDone, board_->doneEvent(), args, "direct_ce", &mine, waitSecs));
  for (int q = 0; q < n; ++q)
    if (q != me) COLLIE_RETURN_IF_ERROR(waitFor(posts[static_cast<size_t>(q)]));
  return Status();
}

}  // namespace collie
