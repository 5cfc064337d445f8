// The CUDA executor's direct calls (cuda_executor.h, "Direct algorithms"): which direct kernel runs a direct
// algorithm's program, and its arguments. The launch itself, its ordering and its failure report are runRounds'
// and asyncStatus', as for the program kernel.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "base/log.h"
#include "executor/cuda_executor.h"

namespace collie {

namespace {

// The direct kernel written for a direct algorithm, and whether the copy engine moves it instead (*copyEngine,
// when given: the same moves by cudaMemcpyAsync, cuda_copy_engine.cc); false where the CUDA backend has neither.
bool kernelFor(Collective c, const std::string& algorithm, DirectKind* kind, bool* copyEngine = nullptr) {
  struct Entry {
    Collective c;
    const char* algorithm;
    DirectKind kind;
    bool copyEngine = false;
  };
  static const Entry kKernels[] = {
      {Collective::kAllReduce, "direct_oneshot", DirectKind::kOneShotAllReduce},
      {Collective::kAllReduce, "direct_twoshot", DirectKind::kTwoShotAllReduce},
      {Collective::kReduceScatter, "direct", DirectKind::kReduceScatter},
      {Collective::kAllGather, "direct", DirectKind::kAllGather},
      {Collective::kAllToAll, "direct", DirectKind::kAllToAll},
      {Collective::kBroadcast, "direct", DirectKind::kBroadcast},
      {Collective::kAllToAllv, "direct", DirectKind::kAllToAllv},
      {Collective::kAllGather, "direct_ce", DirectKind::kAllGather, true},
      {Collective::kAllToAll, "direct_ce", DirectKind::kAllToAll, true},
      {Collective::kBroadcast, "direct_ce", DirectKind::kBroadcast, true},
      {Collective::kAllToAllv, "direct_ce", DirectKind::kAllToAllv, true},
  };
  for (const Entry& e : kKernels)
    if (e.c == c && algorithm == e.algorithm) {
      *kind = e.kind;
      if (copyEngine != nullptr) *copyEngine = e.copyEngine;
      return true;
    }
  return false;
}

// A direct program's extents, all-to-all-v's (bufferCounts: its blocks' reach), and the count its kernel takes
// given them: all-to-all-v's larger extent (DirectArgs::count), the program's count for the others.
VExtents extentsOf(const Program& p) {
  VExtents v;
  if (p.collective == Collective::kAllToAllv) bufferCounts(p, &v.input, &v.output);
  return v;
}
uint64_t directCountOf(const Program& p, const VExtents& v) {
  return p.collective == Collective::kAllToAllv ? std::max(v.input, v.output) : p.count;
}

}  // namespace

Status CudaExecutor::runsDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                                ReduceOp op) const {
  const char* coll = collectiveName(c);
  DirectKind kind;
  bool copyEngine = false;
  if (!kernelFor(c, algorithm, &kind, &copyEngine))
    return Status::error(collieInvalidUsage,
                         "%s %s has no direct kernel on the cuda backend yet (allreduce direct_oneshot and "
                         "direct_twoshot, reducescatter, allgather, alltoall, alltoallv and broadcast direct, and "
                         "allgather, alltoall, alltoallv and broadcast direct_ce have): choose another %s algorithm "
                         "in COLLIE_ALGO",
                         coll, algorithm.c_str(), coll);
  if (layout_.directSlotLines == 0)
    return Status::error(collieInvalidUsage,
                         "%s %s needs every rank's device window mapped (ranks on one host, reaching each other by "
                         "P2P) and 2 to %d ranks; this communicator of %u ranks has not: choose another %s algorithm "
                         "in COLLIE_ALGO",
                         coll, algorithm.c_str(), kDirectMaxRanks, layout_.nranks, coll);
  if (copyEngine) {
    // Copies take their addresses on the host, where only threads of one process know each other's buffers, and
    // any count (no kernel's grid or slots bound them).
    if (board_ == nullptr)
      return Status::error(collieInvalidUsage,
                           "%s direct_ce needs every rank a thread of this process (its copies take their peers' "
                           "buffers on the host); ranks in other processes reach them only from a kernel: choose "
                           "%s direct or another %s algorithm in COLLIE_ALGO",
                           coll, coll, coll);
    return Status();
  }
  const uint64_t bytes = count * typeSize(type);
  if (kind != DirectKind::kOneShotAllReduce) {
    // These kernels load and store peers' buffers where the peers announce them (direct_kernels.h): as they are
    // from threads of this process, through windows or the staging buffer from other processes (placeDirectBuffers).
    const uint64_t most = directMaxCount(kind, typeSize(type), static_cast<int>(layout_.nranks));
    if (count > most)
      return Status::error(collieInvalidUsage,
                           "%s %s takes at most %llu bytes per rank in one launch, not %llu: choose another %s "
                           "algorithm in COLLIE_ALGO for larger calls",
                           coll, algorithm.c_str(), static_cast<unsigned long long>(most * typeSize(type)),
                           static_cast<unsigned long long>(bytes), coll);
  } else if (directLines(bytes) > layout_.directSlotLines)
    return Status::error(collieInvalidUsage,
                         "%s %s takes at most %llu bytes per rank (its one-shot slots), not %llu: choose another %s "
                         "algorithm in COLLIE_ALGO for larger calls",
                         coll, algorithm.c_str(),
                         static_cast<unsigned long long>(uint64_t{layout_.directSlotLines} * kDirectLinePayload),
                         static_cast<unsigned long long>(bytes), coll);
  if (!hasDirectKernel(kind, type, op, static_cast<int>(layout_.nranks)))
    return Status::error(collieInvalidUsage, "%s %s has no kernel for %s on %u ranks", coll, algorithm.c_str(),
                         typeName(type), layout_.nranks);
  return Status();
}

