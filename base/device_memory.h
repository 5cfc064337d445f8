// The memory a CUDA communicator holds for its life (device windows, flag
// counters, the window table, program blocks, scratch, collieBarrier's byte,
// the pinned status block, the proxy's and the staged path's pinned host
// memory), taken and given back without waiting for the rest of the GPU.
//
// Why: cudaMalloc, cudaFree, cudaHostAlloc and cudaFreeHost may wait for every
// kernel running on the device, and so may any call on the legacy default
// stream (a cudaMemset, a cudaMemcpy) for the kernels of blocking streams
// (CUDA's "implicit synchronization"). Ranks that are threads of one process on
// one GPU share those kernels. A rank that destroys a communicator, or ends
// making one, while a peer's kernel of another communicator already waits for
// this rank's next launch would wait for that kernel, which waits for it: both
// stop until COLLIE_TIMEOUT (docs/cuda-executor.md, "No allocation in an
// enqueue", and the test CudaBackend.DestroyBesideWaitingKernels).
//
// So device memory comes from a stream-ordered pool of the communicator's own,
// allocated, filled, read and freed on a non-blocking stream of its own that
// carries nothing else; and pinned host memory is never given back to CUDA,
// but kept for the next communicator of the process. Even that stream may share
// a hardware queue with a peer's launch held back behind its waiting kernel, so
// init waits for it only before its last barrier, and destroy never does.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "base/status.h"

namespace collie {

class DevicePool {
 public:
  /// A pool on `device`. Where the GPU has no memory pools, allocate and release fall back to cudaMalloc and
  /// cudaFree (said at INFO by `rank` 0). `timeoutSec` bounds every wait for our stream.
  static Status create(int device, int rank, double timeoutSec, std::shared_ptr<DevicePool>* out);
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  /// The cudaMemPool_t, or null without pools.
  void* handle() const { return pool_; }
  /// The non-blocking stream of our own (a cudaStream_t), made at the first need.
  Status stream(void** out);
  /// `bytes` of device memory, usable from any stream of the device once this returns.
  Status allocate(size_t bytes, void** out, const char* what);
  /// Lets kernels on `peerDevice` (a GPU of this process reached by P2P) use the pool's memory.
  Status grantAccess(int peerDevice);
  /// A copy (any direction) or a zeroing on our stream, waited for.
  Status copy(void* dst, const void* src, size_t bytes, const char* what);
  Status zero(void* p, size_t bytes, const char* what);
  /// Back to the pool after everything queued on our stream so far; with no pool, cudaFree (which may wait for
  /// the device). Null is ignored.
  void release(void* p);
  void setTimeout(double seconds) { timeoutSec_ = seconds; }

 private:
  DevicePool() = default;
  // Waits (bounded) until our stream has done all it was given.
  Status finish(const char* what);

  int device_ = -1;
  double timeoutSec_ = 300;
  void* pool_ = nullptr;    // cudaMemPool_t
  void* stream_ = nullptr;  // cudaStream_t
  std::mutex mu_;           // stream_'s creation
};

/// A zeroed block of up to kPinnedBlockBytes of mapped pinned host memory, as the host addresses it (`host`)
/// and as kernels of any GPU do (`device`). Blocks come from slabs of the process that are never freed: a
/// block given back is the next one taken.
constexpr size_t kPinnedBlockBytes = 64;
Status takePinnedBlock(void** host, void** device);
void givePinnedBlockBack(void* host);

/// A zeroed region of at least `bytes` of mapped pinned host memory (the proxy's inbox and outboxes), as the host
/// (`host`) and kernels of any GPU (`device`) address it. Regions are never freed either, since cudaFreeHost may
/// wait for the device as cudaFree may: one given back is taken again by a request it fits (at most twice as
/// large), so a process holds regions of the sizes it used, about as many of each as it had in use at once; a
/// request that no free region fits makes a new one. pinnedRegionBytesHeld() says how much is held.
Status takePinnedRegion(size_t bytes, void** host, void** device);
void givePinnedRegionBack(void* host);
size_t pinnedRegionBytesHeld();

}  // namespace collie
