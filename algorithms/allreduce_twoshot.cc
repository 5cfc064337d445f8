// Two-shot allreduce: a direct reduce-scatter (chunk j of every rank's input
// goes straight to rank j, which reduces the n contributions), then a direct
// allgather of the reduced chunks. Two hops of latency, like one-shot's one,
// but each rank sends only 2(n-1)/n of the buffer, like the ring.
//
//   phases: reduce-scatter (a copy of the own chunk heading n-1 joined exchanges),
//           allgather (n-1 exchanges)
//   steps:  2n-1: 1 copy + n-1 kSendRecvReduce + n-1 kSendRecv
//   bytes:  each rank sends and receives 2(n-1)/n of the buffer
//   scratch: none
//
//   n = 3, chunks a b c; rank r reduces chunk r:
//     reduce-scatter  r0: a0+a2+a1 -> A    r1: b1+b0+b2 -> B    r2: c2+c1+c0 -> C
//     allgather       each rank sends its reduced chunk to both others
//
// The reduce-scatter's exchanges are joined (program.h, "Joined steps"): where
// the executor runs them as one step (Simple on the GPU, the host), each slice
// of the own chunk is reduced from the n inputs in one pass, so a rank reads
// and writes (n+1)/n of the buffer there instead of 3(n-1)/n, and about
// (3n-1)/n in all when the peers read its sends in place (ranks sharing a GPU;
// a ring allreduce moves (5n-5)/n). A chunk is reduced by one rank, own
// contribution first, then r-1, r-2, ..., and then copied everywhere, so all
// ranks hold the same bits (not one-shot's, whose order is 0..n-1).
// In place: the own chunk's copy is onto itself; the allgather writes other
// ranks' chunks only after all input was sent.
//
// Round rule kRankSlots: the exchanges cannot deadlock at any size, and each
// moves count/n, so a round of n slots gives every step one slot.
#include "algorithms/direct_exchange.h"
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllReduceTwoShot(const ProgramArgs& args) {
  Program p = emptyProgram(args, "twoshot");
  const int n = args.nranks, r = args.rank;
  const std::vector<Chunk> chunks = balancedChunks(args.count, n);
  const Range owned{Buffer::kOutput, chunks[static_cast<size_t>(r)].offset};
  appendJoinedReduce(n, r, Buffer::kInput, chunks, owned, &p.steps);
  appendDirectAllGather(n, r, chunks, Buffer::kOutput, &p.steps);
  return p;
}

}  // namespace collie
