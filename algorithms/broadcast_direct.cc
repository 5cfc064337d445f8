// Direct broadcast, for ranks that map each other's buffers (program.h, "Direct steps"): every rank but the root
// reads the root's input into its output (a kReducePeers of the root alone: a copy from its buffer). The ranks
// pull at once, so the root only serves its memory; no rank waits for another's copy.
//
//   phases:  the root copies its input to its output (before the first barrier: only its own memory), barrier
//            (the root has entered the call: its input is ready), every other rank reads it, barrier (no rank
//            reads the root's input any more)
//   steps:   root 3: kCopy, barrier, barrier; others 3: barrier, kReducePeers, barrier
//   bytes:   the root's input is read n-1 times from its peers and once by the root; each output written once
//   scratch: none
//
//   n = 3, root 1:
//     rank 0: out = in of rank 1      rank 1: out = in      rank 2: out = in of rank 1
#include "algorithms/registry.h"

namespace collie {

Program buildBroadcastDirect(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct");
  const Range in{Buffer::kInput, 0}, out{Buffer::kOutput, 0};
  if (args.rank == args.root) p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in, out, args.count));
  p.steps.push_back(barrierStep());
  if (args.rank != args.root) p.steps.push_back(reducePeersStep(args.root, 1, in, out, args.count, false));
  p.steps.push_back(barrierStep());
  return p;
}

}  // namespace collie
