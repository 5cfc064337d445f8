// Ring reduce-scatter: rank r ends with the reduction of block r of everyone's input.
//
//   phases: one ring pass (appendRingReduceScatter)
//   cost:   n-1 steps; each rank sends and receives (n-1) blocks
//
//   n = 3, blocks a b c of each input; rank r receives the partial sum of block
//   r-s-1 at step s, adds its own, passes it on; at the last step block r is complete:
//     r0: A    r1: B    r2: C
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildReduceScatterRing(const ProgramArgs& args) {
  Program p = emptyProgram(args, "ring");
  const std::vector<Chunk> blocks = rankBlocks(args.count, args.blockStride(), args.nranks);
  appendRingReduceScatter(args.nranks, args.rank, blocks, Buffer::kInput, Range{Buffer::kOutput, 0}, &p.steps);
  return p;
}

}  // namespace collie
