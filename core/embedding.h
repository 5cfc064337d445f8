// What a library built on Collie's internals (compat/nccl's libnccl.so.2) may use beyond include/collie.h: the
// one embedding header of core/. It exposes facts and entry points, never collieComm's layout, so that the
// drop-in NCCL does not move when the communicator does (tests/layers_check.sh keeps compat/ to this header).
#pragma once

#include <cstddef>

#include "base/status.h"
#include "collie.h"
#include "core/errors.h"  // report(), resultName(), lastErrorText(): how a Status becomes a result code

namespace collie {
namespace embedding {

/// What an embedding library may read of a live communicator.
struct CommFacts {
  int nranks = 0;
  int rank = -1;
  size_t deviceFootprint = 0;  // CUDA backend: device bytes the rank holds since init
};

/// Reads `comm`'s facts while holding it against a concurrent destroy; false when `comm` is not a live
/// communicator.
bool commFacts(collieComm_t comm, CommFacts* out);

/// Closes the calling thread's group without running its operations (NCCL's ncclGroupSimulateEnd); *dropped
/// is how many there were.
Status endGroupWithoutRunning(size_t* dropped);

/// The init timeout a new communicator gets from the environment (COLLIE_INIT_TIMEOUT), in seconds.
Status initTimeoutSec(double* out);

}  // namespace embedding
}  // namespace collie
