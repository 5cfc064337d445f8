// Pipelined chains for broadcast and reduce, in ring order.
//
// Broadcast: root -> root+1 -> ... -> root-1. Each rank forwards what it
// receives; run in rounds of one slice (core/collectives.cc), the rounds
// overlap along the chain, so large messages cost about (n-1) slices of latency
// plus one buffer's worth of bandwidth.
//
//   root: send, copy to own output    middle: recv -> output, forward    last: recv -> output
//
// Reduce: root+1 -> root+2 -> ... -> root, each rank adding its input to the
// partial result on the way; the root writes the finished reduction.
//
//   first: send input    middle: recv + input -> forward    root: recv + input -> output
//
//   cost (both): n-1 steps along the chain; each rank sends the buffer once.
#include "algorithms/registry.h"

namespace collie {

Program buildBroadcastChain(const ProgramArgs& args) {
  Program p = emptyProgram(args, "chain");
  const int n = args.nranks, r = args.rank;
  const int pos = wrapRank(r - args.root, n);  // 0 at the root
  Step s;
  s.count = args.count;
  if (pos == 0) {
    if (n > 1) {
      s.op = StepOp::kSend;
      s.sendPeer = wrapRank(r + 1, n);
      s.src = Range{Buffer::kInput, 0};
      p.steps.push_back(s);
    }
    Step copy;
    copy.op = StepOp::kCopy;
    copy.src = Range{Buffer::kInput, 0};
    copy.dst = Range{Buffer::kOutput, 0};
    copy.count = args.count;
    p.steps.push_back(copy);
    return p;
  }
  s.op = pos < n - 1 ? StepOp::kRecvCopySend : StepOp::kRecv;
  s.recvPeer = wrapRank(r - 1, n);
  s.sendPeer = pos < n - 1 ? wrapRank(r + 1, n) : -1;
  s.dst = Range{Buffer::kOutput, 0};
  p.steps.push_back(s);
  return p;
}

Program buildReduceChain(const ProgramArgs& args) {
  Program p = emptyProgram(args, "chain");
  const int n = args.nranks, r = args.rank;
  const int pos = wrapRank(r - args.root - 1, n);  // n-1 at the root
  Step s;
  s.count = args.count;
  s.src = Range{Buffer::kInput, 0};
  if (n == 1) {
    s.op = StepOp::kCopy;
  } else if (pos == 0) {
    s.op = StepOp::kSend;
  } else {
    s.op = pos < n - 1 ? StepOp::kRecvReduceSend : StepOp::kRecvReduceCopy;
    s.recvPeer = wrapRank(r - 1, n);
  }
  if (pos < n - 1) s.sendPeer = wrapRank(r + 1, n);
  if (pos == n - 1) {
    s.dst = Range{Buffer::kOutput, 0};
    s.finalize = true;
  }
  p.steps.push_back(s);
  return p;
}

}  // namespace collie
