// Recursive doubling allreduce, for small messages: log2 n exchanges of the
// whole buffer, each rank adding its partner's partial sum to its own. Fewer
// hops in sequence than any other allreduce here but oneshot (ring 2(n-1),
// rhd 2 log2 n), and unlike oneshot each hop waits on one peer, not n-1: when
// ranks outnumber cores, every peer waited on may be descheduled, and a hop
// that waits on one peer costs one hand-over of the core. This is MPI's usual
// choice for short allreduces.
//
//   phase 0  (n not a power of two; p = the largest power of two below n)
//            rank p + i sends its input to rank i, which adds it      (1 hop)
//   phase 1  for mask = 1, 2, .. p/2: exchange the whole partial sum
//            with rank r ^ mask, add the partner's                    (log2 p hops)
//   phase 2  rank i sends the result back to rank p + i               (1 hop)
//
//   n = 4:  step 0  0<->1  2<->3     step 1  0<->2  1<->3
//
// Every rank sends count x log2 p elements (ring allreduce: about 2 count).
// The partner's sum arrives in scratch, then one local reduce adds it, since
// an exchange may not receive into the range it sends from. Partners add the
// same two partial sums, in either order, so every rank ends bitwise equal
// (sum and product of floats are commutative, and so are min and max).
// Round rule kOneSlot: scratch stays one slot, and the tuner picks this for
// sizes that fit in one anyway.
#include "algorithms/registry.h"

namespace collie {

Program buildAllReduceRd(const ProgramArgs& args) {
  Program p = emptyProgram(args, "rd");
  const int n = args.nranks, r = args.rank;
  const uint64_t count = args.count;
  const Range in{Buffer::kInput, 0}, out{Buffer::kOutput, 0}, partner{Buffer::kScratch, 0};
  if (n == 1) {
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in, out, count, true));
    return p;
  }
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  const int extra = n - pow2;
  if (r >= pow2) {  // folded in: hand the input over, get the result back
    p.steps.push_back(makeStep(StepOp::kSend, r - pow2, -1, in, Range{}, count));
    p.steps.push_back(makeStep(StepOp::kRecv, -1, r - pow2, Range{}, out, count));
    return p;
  }
  if (r < extra) {
    p.steps.push_back(makeStep(StepOp::kRecvReduceCopy, -1, r + pow2, in, out, count));
  } else {
    p.steps.push_back(makeStep(StepOp::kCopy, -1, -1, in, out, count));
  }
  for (int mask = 1; mask < pow2; mask *= 2) {
    p.steps.push_back(exchangeStep(StepOp::kSendRecv, r ^ mask, r ^ mask, out, count, partner, count));
    p.steps.push_back(makeStep(StepOp::kReduce, -1, -1, partner, out, count, mask * 2 == pow2));
  }
  if (r < extra) p.steps.push_back(makeStep(StepOp::kSend, r + pow2, -1, out, Range{}, count));
  p.scratchCount = count;
  return p;
}

}  // namespace collie
