// Whether a buffer lives where the communicator's executor can reach it: the
// CUDA backend's kernels fault on host memory they cannot address, and the
// host backend would read garbage through a device pointer. A fault would
// kill the process or poison the CUDA context; an error names the argument.
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#include "core/api_checks.h"

namespace collie {
namespace api {

namespace {

// Device memory can only exist when the runtime finds a GPU; asked once.
bool anyGpu() {
  static const bool any = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return count > 0;
  }();
  return any;
}

}  // namespace

Status checkPlacement(collieComm_t comm, const void* p, const char* call, const char* what) {
  if (p == nullptr || !anyGpu()) return Status();
  cudaPointerAttributes attr;
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    attr.type = cudaMemoryTypeUnregistered;
  }
  if (comm->backend != collieBackendCuda) {
    if (attr.type == cudaMemoryTypeDevice)
      return Status::error(collieInvalidArgument,
                           "%s: %s is memory of GPU %d, but this communicator runs on the host backend: pass host "
                           "memory, or create the communicator with COLLIE_DEVICE=cuda",
                           call, what, attr.device);
    return Status();
  }
  switch (attr.type) {
    case cudaMemoryTypeDevice:
      if (attr.device != comm->cudaDevice)
        return Status::error(collieInvalidArgument, "%s: %s is memory of GPU %d, but this communicator uses GPU %d",
                             call, what, attr.device, comm->cudaDevice);
      return Status();
    case cudaMemoryTypeManaged:
      return Status();
    case cudaMemoryTypeHost:
      if (attr.devicePointer == p) return Status();  // pinned and mapped at the same address
      return Status::error(collieInvalidArgument,
                           "%s: %s is pinned host memory that is not mapped at the same address on the GPU", call,
                           what);
    default:
      return Status::error(collieInvalidArgument,
                           "%s: %s is host memory the GPU cannot reach, but this communicator runs on GPU %d: pass "
                           "device memory (cudaMalloc), or create the communicator with COLLIE_DEVICE=host",
                           call, what, comm->cudaDevice);
  }
}

Status checkStream(collieComm_t comm, collieStream_t stream, const char* call) {
  if (comm->backend != collieBackendCuda || stream == nullptr || stream == comm->streamChecked) return Status();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  // The special handles mean "the current device's": there is nothing to compare.
  if (s == cudaStreamLegacy || s == cudaStreamPerThread) return Status();
  // Asking for a stream's device is an "unsafe" call while a graph is being captured in global mode
  // (CUDA refuses it and invalidates the capture): ask in relaxed mode, and leave a
  // capturing stream alone (its device is checked when it is first used outside a capture).
  RelaxedCapture relaxed;
  // A stream the query fails on is refused below, by cudaStreamGetDevice's own sentence.
  bool captured = false;
  if (streamCaptured(s, &captured).ok() && captured) return Status();
  int device = -1;
  const cudaError_t e = cudaStreamGetDevice(s, &device);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::error(collieInvalidArgument, "%s: stream %p is not a usable CUDA stream (%s)", call, stream,
                         cudaGetErrorString(e));
  }
  if (device != comm->cudaDevice)
    return Status::error(collieInvalidArgument, "%s: stream %p belongs to GPU %d, but this communicator uses GPU %d",
                         call, stream, device, comm->cudaDevice);
  comm->streamChecked = stream;  // a loop on one stream asks the runtime once
  return Status();
}

}  // namespace api
}  // namespace collie
