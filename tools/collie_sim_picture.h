// collie-sim's picture of a call (`collie-sim show --picture`): one column per rank and one row per step, each
// step in a few characters; direct programs (algorithms/program.h, "Direct steps") aligned at their barriers.
#pragma once

#include <vector>

#include "algorithms/program.h"

namespace collie {
namespace sim {

/// Prints the programs of every rank of one call as a grid, with a legend; only rank `only`'s column when it is
/// not negative.
void printPicture(const std::vector<Program>& programs, int only);

}  // namespace sim
}  // namespace collie