Status CudaExecutor::directKindOf(const RoundPlan& plan, const ExecArgs& args, DirectKind* kind,
                                  bool* copyEngine) const {
  const Program& p = *plan.last[0].program;
  // core hands a direct algorithm's call over whole: one program, one round, one channel (core/collectives.cc).
  if (plan.rounds != 1 || plan.last.size() != 1 || !plan.full.empty() || plan.last[0].offset != 0)
    return Status::error(collieInternalError, "%s %s came cut into rounds or channels", collectiveName(p.collective),
                         p.algorithm.c_str());
  COLLIE_RETURN_IF_ERROR(runsDirect(p.collective, p.algorithm, directCountOf(p, extentsOf(p)), args.type, args.op));
  kernelFor(p.collective, p.algorithm, kind, copyEngine);
  return Status();
}

Status CudaExecutor::mapWindow(int number, const void* base, uint64_t bytes, const std::vector<PeerRange>& ranges) {
  if (directMaps_ == nullptr) return Status();  // every peer a thread of this process: addresses are as they are
  if (number < 0 || number >= kDirectMaxWindows || ranges.size() != layout_.nranks)
    return Status::error(collieInternalError, "window %d cannot be mapped", number);
  DirectPeerMap entries[kDirectMaxRanks] = {};
  for (uint32_t r = 0; r < layout_.nranks; ++r)
    if ((directRemotePeers_ >> r & 1) != 0) entries[r] = DirectPeerMap{ranges[r].remoteBase, ranges[r].localBase};
  // Written (and waited for) before any call can name the window: registration returns only after.
  COLLIE_RETURN_IF_ERROR(pool_->copy(directMaps_ + static_cast<size_t>(number) * kDirectMaxRanks, entries,
                                     sizeof(entries), "writing the table of peers' windows"));
  std::lock_guard<std::mutex> lock(mu_);
  ownWindows_.push_back(OwnWindow{number, reinterpret_cast<uintptr_t>(base), bytes});
  return Status();
}

