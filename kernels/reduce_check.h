// Host-only launcher for the element-wise reduction kernel, the device side of
// executor/reduce_ops.h. tests/gpu compares its results with the host
// executor's operators for every type and op; the collective kernels that use
// the same operators land with the CUDA executor.
#pragma once

#include <cstddef>

#include "collie.h"

namespace collie {

/// out[i] = a[i] (op) b[i] (avg: then divided by `divisor`) on the device, for
/// device pointers a, b, out of `n` elements of `type`; asynchronous on
/// `stream` (a cudaStream_t). Returns the cudaError_t of the launch as an int.
int launchReduceCheck(collieDataType_t type, collieRedOp_t op, const void* a, const void* b, void* out, size_t n,
                      int divisor, void* stream);

}  // namespace collie
