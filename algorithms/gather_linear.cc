// Linear gather: every rank sends its block straight to the root.
//
//   phases: one; the root copies its own block into place, then receives the
//           block of every other rank in turn, in ring order from root+1
//   steps:  root n (1 copy + n-1 receives), every other rank 1 send
//   bytes:  a non-root sends count; the root receives (n-1)*count, all of it
//           over its own links, so the root's bandwidth bounds the call
//
//   n = 4, root 0:   r1 --b1--.
//                    r2 --b2--+--> r0 output: [b0 b1 b2 b3]   (b0 by a local copy)
//                    r3 --b3--'
//
// Round rule kNone: the root is the only receiver, and the ranks it waits for
// only send to it, so no chain of waits comes back to anyone: a sender whose
// slots are full waits for the root, which reaches it after finitely many
// receives. Any count runs as one program and no scratch is needed.
//
// In place (the root's input is block `root` of its output) the copy is onto
// itself, and nothing else writes that block.
#include "algorithms/registry.h"

namespace collie {

Program buildGatherLinear(const ProgramArgs& args) {
  Program p = emptyProgram(args, "linear");
  const int n = args.nranks, root = args.root;
  const uint64_t stride = args.blockStride();
  if (args.rank != root) {
    Step send;
    send.op = StepOp::kSend;
    send.sendPeer = root;
    send.src = Range{Buffer::kInput, 0};
    send.count = args.count;
    p.steps.push_back(send);
    return p;
  }
  Step own;
  own.op = StepOp::kCopy;
  own.src = Range{Buffer::kInput, 0};
  own.dst = Range{Buffer::kOutput, static_cast<uint64_t>(root) * stride};
  own.count = args.count;
  p.steps.push_back(own);
  for (int k = 1; k < n; ++k) {
    const int from = wrapRank(root + k, n);
    Step recv;
    recv.op = StepOp::kRecv;
    recv.recvPeer = from;
    recv.dst = Range{Buffer::kOutput, static_cast<uint64_t>(from) * stride};
    recv.count = args.count;
    p.steps.push_back(recv);
  }
  return p;
}

}  // namespace collie