Status CudaExecutor::unmapWindow(int number) {
  if (directMaps_ == nullptr) return Status();
  // Calls enqueued before may still address the window: they finish first. (Their own failure, if any, is theirs
  // to report; the window goes all the same.)
  (void)synchronize();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = ownWindows_.begin(); it != ownWindows_.end(); ++it)
      if (it->number == number) {
        ownWindows_.erase(it);
        break;
      }
  }
  if (number < 0 || number >= kDirectMaxWindows) return Status();
  return pool_->zero(directMaps_ + static_cast<size_t>(number) * kDirectMaxRanks,
                     sizeof(DirectPeerMap) * kDirectMaxRanks, "clearing a window from the table of peers' windows");
}

Status CudaExecutor::checkDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                                 ReduceOp op, const void* input, const void* output, bool scaled, collieStream_t stream,
                                 VExtents v) {
  std::lock_guard<std::mutex> lock(mu_);
  COLLIE_RETURN_IF_ERROR(runsDirect(c, algorithm, count, type, op));
  DirectKind kind = DirectKind::kOneShotAllReduce;
  bool copyEngine = false;
  kernelFor(c, algorithm, &kind, &copyEngine);
  if (copyEngine) {
    // Its copies meet the peers' parts on the host as the call is queued (cuda_copy_engine.cc), which a replay
    // would not repeat: it would copy between the captured call's buffers, unordered with the peers' work.
    bool captured = false;
    DeviceGuard guard(device_);
    COLLIE_RETURN_IF_ERROR(streamCaptured(static_cast<cudaStream_t>(stream), &captured));
    if (captured)
      return Status::error(collieInvalidUsage,
                           "%s direct_ce cannot be captured into a CUDA graph (its copies meet the peers' parts on "
                           "the host when the call is queued, which a replay does not repeat): choose %s direct in "
                           "COLLIE_ALGO",
                           collectiveName(c), collectiveName(c));
    return Status();
  }
  DirectArgs d;
  StagedCopies staged;
  // The one-shot kernel scales its own input (DirectArgs::premul); for the others runRounds scales into a buffer
  // of its own.
  const bool ownInput = scaled && kind != DirectKind::kOneShotAllReduce;
  return placeDirectBuffers(kind, c, count, v, type, input, output, ownInput, &d, &staged);
}

bool CudaExecutor::directFits(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                              ReduceOp op) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!runsDirect(c, algorithm, count, type, op).ok()) return false;
  DirectKind kind = DirectKind::kOneShotAllReduce;
  kernelFor(c, algorithm, &kind);
  // Ranks that are threads of this process reach each other's buffers wherever they lie, and the one-shot kernel
  // reaches peers only through their scratch.
  if (directRemotePeers_ == 0 || kind == DirectKind::kOneShotAllReduce) return true;
  // Otherwise a rank may stage its input and output, whether or not they lie in windows on its peers: the fit
  // must hold for what the largest announcer (a broadcast's root) stages.
  uint64_t inBytes = 0, outBytes = 0;
  directFootprint(kind, count, VExtents{}, type, true, &inBytes, &outBytes);
  const uint64_t half = stagingHalf();
  return kind != DirectKind::kAllToAllv && inBytes <= half && outBytes <= half;
}

void CudaExecutor::directFootprint(DirectKind kind, uint64_t count, VExtents v, collieDataType_t type, bool readsInput,
                                   uint64_t* inBytes, uint64_t* outBytes) const {
  if (kind == DirectKind::kAllToAllv) {
    *inBytes = v.input * typeSize(type);
    *outBytes = v.output * typeSize(type);
    return;
  }
  const uint64_t n = layout_.nranks, block = count * typeSize(type);
  const bool nIn = kind == DirectKind::kReduceScatter || kind == DirectKind::kAllToAll;
  const bool nOut = kind == DirectKind::kAllGather || kind == DirectKind::kAllToAll;
  *inBytes = readsInput ? (nIn ? n : 1) * block : 0;
  *outBytes = (nOut ? n : 1) * block;
}

const CudaExecutor::OwnWindow* CudaExecutor::stagingWindow() const {
  for (const OwnWindow& w : ownWindows_)
    if (w.number == 0) return &w;
  return nullptr;
}

uint64_t CudaExecutor::stagingHalf() const {
  // The staging buffer's halves: the input's, then the output's (on a 256-byte boundary).
  const OwnWindow* stage = stagingWindow();
  return stage != nullptr ? stage->bytes / 2 & ~uint64_t{255} : 0;
}

