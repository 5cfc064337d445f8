// One-shot allreduce, for small messages: every rank sends its whole input to
// every other rank and reduces all n inputs itself. One hop of latency and no
// dependency chain between ranks, at the price of n-1 times the bandwidth.
//
//   phases: own input to scratch (rank > 0), n-1 exchanges, local reduce in rank order
//   steps:  2n (rank 0: 2n-1): 1 copy + n-1 kSendRecv + 1 copy + n-1 kReduce
//   bytes:  each rank sends and receives (n-1) * count
//   scratch: n blocks of count (rank 0: n-1), one per source rank
//
//   n = 3, rank 1 (inputs x0 x1 x2; tmp[j] holds x_j):
//     copy      in -> tmp[1]
//     exchange  in -> r2    r0 -> tmp[0]
//     exchange  in -> r0    r2 -> tmp[2]
//     out = tmp[0];  out = out + tmp[1];  out = out + tmp[2]  (final)
//
// Every rank adds the inputs in the same order, 0 to n-1, so all ranks end
// with the same bits even though floating-point addition is not associative.
// In place the output is the input, so a rank's own input is copied to scratch
// before the output is first written (rank 0's is the first one read).
//
// Round rule kOneSlot: the exchanges cannot deadlock at any size, but scratch
// grows with n x count; rounds of one slot bound it to n slots. This is the
// small-message algorithm: a message bigger than a slot is better served by
// two-shot or the ring. Exchanges of one slice each, as these are within a
// round, run as one batch (executor/step_runner.h, exchangeBatchEnd): every
// send goes out before any receive is waited for, so the n-1 exchanges cost
// one round trip, not n-1 in a row.
#include "algorithms/direct_exchange.h"
#include "algorithms/registry.h"

namespace collie {

Program buildAllReduceOneShot(const ProgramArgs& args) {
  Program p = emptyProgram(args, "oneshot");
  // Every rank's "part" is its whole input: each rank reduces everything.
  const std::vector<Chunk> whole(static_cast<size_t>(args.nranks), Chunk{0, args.count});
  p.scratchCount =
      appendDirectReduce(args.nranks, args.rank, Buffer::kInput, whole, Range{Buffer::kOutput, 0}, &p.steps);
  return p;
}

}  // namespace collie
