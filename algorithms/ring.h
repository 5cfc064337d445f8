// Ring building blocks. Rank r sends to r+1 and receives from r-1 (mod n).
// Composite algorithms are assembled from these, not copied: ring allreduce is
// appendRingReduceScatter followed by appendRingAllGather over the same chunks.
#pragma once

#include <vector>

#include "algorithms/program.h"

namespace collie {

/// Ring reduce-scatter, n-1 steps. `chunks[c]` is the element range of chunk c
/// in `input`; afterwards rank r holds the full reduction of chunk r at
/// `result` (its division for avg applied). With n == 1 it is one local copy.
///
///   step 0        send chunk r-1 to r+1
///   step s<n-1    recv chunk r-s-1 from r-1, reduce with own, send to r+1
///   step n-1      recv chunk r from r-1, reduce with own, write to result
void appendRingReduceScatter(int n, int r, const std::vector<Chunk>& chunks, Buffer input, Range result,
                             std::vector<Step>* steps);

/// Ring allgather, n-1 transfers. Rank r holds chunk r at `chunks[r]` of
/// `buffer`; afterwards every rank holds every chunk there.
///
///   step 0        send chunk r to r+1
///   step s<n-1    recv chunk r-s from r-1 into place, forward to r+1
///   last          recv chunk r+1 from r-1 into place
void appendRingAllGather(int n, int r, const std::vector<Chunk>& chunks, Buffer buffer, std::vector<Step>* steps);

/// The n chunks of a balanced cut of `count` elements.
std::vector<Chunk> balancedChunks(uint64_t count, int n);

/// n rank blocks of `count` elements each, `stride` apart (reduce-scatter's input, allgather's output).
std::vector<Chunk> rankBlocks(uint64_t count, uint64_t stride, int n);

}  // namespace collie
