// Host-only launcher for the scaling kernel (kernels/scale.cu): the first half
// of a pre-multiplied sum on the CUDA backend, which core runs as an ordinary
// sum over a scaled copy of each rank's input (core/redop.cc).
#pragma once

#include <cstddef>

#include "collie.h"

namespace collie {

/// dst[i] = src[i] * scalar for `n` elements of `type` in device memory,
/// rounded once in the type (scaleBy of executor/reduce_ops.h), asynchronous
/// on `stream` (a cudaStream_t). The scalar is read on the device from
/// `deviceScalar` when it is not null (a device-resident operator: read when
/// the kernel runs), else taken from `hostScalar` (its bytes, passed by value
/// in the launch, so the caller's copy may go at once). Returns the launch's
/// cudaError_t as an int.
/// Loads every instantiation of the scaling kernel on the current device (see
/// preloadProgramKernels in launch.h for why). Returns a cudaError_t as an int.
int preloadScaleKernels();

int launchScale(collieDataType_t type, void* dst, const void* src, size_t n, const void* hostScalar,
                const void* deviceScalar, void* stream);

}  // namespace collie
