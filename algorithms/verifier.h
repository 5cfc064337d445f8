// The verifier: runs all ranks' programs of one collective symbolically and
// checks the collective's postcondition. Each element carries the set of ranks
// whose input it holds (a 64-bit mask, so up to 64 ranks), which element of
// their inputs it is, and whether avg's division was applied; a reduction of
// two sets that overlap is a double count, a missing rank is a lost
// contribution, a receive with no matching send is a deadlock.
//
// It moves data the way the executors do: each step's transfer in slices of
// `sliceElems`, into a FIFO of `nslots` slots per connection, the kSendRecv ops
// progressing their two directions independently and the others slice by
// slice, a group of joined steps as one step (VerifyOptions::joinReceives).
// With finite slots a send blocks on a full FIFO, so the verifier also
// proves that a round of a program cannot deadlock on the executor's slots.
// No clocks and no threads: ranks advance in turn until none can move.
//
// Direct programs (program.h, "Direct steps") have no slots: each rank loads and
// stores its peers' buffers in epochs between barriers (verifier_direct.cc).
// Besides the values, the verifier proves that no two ranks write one element
// in an epoch, that no rank reads an element another writes in it, that every
// access lies inside its buffer, that every rank has as many barriers, and that
// no rank reaches a peer's buffer before the first barrier or after the last.
#pragma once

#include <string>
#include <vector>

#include "algorithms/program.h"
#include "base/status.h"

namespace collie {

struct VerifyOptions {
  uint64_t sliceElems = 0;  // elements per slice; 0: each step's transfer is one slice
  uint32_t nslots = 0;      // slots per connection; 0: unbounded
  bool inPlace = false;     // the output aliases the input as the C API defines in-place for the collective
  /// Groups of joined steps (program.h) run as one, as the executors whose primitives can (Simple on the GPU,
  /// the host): sends progress independently and each slice of dst is reduced once the same slice has arrived
  /// from every peer of the group, whose slots are freed only then. False: one step after another, as LL runs
  /// them. Both must hold for a program with joined steps.
  bool joinReceives = true;
  /// Consecutive exchanges of one exchange group (program.h, exchangeGroupEnd) that each move at most one slice
  /// and touch none of each other's data run as a batch, every send first, as every executor runs them
  /// (executor/step_runner.h, exchangeBatchEnd). False: one step after another.
  bool batchExchanges = true;
};

/// Verifies programs[r] (one per rank, all of the same call). Returns an
/// error naming the rank, step and element of the first violation (and for
/// direct programs the epoch and the rank whose memory it lies in).
Status verifyPrograms(const std::vector<Program>& programs, const VerifyOptions& options = VerifyOptions());

/// Where rank `rank`'s input and output start in one shared array when the
/// call is in place (element offsets; the C API's in-place definitions).
/// False when the collective has no in-place form.
bool inPlaceBases(const Program& p, uint64_t* inputBase, uint64_t* outputBase);

}  // namespace collie
