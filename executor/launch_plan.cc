#include "executor/launch_plan.h"

#include <algorithm>
#include <cstring>

namespace collie {

Status planLaunch(const std::vector<ChannelWork>& work, const ExecArgs& args, const LaunchTables& tables,
                  LaunchStorage* storage, KernelArgs* a, bool* empty) {
  *empty = true;
  if (work.empty()) return Status();
  const size_t es = typeSize(args.type);
  // The distinct programs (at most kMaxPrograms), inline while they fit.
  const Program* programs[kMaxPrograms] = {nullptr, nullptr};
  int nprograms = 0, inlineUsed = 0;
  uint64_t scratchCount = 0, totalSteps = 0;
  for (size_t c = 0; c < static_cast<size_t>(kMaxChannels); ++c) {
    a->channelProgram[c] = -1;
    a->channelOffset[c] = 0;
  }
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
    a->channelProgram[c] = static_cast<int8_t>(index);
    a->channelOffset[c] = work[c].offset;
  }
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
    for (size_t c = 0; c < tables.layout.nchannels; ++c) a->channelProgram[c] = 0;
    a->splitSteps = 1;
  }
  // Channels run at once, so each has scratch of its own.
  a->scratchPerChannel = (scratchCount * es + 255) & ~size_t{255};
  if (a->scratchPerChannel > 0)
    COLLIE_RETURN_IF_ERROR(storage->scratch(a->scratchPerChannel * tables.layout.nchannels, &a->bufs[2]));
  a->rank = tables.rank;
  a->divisor = args.divisor;
  a->seq = args.seq;
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
  *empty = false;
  return Status();
}

Status launchFailure(const DeviceStatus& status, int rank, const char* where) {
  const uint32_t raw = status.code;
  if (raw == 0) return Status();
  const collieResult_t code = static_cast<collieResult_t>(raw);
  return Status::error(code, "rank %d waiting on rank %d at step %d (channel %d) of collective #%llu %s %s", rank,
                       static_cast<int>(status.peer), static_cast<int>(status.step), static_cast<int>(status.channel),
                       static_cast<unsigned long long>(status.seq), code == collieTimeout ? "timed out" : "was aborted",
                       where);
}

}  // namespace collie
