// Direct reduce-scatter, for ranks that map each other's buffers (program.h, "Direct steps"): rank r reduces
// block r of all n inputs, in rank order, straight into its output. Every input element is read once, by the
// rank that owns its block.
//
//   phases:  barrier (every rank has entered the call), kReducePeers of block r, barrier (no rank reads an
//            input any more)
//   steps:   3
//   bytes:   each rank reads n x count (n-1 of them from peers) and writes count
//   scratch: none
//
//   n = 3 (b_j: block b of rank j's input):
//     rank 0: out = (a0 + a1) + a2    rank 1: out = (b0 + b1) + b2    rank 2: out = (c0 + c1) + c2
//
// In place rank r's output is its input's block r, which no other rank reads.
#include "algorithms/registry.h"

namespace collie {

Program buildReduceScatterDirect(const ProgramArgs& args) {
  Program p = emptyProgram(args, "direct");
  const uint64_t block = static_cast<uint64_t>(args.rank) * args.blockStride();
  p.steps.push_back(barrierStep());
  p.steps.push_back(
      reducePeersStep(0, args.nranks, Range{Buffer::kInput, block}, Range{Buffer::kOutput, 0}, args.count, true));
  p.steps.push_back(barrierStep());
  return p;
}

}  // namespace collie
