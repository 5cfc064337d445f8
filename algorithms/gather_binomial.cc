// Binomial-tree gather. Ranks are renumbered relative to the root (v = rank -
// root mod n, the root is 0); relative rank v's parent is v minus its lowest
// set bit, and its subtree is relative ranks v .. v+size-1 with size =
// min(lowbit(v), n-v) (n for the root). Each rank collects its subtree's blocks
// from its children, smallest subtree first, then hands the lot to its parent.
//
//   phases: log rounds up the tree; at round k the ranks with lowest bit 2^k
//           send their subtree (up to 2^k blocks) to their parents
//   steps:  a non-root of subtree size s: s-1 receives (from at most
//           ceil(log2 n) children), then s sends; the root 1 copy, n-1 receives
//   bytes:  a rank sends s*count, the root receives (n-1)*count; ceil(log2 n)
//           latencies on the root's path instead of the linear gather's n-1
//
//   n = 8, relative ranks (real rank = (v + root) % n):
//     0 <- 1          round 0: odd v send their own block
//     0 <- 2 <- 3     round 1: 2 and 6 send blocks {2,3} and {6,7}
//     0 <- 4 <- 5     round 2: 4 sends blocks {4,5,6,7}
//          4 <- 6 <- 7
//
// Blocks move one step per block: the root receives each straight into its
// output (relative v is real rank (v+root)%n, whose block sits at that rank's
// offset, so a subtree's blocks are not contiguous there); an inner rank keeps
// the blocks of relative ranks v+1 .. v+s-1 in scratch, `count` apart, and
// sends its own block from its input, so a leaf needs no scratch at all.
//
// Round rule kOneSlot: the tree has no cycle of waits, but an inner rank
// stages up to n-1 blocks in scratch, which rounds of one slot per block
// bound to n-1 slots. In place the root's own block is copied onto itself and
// never written otherwise.
#include <algorithm>

#include "algorithms/registry.h"

namespace collie {

namespace {
int lowBit(int v) { return v & -v; }
}  // namespace

Program buildGatherBinomial(const ProgramArgs& args) {
  Program p = emptyProgram(args, "binomial");
  const int n = args.nranks, root = args.root;
  const int v = ((args.rank - root) % n + n) % n;
  const uint64_t count = args.count, stride = args.blockStride();
  const int size = v == 0 ? n : std::min(lowBit(v), n - v);
  auto real = [&](int u) { return (u + root) % n; };
  // Where the block of relative rank u of this subtree (v < u < v+size) is collected.
  auto place = [&](int u) {
    return v == 0 ? Range{Buffer::kOutput, static_cast<uint64_t>(real(u)) * stride}
                  : Range{Buffer::kScratch, static_cast<uint64_t>(u - v - 1) * count};
  };
  if (v == 0) {
    Step own;
    own.op = StepOp::kCopy;
    own.src = Range{Buffer::kInput, 0};
    own.dst = Range{Buffer::kOutput, static_cast<uint64_t>(root) * stride};
    own.count = count;
    p.steps.push_back(own);
  } else {
    p.scratchCount = static_cast<uint64_t>(size - 1) * count;
  }
  // Children v+1, v+2, v+4, ... below lowbit(v); child v+mask brings blocks v+mask .. min(v+2mask, n)-1.
  for (int mask = 1; mask < size; mask <<= 1) {
    const int child = v + mask;
    for (int u = child; u < std::min(v + 2 * mask, n); ++u) {
      Step recv;
      recv.op = StepOp::kRecv;
      recv.recvPeer = real(child);
      recv.dst = place(u);
      recv.count = count;
      p.steps.push_back(recv);
    }
  }
  if (v == 0) return p;
  // Up to the parent: own block first, then the collected ones in relative order.
  const int parent = real(v - lowBit(v));
  for (int u = v; u < v + size; ++u) {
    Step send;
    send.op = StepOp::kSend;
    send.sendPeer = parent;
    send.src = u == v ? Range{Buffer::kInput, 0} : place(u);
    send.count = count;
    p.steps.push_back(send);
  }
  return p;
}

}  // namespace collie
