// Recursive-halving reduce-scatter: log2 p pairwise exchange phases, each
// halving the range of blocks a rank is responsible for, so latency grows with
// log n instead of the ring's n.
//
// Any n: p = the largest power of two <= n, rem = n - p. The first 2·rem ranks
// fold in pairs: odd rank 2i+1 sends its whole input to 2i, which reduces it
// into its own and later hands 2i+1 its finished block. The p remaining ranks
// are virtual ranks 0..p-1, virtual v owning a contiguous run of real blocks
// ({2v, 2v+1} for v < rem, else {v+rem}), and halve over those runs.
//
//   phases: fold (only n != 2^k), log2 p halving exchanges, unfold
//   steps:  power of two: n/2 copies + (n-1) exchanges + 1 copy. Otherwise
//           the exchanges number at most 2(n-1) (a side with fewer blocks pads),
//           a folding even rank adds n fold receives and 1 send, and a
//           folded-out odd rank has n sends + 1 receive
//   bytes:  each halving rank sends at most (n-1) blocks (exactly n-1 for a
//           power of two, like the ring) in log2 p phases; the fold adds n
//           blocks from each odd rank to its even one and one block back
//
//   n = 8, virtual = real; rank 0 keeps the lower half, exchanging with
//     phase 0 (distance 4): 0<->4: 0 sends blocks 4-7, receives 0-3
//     phase 1 (distance 2): 0<->2: 0 sends 2-3, receives 0-1
//     phase 2 (distance 1): 0<->1: 0 sends 1,   receives 0     -> block 0 done
//   n = 6 (p = 4, rem = 2): 1 -> 0 and 3 -> 2 fold; virtual 0 1 2 3 are real
//     0 2 4 5 owning runs {0,1} {2,3} {4} {5}; at distance 2 virtual 0 keeps
//     blocks 0-3 and sends 4,5 (four exchanges, the last two sending nothing),
//     at distance 1 it keeps 0,1 and sends 2,3: a half is a list of blocks.
//
// Blocks are `count` long and `stride` apart (rounds take part of each block),
// so a half is several ranges: one exchange per block pair, the two lists
// zipped, the shorter side padded with zero-count transfers. The partner's
// kept list is this rank's sent list, so step i of both sides matches. The
// input is the user's and read-only (in place the output is its block `rank`):
// partial sums live in scratch, one block per kept block, `count` apart.
//
// Round rule kOneSlot: the exchanges and the tree-shaped fold cannot deadlock
// at any size, but a folding rank stages all n blocks in scratch, which rounds
// of one slot per block bound to n slots.
#include <algorithm>

#include "algorithms/registry.h"

namespace collie {

namespace {

// Real ranks folded onto p = 2^floor(log2 n) virtual ranks.
struct Fold {
  int p = 1, rem = 0;
  explicit Fold(int n) {
    while (p * 2 <= n) p *= 2;
    rem = n - p;
  }
  // First real block of virtual rank v's run, which is also v's real rank; first(p) == n.
  int first(int v) const { return v < rem ? 2 * v : v + rem; }
};

}  // namespace

Program buildReduceScatterHalving(const ProgramArgs& args) {
  Program p = emptyProgram(args, "halving");
  const int n = args.nranks, r = args.rank;
  const uint64_t count = args.count, stride = args.blockStride();
  const Range out{Buffer::kOutput, 0};
  auto in = [&](int b) { return Range{Buffer::kInput, static_cast<uint64_t>(b) * stride}; };
  if (n == 1) {
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in(0), out, count));
    p.steps.back().finalize = true;
    return p;
  }
  const Fold fold(n);
  if (r < 2 * fold.rem && r % 2 == 1) {
    // Folded out: the even neighbour reduces for both and returns the finished block.
    for (int b = 0; b < n; ++b) {
      p.steps.push_back(makeStep(StepOp::kSend, -1, -1, in(b), Range{}, count));
      p.steps.back().sendPeer = r - 1;
    }
    p.steps.push_back(makeStep(StepOp::kRecv, -1, -1, Range{}, out, count));
    p.steps.back().recvPeer = r - 1;
    p.steps.back().finalize = true;
    return p;
  }
  const bool folding = r < 2 * fold.rem;
  const int v = folding ? r / 2 : r - fold.rem;
  // Scratch holds real blocks [base, end): every block for a folding rank (the
  // fold reduces all of them), else the half kept at the first phase, which
  // contains every later phase's ranges.
  int base = 0, end = n;
  if (!folding) {
    const int half = fold.p / 2, lo = v & half;
    base = fold.first(lo);
    end = fold.first(lo + half);
  }
  p.scratchCount = static_cast<uint64_t>(end - base) * count;
  auto tmp = [&](int b) { return Range{Buffer::kScratch, static_cast<uint64_t>(b - base) * count}; };
  for (int b = base; b < end; ++b) {
    if (folding) {
      p.steps.push_back(makeStep(StepOp::kRecvReduceCopy, -1, -1, in(b), tmp(b), count));
      p.steps.back().recvPeer = r + 1;
    } else {
      p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in(b), tmp(b), count));
    }
  }
  for (int d = fold.p / 2; d >= 1; d /= 2) {
    // Keep the half of [lo, lo+2d) holding v, send the other; partner v^d does the opposite.
    const int lo = v & ~(2 * d - 1);
    const int keep = (v & d) ? lo + d : lo, give = (v & d) ? lo : lo + d;
    const int k0 = fold.first(keep), kn = fold.first(keep + d) - k0;
    const int s0 = fold.first(give), sn = fold.first(give + d) - s0;
    // Before this rank's first exchange the blocks it gives away are still only in its input.
    const bool fromInput = !folding && d == fold.p / 2;
    // Step i pairs the i-th block given with the i-th kept; past the end of
    // the shorter list that side moves 0 elements (its range is never touched).
    for (int i = 0; i < std::max(kn, sn); ++i) {
      Step x = makeStep(StepOp::kSendRecvReduce, -1, -1, tmp(k0), tmp(k0 + std::min(i, kn - 1)), 0);
      x.sendPeer = x.recvPeer = fold.first(v ^ d);
      if (i < sn) {
        x.src = fromInput ? in(s0 + i) : tmp(s0 + i);
        x.count = count;
      }
      if (i < kn) x.recvCount = count;
      p.steps.push_back(x);
    }
  }
  if (folding) {
    // Unfold: the odd neighbour's block is complete; it finalizes on receipt.
    p.steps.push_back(makeStep(StepOp::kSend, -1, -1, tmp(r + 1), Range{}, count));
    p.steps.back().sendPeer = r + 1;
  }
  p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, tmp(r), out, count));
  p.steps.back().finalize = true;
  return p;
}

}  // namespace collie
