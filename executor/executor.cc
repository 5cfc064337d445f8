#include "executor/executor.h"

#include <cstdio>

#include "executor/protocol.h"

namespace collie {

Status Executor::runRounds(const RoundPlan& plan, ExecArgs args) {
  const size_t es = typeSize(args.type);
  const char* input = static_cast<const char*>(args.input);
  char* output = static_cast<char*>(args.output);
  for (uint64_t r = 0; r < plan.rounds; ++r) {
    // Every buffer of these collectives advances by the round's offset: blocks keep their full-count stride,
    // and each round takes the same part of each.
    const size_t shift = static_cast<size_t>(r * plan.stride) * es;
    args.input = input != nullptr ? input + shift : nullptr;
    args.output = output != nullptr ? output + shift : nullptr;
    COLLIE_RETURN_IF_ERROR(run(r + 1 < plan.rounds ? plan.full : plan.last, args));
  }
  return Status();
}

Status refuseDirectSteps(const std::vector<ChannelWork>& work, const char* backend) {
  for (const ChannelWork& w : work) {
    if (w.program == nullptr || !hasDirectSteps(*w.program)) continue;
    const Program& p = *w.program;
    return Status::error(collieInvalidUsage,
                         "%s %s needs ranks that map each other's buffers (its steps load and store peers' memory); "
                         "not available on the %s backend: choose another %s algorithm in COLLIE_ALGO",
                         collectiveName(p.collective), p.algorithm.c_str(), backend, collectiveName(p.collective));
  }
  return Status();
}

Status Executor::runsDirect(Collective c, const std::string& algorithm, uint64_t, collieDataType_t, ReduceOp) const {
  return Status::error(collieInvalidUsage,
                       "%s %s needs ranks that map each other's buffers and a kernel written for it; not available "
                       "on this backend: choose another %s algorithm in COLLIE_ALGO",
                       collectiveName(c), algorithm.c_str(), collectiveName(c));
}

Status refuseDirectSteps(const RoundPlan& plan, const char* backend) {
  COLLIE_RETURN_IF_ERROR(refuseDirectSteps(plan.full, backend));
  return refuseDirectSteps(plan.last, backend);
}

std::string callMismatch(int rank, int peer, uint64_t theirs, uint64_t mine, uint64_t collectiveSeq,
                         const std::string& name) {
  char here[160];
  if (mine != 0)
    snprintf(here, sizeof(here), "its collective #%llu (%s)", static_cast<unsigned long long>(collectiveSeq),
             name.c_str());
  else
    snprintf(here, sizeof(here), "a send/receive");
  char text[512];
  if (theirs == 0) {
    snprintf(text, sizeof(text),
             "rank %d stopped on finding a rank whose call differs from its own (that rank's error names it), "
             "while rank %d ran %s",
             peer, rank, here);
  } else if (theirs == kPointToPoint) {
    snprintf(text, sizeof(text), "rank %d sent rank %d data of a send/receive while rank %d ran %s", peer, rank, rank,
             here);
  } else if (mine != 0 && callNumber(theirs) == callNumber(mine)) {
    snprintf(text, sizeof(text),
             "rank %d's collective #%llu differs from rank %d's (%s here): the collective, data type, operator, "
             "count, root or algorithm is not the same (COLLIE_CHECK=1 compares them before each call and names "
             "what differs)",
             peer, static_cast<unsigned long long>(collectiveSeq), rank, name.c_str());
  } else {
    // Only the low 24 bits of the peer's collective number travel: say which one it is, nearest to ours.
    const uint64_t mod = uint64_t{1} << 24, number24 = callNumber(theirs);
    uint64_t number = number24;
    if (mine != 0) {
      const uint64_t ahead = (number24 - collectiveSeq) % mod;
      number = ahead < mod / 2 ? collectiveSeq + ahead : collectiveSeq - (mod - ahead);
    }
    snprintf(text, sizeof(text),
             "rank %d sent rank %d data of its collective #%llu while rank %d ran %s: an earlier call differed "
             "between them (COLLIE_CHECK=1 compares them before each call and names what differs)",
             peer, rank, static_cast<unsigned long long>(number), rank, here);
  }
  return text;
}

}  // namespace collie
