// Ring allreduce = ring reduce-scatter, then ring allgather, over n balanced chunks.
//
//   phases: reduce-scatter (n-1 steps), allgather (n-1 steps)
//   cost:   2(n-1) steps (2n-1 in the Program: the last reduce-scatter step sends on what it completes);
//           each rank sends and receives 2(n-1)/n of the buffer
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
  // The allgather begins with a send of the chunk the reduce-scatter's last step completes: that step sends each
  // slice on as it completes it (kRecvReduceCopySend), rather than this send reading the chunk back.
  std::vector<Step> gather;
  appendRingAllGather(args.nranks, args.rank, chunks, Buffer::kOutput, &gather);
  for (const Step& s : gather) appendForwarding(s, &p.steps);
  return p;
}

}  // namespace collie
