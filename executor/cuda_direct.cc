// The CUDA executor's direct calls (cuda_executor.h, "Direct algorithms"): which direct kernel runs a direct
// algorithm's program, and its arguments. The launch itself, its ordering and its failure report are runRounds'
// and asyncStatus', as for the program kernel.
#include <cstddef>
#include <cstring>
#include <string>

#include "executor/cuda_executor.h"

namespace collie {

namespace {

// The direct kernel written for a direct algorithm; false where the CUDA backend has none.
bool kernelFor(Collective c, const std::string& algorithm, DirectKind* kind) {
  struct Entry {
    Collective c;
    const char* algorithm;
    DirectKind kind;
  };
  static const Entry kKernels[] = {
      {Collective::kAllReduce, "direct_oneshot", DirectKind::kOneShotAllReduce},
      {Collective::kAllReduce, "direct_twoshot", DirectKind::kTwoShotAllReduce},
      {Collective::kReduceScatter, "direct", DirectKind::kReduceScatter},
      {Collective::kAllGather, "direct", DirectKind::kAllGather},
      {Collective::kAllToAll, "direct", DirectKind::kAllToAll},
      {Collective::kBroadcast, "direct", DirectKind::kBroadcast},
  };
  for (const Entry& e : kKernels)
    if (e.c == c && algorithm == e.algorithm) {
      *kind = e.kind;
      return true;
    }
  return false;
}

}  // namespace

Status CudaExecutor::runsDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                                ReduceOp op) const {
  const char* coll = collectiveName(c);
  DirectKind kind;
  if (!kernelFor(c, algorithm, &kind))
    return Status::error(collieInvalidUsage,
                         "%s %s has no direct kernel on the cuda backend yet (allreduce direct_oneshot and "
                         "direct_twoshot, and reducescatter, allgather, alltoall and broadcast direct have): choose "
                         "another %s algorithm in COLLIE_ALGO",
                         coll, algorithm.c_str(), coll);
  if (layout_.directSlotLines == 0)
    return Status::error(collieInvalidUsage,
                         "%s %s needs every rank's device window mapped (ranks on one host, reaching each other by "
                         "P2P) and 2 to %d ranks; this communicator of %u ranks has not: choose another %s algorithm "
                         "in COLLIE_ALGO",
                         coll, algorithm.c_str(), kDirectMaxRanks, layout_.nranks, coll);
  const uint64_t bytes = count * typeSize(type);
  if (kind != DirectKind::kOneShotAllReduce) {
    // These kernels load and store peers' buffers at the addresses the peers give (direct_kernels.h).
    if (!directGpuScope_)
      return Status::error(collieInvalidUsage,
                           "%s %s needs every rank to be a thread of this process on this GPU (peers' buffers in "
                           "other processes or on other GPUs are not mapped yet): choose another %s algorithm in "
                           "COLLIE_ALGO",
                           coll, algorithm.c_str(), coll);
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

Status CudaExecutor::directKindOf(const RoundPlan& plan, const ExecArgs& args, DirectKind* kind) const {
  const Program& p = *plan.last[0].program;
  // core hands a direct algorithm's call over whole: one program, one round, one channel (core/collectives.cc).
  if (plan.rounds != 1 || plan.last.size() != 1 || !plan.full.empty() || plan.last[0].offset != 0)
    return Status::error(collieInternalError, "%s %s came cut into rounds or channels", collectiveName(p.collective),
                         p.algorithm.c_str());
  COLLIE_RETURN_IF_ERROR(runsDirect(p.collective, p.algorithm, p.count, args.type, args.op));
  kernelFor(p.collective, p.algorithm, kind);
  return Status();
}

Status CudaExecutor::planDirect(const Program& program, DirectKind kind, const ExecArgs& args, DirectArgs* d,
                                int* blocks) {
  const int n = static_cast<int>(layout_.nranks);
  d->rank = rank_;
  d->nranks = n;
  d->counter = directCounter_;
  d->slotLines = layout_.directSlotLines;
  d->count = program.count;
  d->root = program.root;
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
