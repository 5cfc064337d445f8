// Ring allgather: every rank ends with every rank's block, in rank order.
//
//   phases: place own block (a local copy, a no-op in place) and send it, one ring pass
//   cost:   n-1 steps; each rank sends and receives (n-1) blocks
//
//   n = 3: r0 holds A, r1 B, r2 C; at each step every rank forwards the block
//   it received last: after 2 steps all hold A B C.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllGatherRing(const ProgramArgs& args) {
  Program p = emptyProgram(args, "ring");
  const std::vector<Chunk> blocks = rankBlocks(args.count, args.blockStride(), args.nranks);
  // The ring's first step sends the block just put in place: appendForwarding makes the copy send it from the
  // same read, one pass over it fewer (a copy onto itself in place, where only the send reads it).
  p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, 0},
                             Range{Buffer::kOutput, blocks[static_cast<size_t>(args.rank)].offset}, args.count));
  std::vector<Step> ring;
  appendRingAllGather(args.nranks, args.rank, blocks, Buffer::kOutput, &ring);
  for (const Step& s : ring) appendForwarding(s, &p.steps);
  return p;
}

}  // namespace collie
