// Direct-exchange building blocks: every rank talks to every other rank at
// once, in n-1 pairwise exchange steps (step k sends to rank+k and receives
// from rank-k, both directions at once), so a message is one hop from where it
// starts to where it is reduced, and no size can deadlock. The allreduces are
// composed of them: one-shot is appendDirectReduce over the whole buffer on
// every rank; two-shot is appendJoinedReduce over balanced chunks (a direct
// reduce-scatter), then appendDirectAllGather of the reduced chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/program.h"

namespace collie {

/// Direct reduce. Rank r sends `parts[j]` of `input` to every rank j != r and
/// receives its own part, parts[r], from every rank into scratch blocks by source
/// rank; then it reduces the n contributions IN RANK ORDER 0..n-1 into `result`
/// (a kCopy of rank 0's, then one kReduce per rank, the last finalizing), so
/// whichever rank reduces a part gets the same bits: floating point is not
/// associative, and this order does not depend on r.
///
/// Precondition: parts[j].count is the same on every rank (rank j receives
/// that many elements from each). `result` may alias the input (in place):
/// rank r's own part is copied to scratch before the result is written,
/// except on rank 0, whose own part is the first one read.
///
///   steps: 1 copy (r > 0) + n-1 exchanges + 1 copy + n-1 reduces
///   returns the scratch elements used: parts[r].count per other rank, plus r's own for r > 0
uint64_t appendDirectReduce(int n, int r, Buffer input, const std::vector<Chunk>& parts, Range result,
                            std::vector<Step>* steps);

/// Direct reduce into `result` with joined steps (program.h, "Joined steps"):
/// a kCopy of rank r's own part of `input` into `result` heads a group of
/// kSendRecvReduce steps, the exchanges (step k sends parts[r+k] to rank r+k and
/// reduces the part from rank r-k into `result`), in groups of up to
/// kMaxJoinedSteps steps. An executor that joins them reads each contribution
/// once and writes the result once per group; no scratch. The order is r's own,
/// then r-1, r-2, ...: it depends on r, so use it where one rank reduces each
/// part (two-shot), not where every rank reduces the same part (one-shot).
/// `result` may be r's own part of the input (in place: the copy is onto itself).
///
///   steps: 1 copy + n-1 exchanges
void appendJoinedReduce(int n, int r, Buffer input, const std::vector<Chunk>& parts, Range result,
                        std::vector<Step>* steps);

/// Direct allgather, n-1 exchanges. Rank r holds `chunks[r]` of `buffer`;
/// afterwards every rank holds every chunk there.
void appendDirectAllGather(int n, int r, const std::vector<Chunk>& chunks, Buffer buffer, std::vector<Step>* steps);

}  // namespace collie
