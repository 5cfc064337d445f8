// Binomial-tree scatter: the binomial gather run backwards (scatterFromGather
// in scatter_linear.cc). Ranks are renumbered relative to the root (v = rank -
// root mod n); relative rank v's parent is v minus its lowest set bit and its
// subtree is v .. v+size-1, size = min(lowbit(v), n-v) (n for the root).
//
//   phases: log rounds down the tree; the root sends its largest subtree first
//           (half the blocks to relative rank 2^(ceil(log2 n)-1)), each inner
//           rank receives its whole subtree and passes on its children's parts
//   steps:  a non-root of subtree size s: s receives, then s-1 sends to at
//           most ceil(log2 n) children; the root n-1 sends, then 1 copy
//   bytes:  the root sends (n-1)*count, a rank of subtree size s forwards
//           (s-1)*count; ceil(log2 n) latencies to the farthest leaf
//
//   n = 8, relative ranks (real rank = (v + root) % n):
//     0 -> 4 -> 6 -> 7     round 0: 0 sends blocks {4,5,6,7} to 4
//     0 -> 2 -> 3          round 1: 0 sends {2,3} to 2, 4 sends {6,7} to 6
//     4 -> 5, 0 -> 1       round 2: every even v sends one block to v+1
//
// One step per block, as in the gather: the root sends each block straight
// from its input (relative v's block sits at real rank (v+root)%n's offset); an
// inner rank receives its own block into its output and its descendants'
// blocks into scratch, `count` apart, so a leaf needs no scratch.
//
// Round rule kOneSlot: the tree has no cycle of waits, but an inner rank stages
// up to n-1 blocks in scratch, which rounds of one slot per block bound to
// n-1 slots. In place the root's own block is copied onto itself.
#include "algorithms/registry.h"

namespace collie {

Program buildScatterBinomial(const ProgramArgs& args) {
  ProgramArgs gather = args;
  gather.collective = Collective::kGather;
  return scatterFromGather(buildGatherBinomial(gather));
}

}  // namespace collie
