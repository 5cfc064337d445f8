// Two-shot allreduce: a direct reduce-scatter (chunk j of every rank's input
// goes straight to rank j, which reduces the n contributions), then a direct
// allgather of the reduced chunks. Two hops of latency, like one-shot's one,
// but each rank sends only 2(n-1)/n of the buffer, like the ring.
//
//   phases: reduce-scatter (n-1 exchanges, local reduce in rank order),
//           allgather (n-1 exchanges)
//   steps:  3n-1 (rank 0: 3n-2): 1 copy + n-1 kSendRecv + 1 copy + n-1 kReduce + n-1 kSendRecv
//   bytes:  each rank sends and receives 2(n-1)/n of the buffer
//   scratch: n blocks of count/n (rank 0: n-1), one per source rank
//
//   n = 3, chunks a b c; rank r reduces chunk r:
//     reduce-scatter  r0: a0+a1+a2 -> A    r1: b0+b1+b2 -> B    r2: c0+c1+c2 -> C
//     allgather       each rank sends its reduced chunk to both others
//
// A chunk is reduced by one rank, in rank order 0 to n-1, and then copied
// everywhere, so all ranks hold the same bits, and the same bits as one-shot's.
// In place: the own chunk is copied to scratch before the output is written;
// the allgather writes other ranks' chunks only after all input was sent.
//
// Round rule kRankSlots: the exchanges cannot deadlock at any size, and each
// moves count/n, so a round of n slots gives every step one slot and bounds
// scratch to about n slots.
#include "algorithms/direct_exchange.h"
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllReduceTwoShot(const ProgramArgs& args) {
  Program p = emptyProgram(args, "twoshot");
  const int n = args.nranks, r = args.rank;
  const std::vector<Chunk> chunks = balancedChunks(args.count, n);
  const Range owned{Buffer::kOutput, chunks[static_cast<size_t>(r)].offset};
  p.scratchCount = appendDirectReduce(n, r, Buffer::kInput, chunks, owned, &p.steps);
  appendDirectAllGather(n, r, chunks, Buffer::kOutput, &p.steps);
  return p;
}

}  // namespace collie