Status CudaExecutor::placeDirectBuffers(DirectKind kind, Collective c, uint64_t count, VExtents v,
                                        collieDataType_t type, const void* input, const void* output, bool ownInput,
                                        DirectArgs* d, StagedCopies* staged) const {
  if (directRemotePeers_ == 0 || kind == DirectKind::kOneShotAllReduce) return Status();
  d->remotePeers = directRemotePeers_;
  d->peerMaps = directMaps_;
  // A broadcast's non-root reads no input of its own: it announces its output in its place.
  const bool readsInput = kind != DirectKind::kBroadcast || input != nullptr;
  uint64_t inBytes = 0, outBytes = 0;
  directFootprint(kind, count, v, type, readsInput, &inBytes, &outBytes);
  const uint64_t half = stagingHalf();
  const OwnWindow* stage = stagingWindow();
  const uintptr_t stageBase = stage != nullptr ? stage->base : 0;
  auto place = [&](const void* p, uint64_t bytes, uint64_t stagedAt, bool own, const char* what, uint32_t* window,
                   void** at) -> Status {
    *window = 0;
    if (bytes == 0) {
      *at = nullptr;  // a call of nothing: no peer reads or writes it
      return Status();
    }
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (const OwnWindow& w : ownWindows_)
      if (!own && w.number != 0 && a >= w.base && a - w.base <= w.bytes && bytes <= w.bytes - (a - w.base)) {
        *window = static_cast<uint32_t>(w.number);
        *at = const_cast<void*>(p);
        return Status();
      }
    if (bytes > half)
      return Status::error(collieInvalidUsage,
                           "rank %d: %s direct across processes: its %s (%llu bytes)%s lies outside every window "
                           "registered with collieCommWindowRegister, and the staging buffer takes at most %llu "
                           "(COLLIE_DIRECT_STAGING holds the input and the output): %sraise COLLIE_DIRECT_STAGING "
                           "or choose another algorithm in COLLIE_ALGO",
                           rank_, collectiveName(c), what, static_cast<unsigned long long>(bytes),
                           own ? ", a pre-multiplied sum's copy that is always staged," : "",
                           static_cast<unsigned long long>(half), own ? "" : "register the buffers on every rank, ");
    *at = reinterpret_cast<void*>(stageBase + stagedAt);
    return Status();
  };
  void* in = nullptr;
  void* out = nullptr;
  COLLIE_RETURN_IF_ERROR(place(output, outBytes, half, false, "output", &d->outWindow, &out));
  if (readsInput) {
    COLLIE_RETURN_IF_ERROR(place(input, inBytes, 0, ownInput, ownInput ? "scaled input" : "input", &d->inWindow, &in));
  } else {
    in = out;
    d->inWindow = d->outWindow;
  }
  if (readsInput && in != input) *staged = StagedCopies{input, in, inBytes, nullptr, nullptr, 0};
  if (out != output) {
    staged->out = const_cast<void*>(output);
    staged->stagedOut = out;
    staged->outBytes = outBytes;
  }
  d->input = in;
  d->output = out;
  return Status();
}

