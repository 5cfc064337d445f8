// The fake CUDA runtime (collie_fake_cudart): the subset of the CUDA runtime API that Collie calls,
// implemented on the CPU with the toolkit's own signatures, for builds with COLLIE_FAKE_CUDA=ON on
// machines without a GPU. Device memory is POSIX shared memory (so IPC handles work across
// processes), each stream is a FIFO run by one worker thread, and a kernel launch is a `Work` that a
// launcher enqueues here. Misuses that CUDA reports are reported with CUDA's error codes; what is
// modelled and what is simplified is listed in docs/cuda-executor.md ("a fake CUDA runtime").
#pragma once
#include <cuda_runtime_api.h>

#include <functional>

namespace fakecuda {
/// A unit of device work (a kernel launch): runs on the stream's worker thread, in stream order.
/// Its error, if any, is recorded as an asynchronous (sticky) error, as CUDA does for a failed kernel.
using Work = std::function<cudaError_t()>;
/// Enqueues `work` on `stream` (0, cudaStreamLegacy and cudaStreamPerThread mean the current device's
/// default stream). While `stream` is capturing, the work is recorded into the capture's graph instead.
/// Returns what cudaLaunchKernel would: cudaSuccess, or the error of an invalid stream / capture misuse.
cudaError_t enqueue(cudaStream_t stream, Work work);

/// Test hook: forgets `device`'s sticky error, which a real process keeps until it exits.
/// cudaErrorInvalidDevice for an index out of range.
cudaError_t clearStickyErrorForTesting(int device);
}  // namespace fakecuda

/// Test hook: how many calls that may block on device work (cudaStreamSynchronize, cudaEventSynchronize,
/// cudaDeviceSynchronize, synchronous cudaMemcpy and cudaMemset, cudaFree) the calling thread has made.
/// A test that runs on real CUDA too declares it weak and checks only where it exists: an enqueue that waits
/// on the host can deadlock on a GPU, where another rank's kernel ahead in a hardware queue waits for this
/// rank's launch (docs/cuda-executor.md, "Launch state"), while the fake's timing rarely shows it.
extern "C" unsigned long long fakecudaHostWaitsOfThisThread(void);
/// Test hook: how many calls that wait for the work of other streams the calling thread has made: every stream of
/// the device (cudaMalloc, cudaFree, cudaHostAlloc and cudaFreeHost, which wait for every device, and
/// cudaDeviceSynchronize), or every blocking one (any call on the legacy default stream). Where ranks are threads
/// sharing a GPU, such a call in init or destroy can wait for a peer's kernel that waits for this rank
/// (base/device_memory.h).
extern "C" unsigned long long fakecudaDeviceWaitsOfThisThread(void);
