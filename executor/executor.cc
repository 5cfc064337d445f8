#include "executor/executor.h"

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

}  // namespace collie