Status CudaExecutor::planDirect(const Program& program, DirectKind kind, const ExecArgs& args, DirectArgs* d,
                                int* blocks, StagedCopies* staged) {
  const int n = static_cast<int>(layout_.nranks);
  d->rank = rank_;
  d->nranks = n;
  d->counter = directCounter_;
  d->slotLines = layout_.directSlotLines;
  const VExtents extents = extentsOf(program);
  d->count = directCountOf(program, extents);
  d->root = program.root;
  if (kind == DirectKind::kAllToAllv) {
    // Each fits 32 bits: runsDirect bounds the extents by kDirectMaxBytes.
    for (int p = 0; p < n; ++p) {
      const size_t up = static_cast<size_t>(p);
      d->sendDispl[p] = static_cast<uint32_t>(program.sendCounts[up] ? program.sendDispls[up] : 0);
      d->sendCount[p] = static_cast<uint32_t>(program.sendCounts[up]);
      d->recvDispl[p] = static_cast<uint32_t>(program.recvCounts[up] ? program.recvDispls[up] : 0);
      d->recvCount[p] = static_cast<uint32_t>(program.recvCounts[up]);
    }
  }
  // A broadcast's input is the root's only; a rank without one publishes its output in its place (never read).
  d->input = args.input != nullptr ? args.input : args.output;
  d->output = args.output;
  for (int p = 0; p < n; ++p) {
    uint8_t* window = windows_[static_cast<size_t>(p)];
    d->scratch[p] = window + layout_.directScratchOffset();
    d->barriers[p] = window + layout_.directBarriersOffset();
  }
  // The device's view of the status block's abort word, which abort() raises.
  d->abortFlag = reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(tables_.status) +
                                                   offsetof(DeviceStatus, abort));
  d->error = directErrorDevice_;
  d->timeoutNs = static_cast<uint64_t>(tables_.timeoutSec * 1e9);
  d->divisor = args.divisor;
  d->gpuScope = directGpuScope_ ? 1 : 0;
  d->timing = directTiming_;
  // Without the call's number: a replay of a captured call is a call like any other (the device numbers it).
  d->signature = args.callSignature != 0 ? launchSignature(args.callSignature) : 0;
  // A scaled input (ExecArgs::scale) is already the executor's own buffer, in no window.
  COLLIE_RETURN_IF_ERROR(placeDirectBuffers(kind, program.collective, program.count, extents, args.type, args.input,
                                            args.output, false, d, staged));
  if (kind == DirectKind::kAllToAllv && staged->outBytes > 0) {
    for (int p = 0; p < n; ++p) {
      const size_t up = static_cast<size_t>(p);
      if (program.recvCounts[up] == 0) continue;
      staged->blockAt[staged->blocks] = program.recvDispls[up] * typeSize(args.type);
      staged->blockBytes[staged->blocks++] = program.recvCounts[up] * typeSize(args.type);
    }
  }
  if ((staged->inBytes > 0 || staged->outBytes > 0) && !stagedSaid_) {
    stagedSaid_ = true;
    COLLIE_INFO(
        "rank %d: a direct call's buffer lies outside every window its peer processes have mapped: it is copied "
        "through the communicator's staging buffer (one copy on this GPU); collieCommWindowRegister saves it",
        rank_);
  }
  if (args.scale.active && kind == DirectKind::kOneShotAllReduce) {
    d->premul = 1;
    d->scalarDevice = args.scale.deviceScalar;
    memcpy(&d->scalarBits, args.scale.hostScalar, sizeof(d->scalarBits));
  }
  const uint64_t bytes = program.count * typeSize(args.type);
  uint64_t want = 1;
  const int most = directFit_[static_cast<int>(kind)][args.type];
  if (kind == DirectKind::kOneShotAllReduce) {
    // One line per thread: a one-shot call of 64 KiB is 8192 lines, 16 blocks of 512 threads.
    want = (directLines(bytes) + kDirectMaxThreads - 1) / kDirectMaxThreads;
  } else if (kind == DirectKind::kAllToAllv) {
    // Every block that fits: the ranks' grids must match (block b meets block b of each peer), and a grid sized by
    // this rank's own counts would differ from its peers'.
    want = static_cast<uint64_t>(most);
  } else {
    // A block per 64 KiB each rank loads (two-shot: its chunk of every input, count elements in all; reduce-scatter:
    // block r of every input; allgather: its input, stored into every output; all-to-all: every block of its input;
    // broadcast: its chunk of the root's input, stored into every output), up to what fits at once. A first choice:
    // no GPU has measured another yet.
    const uint64_t moved = directHoldsBlocks(kind) ? bytes * layout_.nranks : bytes;
    want = (moved + (64 << 10) - 1) >> 16;
  }
  *blocks = static_cast<int>(want < 1 ? 1 : want < static_cast<uint64_t>(most) ? want : most);
  return Status();
}

}  // namespace collie
