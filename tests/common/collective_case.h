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

/// Where the buffers of a case live. kDevice: each rank's buffers are copied
/// to the current GPU, the call goes on a stream of its own, and the results
/// come back for the same checks (the CUDA backend's tests).
enum class Memory { kHost, kDevice };

/// Returns "" when every rank's result is exact, else a sentence saying which rank went wrong and how.
std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed, Memory memory = Memory::kHost);

}  // namespace test
}  // namespace collie
