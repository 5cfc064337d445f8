// Direct one-shot allreduce, for ranks that map each other's buffers (program.h, "Direct steps"): every rank
// reads the whole input of every rank and reduces the n of them itself, in rank order 0..n-1, so every rank
// holds the same bits. One epoch of loads and no dependency between ranks: the small-message algorithm, whose
// latency is two barriers.
//
//   phases:  barrier (every rank has entered the call: its input is ready),
//            reduce the n inputs into scratch, barrier (no rank reads an input any more),
//            copy scratch to the output
//   steps:   4: barrier, kReducePeers, barrier, kCopy
//   bytes:   each rank reads n x count (n-1 of them from its peers) and writes count into scratch,
//            then copies count; (n+3) x count of memory traffic
//   scratch: count
//
//   n = 3, every rank r:        epoch 1                      epoch 2
//     rank 0 in: x0  ----.
//     rank 1 in: x1  ----+-->  tmp = (x0 + x1) + x2  ||  out = tmp
//     rank 2 in: x2  ----'
//
// The result goes to scratch, not straight to the output: in place the output is the input, which the other
// ranks are still reading in the same epoch (the verifier calls that a race). The copy after the last barrier
// touches only the rank's own memory.
#include "algorithms/registry.h"

namespace collie {

Program buildAllReduceDirectOneShot(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct_oneshot");
  p.scratchCount = args.count;
  const Range tmp{Buffer::kScratch, 0};
  p.steps.push_back(barrierStep());
  p.steps.push_back(reducePeersStep(0, args.nranks, Range{Buffer::kInput, 0}, tmp, args.count, true));
  p.steps.push_back(barrierStep());
  p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, tmp, Range{Buffer::kOutput, 0}, args.count));
  return p;
}

}  // namespace collie
