// Pairwise-exchange all-to-all and all-to-all-v. At step k rank r sends its
// block for rank r+k and receives rank r-k's block for it, both at once in one
// kSendRecv; step 0 is the rank's own block, a local copy.
//
//   phases: one; n-1 exchanges after the self-copy
//   steps:  n (1 copy + n-1 exchanges); an empty copy and an exchange empty
//           both ways, as zero counts make, are left out
//   bytes:  each rank sends every block but its own once, (n-1)*count for the
//           uniform all-to-all, and receives as much; no scratch, no forwarding
//
//   n = 4, rank 1:   step 0  copy  in[1] -> out[1]
//                    step 1  send  in[2] -> r2   recv r0 -> out[0]
//                    step 2  send  in[3] -> r3   recv r3 -> out[3]
//                    step 3  send  in[0] -> r0   recv r2 -> out[2]
//
// Each ordered pair (r, r+k) talks at step k only, so a connection carries one
// message per call. Round rule kNone: an exchange progresses its two directions
// independently, so a rank at step k waits only on ranks r+k and r-k at the
// same step, who wait only on steps before it: at any size the lowest
// unfinished step always moves. All-to-all has no in-place form, so input and
// output are distinct and an exchange never sends from where it receives.
//
// The uniform all-to-all is the -v form with every count `count` and block j
// at j*stride on both sides; one builder serves both.
#include <algorithm>
#include <vector>

#include "algorithms/registry.h"

namespace collie {

namespace {

// Element j of a per-peer vector; 0 past its end, so short vectors from a
// broken call become count mismatches the verifier (and the core) can report.
uint64_t peerValue(const std::vector<uint64_t>& v, int j) {
  return static_cast<size_t>(j) < v.size() ? v[static_cast<size_t>(j)] : 0;
}

// Where peer j's block starts. An empty block may name a displacement at or past
// its buffer's end (callers pack blocks and leave zeros anywhere); it is never
// read or written, so it points at the start, which every buffer has.
Range block(Buffer buffer, const std::vector<uint64_t>& counts, const std::vector<uint64_t>& displs, int j) {
  return Range{buffer, peerValue(counts, j) ? peerValue(displs, j) : 0};
}

}  // namespace

Program buildAllToAllPairwise(const ProgramArgs& args) {
  Program p = emptyProgram(args, "pairwise");
  const int n = args.nranks, r = args.rank;
  std::vector<uint64_t> sendCounts = args.sendCounts, sendDispls = args.sendDispls;
  std::vector<uint64_t> recvCounts = args.recvCounts, recvDispls = args.recvDispls;
  if (args.collective == Collective::kAllToAll) {
    sendCounts.assign(static_cast<size_t>(n), args.count);
    sendDispls.resize(static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) sendDispls[static_cast<size_t>(j)] = static_cast<uint64_t>(j) * args.blockStride();
    recvCounts = sendCounts;
    recvDispls = sendDispls;
  }
  // Step 0: the own block. Never more than this rank expects, so a mismatch cannot write past its block.
  Step self;
  self.op = StepOp::kCopy;
  self.count = std::min(peerValue(sendCounts, r), peerValue(recvCounts, r));
  self.src = block(Buffer::kInput, sendCounts, sendDispls, r);
  self.dst = block(Buffer::kOutput, recvCounts, recvDispls, r);
  if (self.count != 0) p.steps.push_back(self);
  for (int k = 1; k < n; ++k) {
    const int to = wrapRank(r + k, n), from = wrapRank(r - k, n);
    const Step x = exchangeStep(StepOp::kSendRecv, to, from, block(Buffer::kInput, sendCounts, sendDispls, to),
                                peerValue(sendCounts, to), block(Buffer::kOutput, recvCounts, recvDispls, from),
                                peerValue(recvCounts, from));
    // Nothing either way: the peers' matching steps are empty too, and the connection is used at step k only.
    if (x.count == 0 && x.recvCount == 0) continue;
    p.steps.push_back(x);
  }
  return p;
}

}  // namespace collie
