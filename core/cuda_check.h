// One way to turn a CUDA runtime result into a Status, for every part of
// Collie that calls the runtime (core, executor, transport/cuda_ipc).
#pragma once

#include <cuda_runtime_api.h>

#include "core/status.h"

namespace collie {

/// OK for cudaSuccess; otherwise collieUnhandledCudaError "<what> failed:
/// <CUDA's sentence>", with the runtime's sticky last error cleared so the
/// next call does not see it again.
inline Status cudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  (void)cudaGetLastError();
  return Status::error(collieUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(e));
}

}  // namespace collie
