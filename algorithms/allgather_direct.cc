// Direct allgather, for ranks that map each other's buffers (program.h, "Direct steps"): rank r stores its input
// into block r of every rank's output. Every input element is read n times and every output element written once.
//
//   phases:  its own block in place (before the first barrier: only its own memory), barrier (every rank has
//            entered the call: its output may be written), n-1 puts, barrier (every output is complete)
//   steps:   n+2: kCopy, barrier, n-1 kPutPeer, barrier
//   bytes:   each rank reads n x count and writes count into its own output and (n-1) x count into its peers'
//   scratch: none
//
//   n = 3:
//     rank 0: out[0] = x0, put x0 into rank 1's out[0] and rank 2's out[0]
//     rank 1: out[1] = x1, put x1 into rank 2's out[1] and rank 0's out[1]
//     rank 2: out[2] = x2, put x2 into rank 0's out[2] and rank 1's out[2]
//
// Rank r starts its puts at rank r+1, so the ranks store into different peers at any moment. In place the
// input is the output's block r, which only rank r reads and the others never write.
#include "algorithms/registry.h"

namespace collie {

Program buildAllGatherDirect(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct");
  const int n = args.nranks, r = args.rank;
  const Range in{Buffer::kInput, 0}, block{Buffer::kOutput, static_cast<uint64_t>(r) * args.blockStride()};
  p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in, block, args.count));
  p.steps.push_back(barrierStep());
  for (int k = 1; k < n; ++k) p.steps.push_back(putPeerStep(wrapRank(r + k, n), in, block, args.count));
  p.steps.push_back(barrierStep());
  return p;
}

}  // namespace collie
