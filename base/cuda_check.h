// One way to turn a CUDA runtime result into a Status, for every part of
// Collie that calls the runtime (core, executor, transport/cuda_ipc).
#pragma once

#include <cuda_runtime_api.h>

#include "base/status.h"

namespace collie {

/// OK for cudaSuccess; otherwise collieUnhandledCudaError "<what> failed:
/// <CUDA's sentence>", with the runtime's sticky last error cleared so the
/// next call does not see it again.
inline Status cudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status();
  (void)cudaGetLastError();
  return Status::error(collieUnhandledCudaError, "%s failed: %s", what, cudaGetErrorString(e));
}

/// Whether `stream` is being captured into a CUDA graph: work queued on it now only joins the graph, and runs
/// when the graph is launched, so nothing that waits for it (or for peers) may happen now.
inline Status streamCaptured(cudaStream_t stream, bool* captured) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const Status st = cudaStatus(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  *captured = st.ok() && capture != cudaStreamCaptureStatusNone;
  return st;
}

/// Switches this thread to relaxed stream-capture mode for the scope. Collie's
/// own queries, allocations and uploads may run while the caller's stream is
/// being captured into a graph in global mode; they are not part of the
/// captured work, and in global mode CUDA refuses them (and invalidates the
/// capture) unless the calling thread is relaxed.
class RelaxedCapture {
 public:
  RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

/// Makes `device` current for the rest of the scope, then restores the
/// caller's current device: users drive several communicators (GPUs) from one
/// thread, and a call into Collie must not change which GPU their next CUDA
/// call goes to. A negative `device` changes nothing.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (device < 0) return;
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device) set_ = cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && set_ == cudaSuccess && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  /// Whether the device could be made current.
  Status status() const { return cudaStatus(set_, "cudaSetDevice"); }

 private:
  int previous_ = -1;
  cudaError_t set_ = cudaSuccess;
};

}  // namespace collie
