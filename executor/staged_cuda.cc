// The CUDA Mover of the staged path (executor/staged_executor.h): pinned
// staging, copies on the caller's stream, an event after the copy back.
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "executor/staged_executor.h"

namespace collie {

namespace {

class CudaMover final : public StagedExecutor::Mover {
 public:
  explicit CudaMover(int device) : device_(device) {}
  ~CudaMover() override {
    if (event_ != nullptr) {
      DeviceGuard guard(device_);
      (void)cudaEventSynchronize(event_);
      (void)cudaEventDestroy(event_);
    }
  }

  // From the process's pinned regions, never freed (base/device_memory.h): cudaFreeHost, in a destroy or when the
  // staging grows, could wait for a peer's kernel of another communicator on this GPU that waits for this rank.
  // Sizes go up by powers of two, so that a region given back fits later requests and the regions a process holds
  // stay within about twice its largest staging.
  Status allocate(size_t bytes, void** out, size_t* allocated) override {
    size_t rounded = 4096;
    while (rounded < bytes) rounded *= 2;
    void* device = nullptr;
    *allocated = rounded;
    return takePinnedRegion(rounded, out, &device);
  }
  void release(void* p) override { givePinnedRegionBack(p); }
  Status toHost(void* dst, const void* src, size_t bytes, collieStream_t stream) override {
    return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                      "cudaMemcpyAsync into host staging");
  }
  Status usable(collieStream_t stream) override {
    // Before anything is enqueued: a copy recorded into the capture, or a wait
    // during it (which invalidates the capture), would outlive this error.
    bool captured = false;
    COLLIE_RETURN_IF_ERROR(streamCaptured(static_cast<cudaStream_t>(stream), &captured));
    if (captured)
      return Status::error(collieInvalidUsage,
                           "a collective of a CUDA communicator on the staged path (spanning hosts, GPUs without "
                           "P2P, or COLLIE_P2P=0) cannot be captured into a CUDA graph: it goes through host staging "
                           "and waits on the host");
    return Status();
  }
  Status wait(collieStream_t stream) override {
    return cudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cudaStreamSynchronize");
  }
  Status toDevice(void* dst, const void* src, size_t bytes, collieStream_t stream) override {
    const cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (event_ == nullptr) {
      // On the communicator's GPU, as the stream is: an event and the stream it is recorded on share a device.
      DeviceGuard guard(device_);
      COLLIE_RETURN_IF_ERROR(cudaStatus(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate"));
    }
    COLLIE_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync out of host staging"));
    pending_ = true;
    return cudaStatus(cudaEventRecord(event_, s), "cudaEventRecord");
  }
  Status drained() override {
    if (!pending_) return Status();
    pending_ = false;
    return cudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize after the copy out of host staging");
  }
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) override {
    if (dst == src) return Status();
    return cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                      "cudaMemcpyAsync");
  }

 private:
  int device_;
  cudaEvent_t event_ = nullptr;
  bool pending_ = false;
};

}  // namespace

std::unique_ptr<StagedExecutor::Mover> cudaMover(int device) { return std::make_unique<CudaMover>(device); }

}  // namespace collie
