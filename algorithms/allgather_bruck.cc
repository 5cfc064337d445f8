// Bruck allgather: recursive doubling for any n. After phase k a rank holds the
// min(2^(k+1), n) blocks starting at its own (mod n), so ceil(log2 n) phases
// suffice where the ring needs n-1 steps.
//
//   phases: place own block (a local copy, a no-op in place), then
//           ceil(log2 n) phases; in phase k (d = 2^k, m = min(d, n-d)) rank r
//           sends blocks r .. r+m-1 to r-d and receives r+d .. r+d+m-1 from r+d
//   steps:  1 copy + n-1 exchanges (one per block received)
//   bytes:  each rank sends and receives (n-1) blocks, like the ring, in
//           ceil(log2 n) latencies
//
//   n = 5, rank 0 (blocks it holds after each phase):
//     start      0
//     d = 1      0 1          (sends 0 to r4, receives 1 from r1)
//     d = 2      0 1 2 3      (sends 0 1 to r3, receives 2 3 from r2)
//     d = 4      0 1 2 3 4    (m = 1: sends 0 to r1, receives 4 from r4)
//
// Classic Bruck works on a rotated buffer and rotates at the end; here every
// block is addressed individually (`count` long, `stride` apart) and received
// straight into its final place, so no rotation. One exchange per block pair
// zips the m sends with the m receives; a block sent in a phase was received
// in an earlier one (or is the own block), and source and destination of an
// exchange are different blocks.
//
// Round rule kNone: every step is an exchange, whose two directions progress
// independently; a rank at phase k step j waits only on ranks at the same
// step, so the lowest unfinished step always moves, at any size. No scratch.
#include <algorithm>

#include "algorithms/registry.h"

namespace collie {

Program buildAllGatherBruck(const ProgramArgs& args) {
  Program p = emptyProgram(args, "bruck");
  const int n = args.nranks, r = args.rank;
  const uint64_t count = args.count, stride = args.blockStride();
  auto block = [&](int b) { return Range{Buffer::kOutput, static_cast<uint64_t>(b % n) * stride}; };
  Step place;
  place.op = StepOp::kCopy;
  place.src = Range{Buffer::kInput, 0};
  place.dst = block(r);
  place.count = count;
  p.steps.push_back(place);
  for (int d = 1; d < n; d *= 2) {
    const int m = std::min(d, n - d);
    for (int j = 0; j < m; ++j) {
      p.steps.push_back(exchangeStep(StepOp::kSendRecv, wrapRank(r - d, n), wrapRank(r + d, n), block(r + j), count,
                                     block(r + d + j), count));
    }
  }
  return p;
}

}  // namespace collie
