// Binomial-tree reduce to any root: the binomial broadcast's tree
// (broadcast_binomial.cc) run backwards. Each rank receives its children's
// partial sums, smallest subtree first (those finish first), adds them to its
// own input and passes the sum to its parent; the last child's data is reduced
// and forwarded in one step, slice by slice.
//
//   phases: ceil(log2 n) rounds up the tree; at round k the ranks whose lowest
//           relative bit is 2^k send their subtree's sum to their parents
//   steps:  one per child plus one send (a leaf: 1 send; the root: one
//           receive-reduce per child, ceil(log2 n), or 1 copy when n = 1)
//   bytes:  each non-root rank sends count once; the root receives
//           ceil(log2 n)·count; ceil(log2 n) latencies instead of the chain's n-1
//
//   n = 8, relative ranks (real rank = (v + root) % n):
//     round 0: 1 -> 0, 3 -> 2, 5 -> 4, 7 -> 6
//     round 1: 2 -> 0, 6 -> 4
//     round 2: 4 -> 0
//
// Buffers: off the root there is no output, so a rank with two or more
// children accumulates in `count` elements of scratch; a rank with one child
// reduces it with its input straight on to its parent and needs none. The root
// accumulates in its output and finalizes at its last child; in place its
// output is its input, which every step reads and writes element by element at
// the same offset, so nothing is read after it is overwritten.
//
// Round rule kOneSlot, as the broadcast: no cycle of waits at any size, and
// rounds of one slot overlap up the tree.
#include <algorithm>
#include <vector>

#include "algorithms/registry.h"

namespace collie {

Program buildReduceBinomial(const ProgramArgs& args) {
  ProgramArgs treeArgs = args;
  treeArgs.collective = Collective::kBroadcast;
  const Program tree = buildBroadcastBinomial(treeArgs);
  int parent = -1;
  std::vector<int> children;  // largest subtree first in the broadcast
  for (const Step& s : tree.steps) {
    if (s.op == StepOp::kRecv) parent = s.recvPeer;
    if (s.op == StepOp::kSend) children.push_back(s.sendPeer);
  }
  std::reverse(children.begin(), children.end());

  Program p = emptyProgram(args, "binomial");
  const uint64_t count = args.count;
  const bool root = parent < 0;
  // Where the partial sum is kept between children: the root's output, or scratch.
  const Range acc = root ? Range{Buffer::kOutput, 0} : Range{Buffer::kScratch, 0};
  Range partial{Buffer::kInput, 0};
  for (size_t i = 0; i < children.size(); ++i) {
    const bool last = i + 1 == children.size();
    Step s;
    s.recvPeer = children[i];
    s.src = partial;
    s.count = count;
    if (last && !root) {
      s.op = StepOp::kRecvReduceSend;
      s.sendPeer = parent;
    } else {
      s.op = StepOp::kRecvReduceCopy;
      s.dst = acc;
      s.finalize = root && last;
      partial = acc;
    }
    p.steps.push_back(s);
  }
  if (!root && children.size() >= 2) p.scratchCount = count;
  if (children.empty()) {
    Step s;
    s.src = partial;
    s.count = count;
    if (root) {  // n == 1
      s.op = StepOp::kCopy;
      s.dst = acc;
      s.finalize = true;
    } else {
      s.op = StepOp::kSend;
      s.sendPeer = parent;
    }
    p.steps.push_back(s);
  }
  return p;
}

}  // namespace collie
