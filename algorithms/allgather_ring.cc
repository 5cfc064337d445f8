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
  Step place;
  place.op = StepOp::kCopy;
  place.src = Range{Buffer::kInput, 0};
  place.dst = Range{Buffer::kOutput, blocks[static_cast<size_t>(args.rank)].offset};
  place.count = args.count;
  std::vector<Step> ring;
  appendRingAllGather(args.nranks, args.rank, blocks, Buffer::kOutput, &ring);
  if (!ring.empty()) {
    // The ring's first step sends the block just put in place: the copy sends it from the same read, one
    // pass over it fewer (a copy onto itself in place, where only the send reads it).
    place.op = StepOp::kCopySend;
    place.sendPeer = ring.front().sendPeer;
    ring.erase(ring.begin());
  }
  p.steps.push_back(place);
  p.steps.insert(p.steps.end(), ring.begin(), ring.end());
  return p;
}

}  // namespace collie
