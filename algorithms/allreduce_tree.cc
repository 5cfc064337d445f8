// Double binary tree allreduce, as NCCL builds it: two binary trees over the
// ranks, each carrying half of the buffer, reduced up to the tree's root and
// broadcast back down. In one tree a rank has up to two children and moves
// three halves; in the other it is a leaf and moves one, so the load is even
// and latency grows with log2 n.
//
// Tree 0 is NCCL's in-order binary tree (trees.cc, ncclGetBtree) over
// positions 0..m-1, with m = n: position x whose lowest set bit is b has
// children x - b/2 and x + b/2 (or the largest x + b/2^k below m), and position
// 0, the root, has the single child 2^floor(log2(m-1)). Its leaves are exactly
// the odd positions. Tree 1 is the same tree over m = n rounded up to even,
// mirrored: rank r at position m-1-r, so its leaves are exactly the even
// ranks. For odd n, position 0 is the missing rank n and its only child
// becomes the root. (NCCL shifts the tree by one rank for odd n instead, which
// leaves rank 0 a leaf in neither tree; mirroring the m+1 tree makes every
// rank a leaf in exactly one tree for every n.)
//
//   n = 8      tree 0 (half 0)         tree 1 (half 1, rank r at 7-r)
//                     0                          7
//                     |                          |
//                     4                          3
//                   /   \                      /   \       the internal ranks of one tree
//                  2     6                    5     1
//                 / \   / \                  / \   / \     are the leaves of the other:
//                1   3 5   7                6   4 2   0
//              leaves: the odd ranks      leaves: the even ranks
//
// Each rank's steps, L the tree it is a leaf in and I the other:
//   1. send its input half L to its parent in L
//   2. reduce half I from its children (kRecvReduceCopy into the output for the
//      first child, kRecvReduceSend to the parent for the last; the root
//      finalizes instead of sending)
//   3. broadcast half I: receive the result from the parent, forward it to the
//      children (the root sends what it finalized)
//   4. receive the result of half L from its parent in L
//
//   steps:  4 (at most one child in I) or 6 (two children); 1 for n = 1
//   bytes:  a rank sends one half up in each tree (the roots not) and one half
//           to each child: at most 2 x count, 1 x count for a one-child rank
//
// Deadlock and message order: a connection carries at most one message per
// tree, and when it carries two (a child in one tree, the parent in the other)
// both ends order them the same way, tree L's reduce before tree I's broadcast.
// The leaf send comes first, so it never waits; each reduce waits only on the
// children's reduces, each broadcast only on the parent's, which precede it.
//
// Round rule kOneSlot: an internal node receives its first child's whole half
// before its second child's, so a round bigger than a slot would stall the
// second child; rounds of one slot keep every step to one slice and pipeline
// the trees from one round to the next through the slot FIFOs.
#include "algorithms/registry.h"

namespace collie {

namespace {

struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
  int nchildren = 0;
};

// Position x of NCCL's in-order binary tree over positions 0..m-1.
TreeLinks inOrderTree(int m, int x) {
  TreeLinks t;
  if (x == 0) {
    int bit = 1;
    while (bit < m) bit <<= 1;
    if (m > 1) t.children[t.nchildren++] = bit >> 1;
    return t;
  }
  const int low = x & -x;
  t.parent = (x ^ low) | (low << 1);
  if (t.parent >= m) t.parent = x ^ low;
  if (low > 1) {
    t.children[t.nchildren++] = x - low / 2;
    for (int c = low / 2; c > 0; c /= 2) {
      if (x + c < m) {
        t.children[t.nchildren++] = x + c;
        break;
      }
    }
  }
  return t;
}

// Rank r's links in tree `tree` (0 or 1) of the double binary tree over n ranks.
TreeLinks doubleTree(int n, int tree, int r) {
  if (tree == 0) return inOrderTree(n, r);
  const int m = n + n % 2;
  auto mirror = [&](int x) { return x < 0 || m - 1 - x >= n ? -1 : m - 1 - x; };  // rank n does not exist
  const TreeLinks t = inOrderTree(m, m - 1 - r);
  TreeLinks out;
  out.parent = mirror(t.parent);
  for (int c = 0; c < t.nchildren; ++c) out.children[out.nchildren++] = mirror(t.children[c]);
  return out;
}

}  // namespace

Program buildAllReduceTree(const ProgramArgs& args) {
  Program p = emptyProgram(args, "tree");
  const int n = args.nranks, r = args.rank;
  if (n == 1) {
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, Range{Buffer::kInput, 0}, Range{Buffer::kOutput, 0}, args.count));
    p.steps.back().finalize = true;
    return p;
  }
  const TreeLinks links[2] = {doubleTree(n, 0, r), doubleTree(n, 1, r)};
  Chunk half[2];
  Range in[2], out[2];
  for (int t = 0; t < 2; ++t) {
    half[t] = balancedChunk(args.count, 2, t);
    in[t] = Range{Buffer::kInput, half[t].offset};
    out[t] = Range{Buffer::kOutput, half[t].offset};
  }
  const Range none;
  // 1. Leaf: the input half goes up unreduced.
  for (int t = 0; t < 2; ++t)
    if (links[t].nchildren == 0)
      p.steps.push_back(makeStep(StepOp::kSend, links[t].parent, -1, in[t], none, half[t].count));
  // 2. Reduce: the partial result of the first child and the own input lands in
  //    the output (in place it is the input half itself), the last child's goes on up.
  for (int t = 0; t < 2; ++t) {
    const TreeLinks& l = links[t];
    for (int c = 0; c < l.nchildren; ++c) {
      const Range src = c == 0 ? in[t] : out[t];
      const bool last = c == l.nchildren - 1;
      if (last && l.parent >= 0) {
        p.steps.push_back(makeStep(StepOp::kRecvReduceSend, l.parent, l.children[c], src, none, half[t].count));
      } else {
        p.steps.push_back(makeStep(StepOp::kRecvReduceCopy, -1, l.children[c], src, out[t], half[t].count));
        p.steps.back().finalize = last;  // only the root's last write completes the reduction
      }
    }
  }
  // 3. Broadcast: from the parent into the output and on to the first child, then to the second.
  for (int t = 0; t < 2; ++t) {
    const TreeLinks& l = links[t];
    for (int c = 0; c < l.nchildren; ++c) {
      if (c == 0 && l.parent >= 0) {
        p.steps.push_back(makeStep(StepOp::kRecvCopySend, l.children[c], l.parent, none, out[t], half[t].count));
      } else {
        p.steps.push_back(makeStep(StepOp::kSend, l.children[c], -1, out[t], none, half[t].count));
      }
    }
  }
  // 4. Leaf: the finished half comes back down.
  for (int t = 0; t < 2; ++t)
    if (links[t].nchildren == 0)
      p.steps.push_back(makeStep(StepOp::kRecv, -1, links[t].parent, none, out[t], half[t].count));
  return p;
}

}  // namespace collie
