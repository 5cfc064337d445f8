// Recursive halving-doubling allreduce (Rabenseifner): a reduce-scatter by
// recursive halving, then an allgather by recursive doubling, over p balanced
// chunks. Latency grows with 2 log2 n steps instead of the ring's 2(n-1), for
// the same bytes.
//
// n not a power of two: p = the largest power of two <= n, rem = n - p. The
// first 2*rem ranks fold in pairs: odd rank 2i+1 sends its whole input to 2i,
// which reduces it into its own, plays virtual rank i in the halving and
// doubling, and at the end sends 2i+1 the finished result. Ranks from 2*rem on
// are virtual ranks rem..p-1.
//
//   phases: fold (n != 2^k), log2 p halving exchanges, log2 p doubling exchanges, unfold
//   steps:  1 copy + 2 log2 p exchanges; a folding even rank: 1 fold receive
//           (reducing into the output, no copy) + 2 log2 p exchanges + 1 send;
//           a folded-out odd rank: 1 send + 1 receive
//   bytes:  each virtual rank sends 2(p-1)/p of the buffer; fold and unfold add
//           one whole buffer each way between the pair
//   scratch: none: the copy puts the input in the output, every exchange
//           reduces into or receives into the output
//
//   n = 8, chunks 0-7; rank 0 (partner r ^ d at distance d):
//     halving  d=4: 0<->4 send 4-7, recv+reduce 0-3
//              d=2: 0<->2 send 2-3, recv+reduce 0-1
//              d=1: 0<->1 send 1,   recv+reduce 0    -> chunk 0 final
//     doubling d=1: 0<->1 send 0,   recv 1
//              d=2: 0<->2 send 0-1, recv 2-3
//              d=4: 0<->4 send 0-3, recv 4-7
//   n = 6 (p = 4, rem = 2): 1 -> 0 and 3 -> 2 fold; virtual 0 1 2 3 are real
//     0 2 4 5; 1 and 3 sit out and receive the result from 0 and 2.
//
// Round rule kNone: the pairwise steps are exchanges, whose two directions
// progress independently, and the fold and unfold are a send that the peer's
// first (last) step receives; no size can deadlock, and there is no scratch.
#include "algorithms/registry.h"
#include "algorithms/ring.h"

namespace collie {

namespace {}  // namespace

Program buildAllReduceRhd(const ProgramArgs& args) {
  Program p = emptyProgram(args, "rhd");
  const int n = args.nranks, r = args.rank;
  const uint64_t count = args.count;
  const Range in{Buffer::kInput, 0}, out{Buffer::kOutput, 0};
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int rem = n - pow2;

  if (r < 2 * rem && r % 2 == 1) {
    // Folded out: the even neighbour reduces for both and returns the result.
    p.steps.push_back(makeStep(StepOp::kSend, r - 1, -1, in, Range{}, count));
    p.steps.push_back(makeStep(StepOp::kRecv, -1, r - 1, Range{}, out, count));
    return p;
  }

  const bool folding = r < 2 * rem;
  const int v = folding ? r / 2 : r - rem;  // virtual rank
  auto real = [&](int u) { return u < rem ? 2 * u : u + rem; };
  Step start;
  start.count = count;
  start.src = in;
  start.dst = out;
  if (folding) {
    start.op = StepOp::kRecvReduceCopy;  // the odd neighbour's input + own -> output
    start.recvPeer = r + 1;
  } else {
    start.op = StepOp::kCopy;  // a no-op in place
    start.finalize = n == 1;
  }
  p.steps.push_back(start);

  const std::vector<Chunk> chunks = balancedChunks(count, pow2);
  // Chunks [first, first + len) are one range of the output: where it starts, how long it is.
  auto span = [&](int first) { return Range{Buffer::kOutput, chunks[static_cast<size_t>(first)].offset}; };
  auto spanCount = [&](int first, int len) {
    const Chunk& last = chunks[static_cast<size_t>(first + len - 1)];
    return last.offset + last.count - chunks[static_cast<size_t>(first)].offset;
  };
  // Halving: at distance d the rank holds the 2d chunks from v & ~(2d-1); it
  // keeps the half its bit d selects (ending with chunk v) and sends the other.
  for (int d = pow2 / 2; d >= 1; d /= 2) {
    const int lo = v & ~(2 * d - 1);
    const int keep = (v & d) ? lo + d : lo, give = (v & d) ? lo : lo + d;
    Step x = exchangeStep(StepOp::kSendRecvReduce, real(v ^ d), real(v ^ d), span(give), spanCount(give, d), span(keep),
                          spanCount(keep, d));
    x.finalize = d == 1;  // chunk v now holds every contribution
    p.steps.push_back(x);
  }
  // Doubling: at distance d the rank holds the d chunks from v & ~(d-1); it
  // swaps them for the partner's d, the other half of the 2d-chunk run.
  for (int d = 1; d < pow2; d *= 2) {
    const int mine = v & ~(d - 1), theirs = mine ^ d;
    p.steps.push_back(exchangeStep(StepOp::kSendRecv, real(v ^ d), real(v ^ d), span(mine), spanCount(mine, d),
                                   span(theirs), spanCount(theirs, d)));
  }

  if (folding) {
    Step send;
    send.op = StepOp::kSend;
    send.sendPeer = r + 1;
    send.src = out;
    send.count = count;
    p.steps.push_back(send);
  }
  return p;
}

}  // namespace collie
