// Binomial-tree broadcast from any root. Ranks are renumbered relative to the
// root (v = rank - root mod n, the root is 0); relative rank v's parent is v
// minus its lowest set bit, its children are v + 2^j for 2^j below that bit
// (below the smallest power of two >= n for the root) that are < n.
//
//   phases: ceil(log2 n) rounds down the tree; at round k every rank that has
//           the data sends it 2^(ceil(log2 n)-1-k) further
//   steps:  the root 1 copy + ceil(log2 n) sends; another rank 1 receive + one
//           send per child (a leaf, every odd v, sends nothing)
//   bytes:  each rank sends count per child; ceil(log2 n) latencies to the
//           farthest leaf instead of the chain's n-1
//
//   n = 8, relative ranks (real rank = (v + root) % n):
//     round 0: 0 -> 4
//     round 1: 0 -> 2, 4 -> 6
//     round 2: 0 -> 1, 2 -> 3, 4 -> 5, 6 -> 7
//
// Each rank sends to its largest subtree first, so the deepest branch starts
// earliest. The root copies its input into its output (a no-op in place) and
// every rank sends from its output, so the input is only read once.
//
// Round rule kOneSlot: the tree has no cycle of waits, so any size would do,
// but rounds of one slot overlap along the tree as the chain's do: an inner
// rank forwards round k while its parent already sends round k+1.
#include "algorithms/registry.h"

namespace collie {

Program buildBroadcastBinomial(const ProgramArgs& args) {
  Program p = emptyProgram(args, "binomial");
  const int n = args.nranks, root = args.root;
  const int v = ((args.rank - root) % n + n) % n;
  auto real = [&](int u) { return (u + root) % n; };
  const Range out{Buffer::kOutput, 0};
  Step first;
  first.count = args.count;
  first.dst = out;
  int span = 1;  // the children are v + mask for mask < span
  if (v == 0) {
    first.op = StepOp::kCopy;
    first.src = Range{Buffer::kInput, 0};
    while (span < n) span *= 2;
  } else {
    first.op = StepOp::kRecv;
    span = v & -v;
    first.recvPeer = real(v - span);
  }
  p.steps.push_back(first);
  for (int mask = span / 2; mask >= 1; mask /= 2) {
    if (v + mask >= n) continue;
    Step send;
    send.op = StepOp::kSend;
    send.sendPeer = real(v + mask);
    send.src = out;
    send.count = args.count;
    p.steps.push_back(send);
  }
  return p;
}

}  // namespace collie
