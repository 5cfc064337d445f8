// Direct all-to-all, for ranks that map each other's buffers (program.h, "Direct steps"): rank r stores block q
// of its input into block r of rank q's output, for every q. Every element is read once and written once.
//
//   phases:  its own block (before the first barrier: only its own memory), barrier (every rank has entered the
//            call: its output may be written), n-1 puts, barrier (every output is complete)
//   steps:   n+2: kCopy, barrier, n-1 kPutPeer, barrier
//   bytes:   each rank reads n x count and writes count into its own output and (n-1) x count into its peers'
//   scratch: none
//
//   n = 3 (x_rq: block q of rank r's input):
//     rank 0: out[0] = x00, put x01 into rank 1's out[0], x02 into rank 2's out[0]
//     rank 1: out[1] = x11, put x12 into rank 2's out[1], x10 into rank 0's out[1]
//     rank 2: out[2] = x22, put x20 into rank 0's out[2], x21 into rank 1's out[2]
//
// Rank r starts its puts at rank r+1, so the ranks store into different peers at any moment.
//
// Direct all-to-all-v: the same steps with each peer's own count and displacements, none for an empty block. Where a
// block lands in rank q's output is q's recvDispls[r], which rank r's arguments do not hold: its puts say "where rank q
// receives my block" (Step::peerDispl), and the executors learn the displacement from q as the call runs (the direct
// kernel at its entry barrier, the verifier from q's program).
#include "algorithms/registry.h"

namespace collie {

Program buildAllToAllDirect(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct");
  const int n = args.nranks, r = args.rank;
  const uint64_t stride = args.blockStride(), mine = static_cast<uint64_t>(r) * stride;
  p.steps.push_back(
      makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, mine}, Range{Buffer::kOutput, mine}, args.count));
  p.steps.push_back(barrierStep());
  for (int k = 1; k < n; ++k) {
    const int q = wrapRank(r + k, n);
    p.steps.push_back(putPeerStep(q, Range{Buffer::kInput, static_cast<uint64_t>(q) * stride},
                                  Range{Buffer::kOutput, mine}, args.count));
  }
  p.steps.push_back(barrierStep());
  return p;
}

Program buildAllToAllvDirect(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct");
  const int n = args.nranks, r = args.rank;
  const size_t me = static_cast<size_t>(r);
  // An empty block has no step: its displacement may lie anywhere (the caller's arrays need not mean it).
  if (args.sendCounts[me] != 0)
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, args.sendDispls[me]},
                               Range{Buffer::kOutput, args.recvDispls[me]}, args.sendCounts[me]));
  p.steps.push_back(barrierStep());
  for (int k = 1; k < n; ++k) {
    const int q = wrapRank(r + k, n);
    const size_t uq = static_cast<size_t>(q);
    if (args.sendCounts[uq] != 0)
      p.steps.push_back(putPeerBlockStep(q, Range{Buffer::kInput, args.sendDispls[uq]}, args.sendCounts[uq]));
  }
  p.steps.push_back(barrierStep());
  return p;
}

}  // namespace collie
