// Direct two-shot allreduce, for ranks that map each other's buffers (program.h, "Direct steps"): rank r reduces
// chunk r of all n inputs, in rank order, straight into its own output, and stores the result into chunk r of
// every peer's output. Every input element is read once and every output element written once, which is the
// least any allreduce moves: the large-message algorithm of peers that map each other's memory.
//
//   phases:  barrier (every rank has entered the call), reduce-scatter (kReducePeers of chunk r) and allgather
//            (n-1 puts of chunk r) in one epoch, barrier (every output is complete)
//   steps:   n+2: barrier, kReducePeers, n-1 kPutPeer, barrier
//   bytes:   each rank reads n x count/n (n-1 of them from peers), writes count/n into its own output and
//            (n-1) x count/n into its peers'; the puts read back what the reduce wrote, (3n-1)/n x count of
//            memory traffic in all (memory_traffic.h), 2 x count where a kernel stores the reduced chunk from
//            its registers into all n outputs
//   scratch: none
//
//   n = 3, chunks a b c (a_j: chunk a of rank j's input):
//     rank 0: out.a = (a0 + a1) + a2 -> put out.a into rank 1's and rank 2's out.a
//     rank 1: out.b = (b0 + b1) + b2 -> put out.b into rank 2's and rank 0's out.b
//     rank 2: out.c = (c0 + c1) + c2 -> put out.c into rank 0's and rank 1's out.c
//
// Both halves share one epoch: chunk r of any rank's buffers is read and written by rank r alone, so no other
// rank touches what the puts write, in place (where an output chunk is the input chunk) included, and a middle
// barrier would only add its latency. Rank r starts its puts at rank r+1, so the ranks store into different
// peers at any moment.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

Program buildAllReduceDirectTwoShot(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct_twoshot");
  const int n = args.nranks, r = args.rank;
  const Chunk mine = balancedChunks(args.count, n)[static_cast<size_t>(r)];
  const Range owned{Buffer::kOutput, mine.offset};
  p.steps.push_back(barrierStep());
  p.steps.push_back(reducePeersStep(0, n, Range{Buffer::kInput, mine.offset}, owned, mine.count, true));
  for (int k = 1; k < n; ++k) p.steps.push_back(putPeerStep(wrapRank(r + k, n), owned, owned, mine.count));
  p.steps.push_back(barrierStep());
  return p;
}

}  // namespace collie
