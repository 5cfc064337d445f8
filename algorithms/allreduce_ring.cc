// Ring allreduce = ring reduce-scatter, then ring allgather, over n balanced chunks.
//
//   phases: reduce-scatter (n-1 steps), allgather (n-1 steps)
//   cost:   2(n-1) steps; each rank sends and receives 2(n-1)/n of the buffer
//
//   n = 3, chunks a b c; after reduce-scatter rank r owns the sum of chunk r:
//     r0: A . .    r1: . B .    r2: . . C
//   allgather passes each owned chunk around the ring: r0 -> r1 -> r2 -> r0.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllReduceRing(const ProgramArgs& args) {
  Program p = emptyProgram(args, "ring");
  const std::vector<Chunk> chunks = balancedChunks(args.count, args.nranks);
  const Range owned{Buffer::kOutput, chunks[static_cast<size_t>(args.rank)].offset};
  appendRingReduceScatter(args.nranks, args.rank, chunks, Buffer::kInput, owned, &p.steps);
  appendRingAllGather(args.nranks, args.rank, chunks, Buffer::kOutput, &p.steps);
  return p;
}

}  // namespace collie
