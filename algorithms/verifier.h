// The verifier: runs all ranks' programs of one collective symbolically and
// checks the collective's postcondition. Each element carries the set of ranks
// whose input it holds (a 64-bit mask, so up to 64 ranks) and whether avg's
// division was applied; a reduction of two sets that overlap is a double
// count, a missing rank is a lost contribution, a receive with no matching
// send is a deadlock. No clocks and no threads: ranks advance in turn until no
// rank can move.
#pragma once

#include <string>
#include <vector>

#include "algorithms/program.h"
#include "core/status.h"

namespace collie {

/// Verifies programs[r] (one per rank, all of the same call). Returns an
/// error naming the rank, step and element of the first violation.
Status verifyPrograms(const std::vector<Program>& programs);

}  // namespace collie
