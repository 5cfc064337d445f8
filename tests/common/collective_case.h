// One checked collective call on every rank of a thread clique: random inputs
// (from `seed`), poisoned outputs plus one poisoned byte past the end, the
// placement the API defines for in-place, an independent reference, and a
// check that out-of-place calls leave sendbuff alone.
#pragma once

#include <cstdint>
#include <string>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/test_util.h"

namespace collie {
namespace test {

/// Returns "" when every rank's result is exact, else a sentence saying which rank went wrong and how.
std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed);

}  // namespace test
}  // namespace collie
