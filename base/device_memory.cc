#include "base/device_memory.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#include "base/cuda_check.h"
#include "base/log.h"

namespace collie {

Status DevicePool::create(int device, int rank, double timeoutSec, std::shared_ptr<DevicePool>* out) {
  std::shared_ptr<DevicePool> p(new DevicePool());
  p->device_ = device;
  p->timeoutSec_ = timeoutSec;
  DeviceGuard guard(device);
  COLLIE_RETURN_IF_ERROR(guard.status());
  int supported = 0;
  if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess || supported == 0) {
    (void)cudaGetLastError();
    if (rank == 0)
      COLLIE_INFO(
          "GPU %d has no memory pools: a communicator's device memory comes from cudaMalloc, which may wait for "
          "the device while a peer's kernel waits for this rank",
          device);
    *out = std::move(p);
    return Status();
  }
  cudaMemPoolProps props;
  memset(&props, 0, sizeof(props));
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate"));
  p->pool_ = pool;
  // Freed memory stays in the pool until it is destroyed (the communicator's program blocks and scratch are
  // reused, a pre-multiplied sum's staging comes and goes with each call); and no allocation takes memory
  // another stream freed, which would make it wait for that stream. Our own pool, not the device's default
  // one: another library's cudaFreeAsync into a shared pool could bring such a wait along.
  uint64_t keep = UINT64_MAX;
  int no = 0;
  COLLIE_RETURN_IF_ERROR(
      cudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute"));
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &no),
                                    "cudaMemPoolSetAttribute"));
  *out = std::move(p);
  return Status();
}

DevicePool::~DevicePool() {
  DeviceGuard guard(device_);
  // Neither waits: the stream goes once its queued releases are done, and the pool once nothing of it is in use.
  // Waiting here could wait behind a peer's blocked launch in the hardware queue our stream shares.
  if (stream_ != nullptr) (void)cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  if (pool_ != nullptr) (void)cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool_));
  (void)cudaGetLastError();
}

Status DevicePool::stream(void** out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stream_ == nullptr) {
    DeviceGuard guard(device_);
    cudaStream_t s = nullptr;
    COLLIE_RETURN_IF_ERROR(cudaStatus(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    stream_ = s;
  }
  *out = stream_;
  return Status();
}

Status DevicePool::finish(const char* what) {
  RelaxedCapture relaxed;  // while another thread captures in global mode
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSec_);
  for (;;) {
    const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
    if (e == cudaSuccess) return Status();
    if (e != cudaErrorNotReady) return cudaStatus(e, what);
    if (std::chrono::steady_clock::now() > deadline)
      return Status::error(collieTimeout, "%s on GPU %d took over %.1f s", what, device_, timeoutSec_);
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

Status DevicePool::allocate(size_t bytes, void** out, const char* what) {
  *out = nullptr;
  DeviceGuard guard(device_);
  RelaxedCapture relaxed;
  if (pool_ == nullptr) return cudaStatus(cudaMalloc(out, bytes), what);
  void* s = nullptr;
  COLLIE_RETURN_IF_ERROR(stream(&s));
  COLLIE_RETURN_IF_ERROR(cudaStatus(
      cudaMallocFromPoolAsync(out, bytes, static_cast<cudaMemPool_t>(pool_), static_cast<cudaStream_t>(s)), what));
  // Until our stream reaches the allocation only our stream may use it; nothing in our pool waits for other
  // work, so that is at once.
  return finish(what);
}

Status DevicePool::grantAccess(int peerDevice) {
  if (pool_ == nullptr || peerDevice == device_) return Status();
  cudaMemAccessDesc desc;
  memset(&desc, 0, sizeof(desc));
  desc.location.type = cudaMemLocationTypeDevice;
  desc.location.id = peerDevice;
  desc.flags = cudaMemAccessFlagsProtReadWrite;
  return cudaStatus(cudaMemPoolSetAccess(static_cast<cudaMemPool_t>(pool_), &desc, 1),
                    "cudaMemPoolSetAccess for a peer's GPU");
}

Status DevicePool::copy(void* dst, const void* src, size_t bytes, const char* what) {
  DeviceGuard guard(device_);
  RelaxedCapture relaxed;
  void* s = nullptr;
  COLLIE_RETURN_IF_ERROR(stream(&s));
  COLLIE_RETURN_IF_ERROR(
      cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(s)), what));
  return finish(what);
}

Status DevicePool::zero(void* p, size_t bytes, const char* what) {
  DeviceGuard guard(device_);
  RelaxedCapture relaxed;
  void* s = nullptr;
  COLLIE_RETURN_IF_ERROR(stream(&s));
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMemsetAsync(p, 0, bytes, static_cast<cudaStream_t>(s)), what));
  return finish(what);
}

void DevicePool::release(void* p) {
  if (p == nullptr) return;
  DeviceGuard guard(device_);
  RelaxedCapture relaxed;
  void* s = nullptr;
  if (pool_ == nullptr || !stream(&s).ok() || cudaFreeAsync(p, static_cast<cudaStream_t>(s)) != cudaSuccess)
    (void)cudaFree(p);
  (void)cudaGetLastError();
}

namespace {

// Pinned blocks: slabs of kSlabBlocks, allocated when none is free and never freed.
constexpr size_t kSlabBlocks = 64;

struct PinnedBlocks {
  std::mutex mu;
  std::vector<std::pair<uint8_t*, uint8_t*>> free;   // (host, device)
  std::vector<std::pair<uint8_t*, uint8_t*>> slabs;  // (host, device) of each slab's start
};

PinnedBlocks& pinned() {
  static auto* p = new PinnedBlocks();  // never destroyed: communicators may outlive main
  return *p;
}

// Pinned regions: one cudaHostAlloc each, never freed.
struct PinnedRegion {
  uint8_t* host;
  uint8_t* device;
  size_t bytes;
  bool taken;
};

struct PinnedRegions {
  std::mutex mu;
  std::vector<PinnedRegion> all;
};

PinnedRegions& regions() {
  static auto* r = new PinnedRegions();  // never destroyed, as pinned()
  return *r;
}

// Mapped pinned host memory from CUDA: portable, since any GPU of the process may be the next communicator's;
// mapped, since its kernels write there. Called with no lock of ours held: cudaHostAlloc may wait for the device,
// whose kernels may wait for a rank that is blocked on that lock, giving a block back in its destroy.
Status allocatePinned(size_t bytes, const char* what, uint8_t** host, uint8_t** device) {
  void* h = nullptr;
  void* d = nullptr;
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable), what));
  const Status s = cudaStatus(cudaHostGetDevicePointer(&d, h, 0), "cudaHostGetDevicePointer");
  if (!s.ok()) {
    (void)cudaFreeHost(h);
    return s;
  }
  *host = static_cast<uint8_t*>(h);
  *device = static_cast<uint8_t*>(d);
  return Status();
}

}  // namespace

Status takePinnedBlock(void** host, void** device) {
  PinnedBlocks& p = pinned();
  std::unique_lock<std::mutex> lock(p.mu);
  while (p.free.empty()) {
    lock.unlock();
    uint8_t* h = nullptr;
    uint8_t* d = nullptr;
    COLLIE_RETURN_IF_ERROR(
        allocatePinned(kSlabBlocks * kPinnedBlockBytes, "cudaHostAlloc of pinned status blocks", &h, &d));
    lock.lock();
    p.slabs.emplace_back(h, d);
    for (size_t i = kSlabBlocks; i-- > 0;) p.free.emplace_back(h + i * kPinnedBlockBytes, d + i * kPinnedBlockBytes);
  }
  const auto b = p.free.back();
  p.free.pop_back();
  lock.unlock();
  memset(b.first, 0, kPinnedBlockBytes);
  *host = b.first;
  *device = b.second;
  return Status();
}

void givePinnedBlockBack(void* host) {
  if (host == nullptr) return;
  PinnedBlocks& p = pinned();
  std::lock_guard<std::mutex> lock(p.mu);
  auto* h = static_cast<uint8_t*>(host);
  for (const auto& slab : p.slabs) {
    if (h < slab.first || h >= slab.first + kSlabBlocks * kPinnedBlockBytes) continue;
    p.free.emplace_back(h, slab.second + (h - slab.first));
    return;
  }
  COLLIE_WARN("a pinned block at %p given back is not one of ours; ignored", host);
}

Status takePinnedRegion(size_t bytes, void** host, void** device) {
  PinnedRegions& r = regions();
  uint8_t* h = nullptr;
  uint8_t* d = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    PinnedRegion* best = nullptr;
    for (PinnedRegion& region : r.all)
      if (!region.taken && region.bytes >= bytes && region.bytes / 2 <= bytes &&
          (best == nullptr || region.bytes < best->bytes))
        best = &region;
    if (best != nullptr) {
      best->taken = true;
      h = best->host;
      d = best->device;
    }
  }
  if (h == nullptr) {
    COLLIE_RETURN_IF_ERROR(allocatePinned(
        bytes, "cudaHostAlloc of pinned host memory (the proxy's, or staging for the host path)", &h, &d));
    std::lock_guard<std::mutex> lock(r.mu);
    r.all.push_back(PinnedRegion{h, d, bytes, true});
  }
  memset(h, 0, bytes);
  *host = h;
  *device = d;
  return Status();
}

void givePinnedRegionBack(void* host) {
  if (host == nullptr) return;
  PinnedRegions& r = regions();
  std::lock_guard<std::mutex> lock(r.mu);
  for (PinnedRegion& region : r.all) {
    if (region.host != host) continue;
    if (!region.taken) COLLIE_WARN("the pinned region at %p was given back twice; ignored", host);
    region.taken = false;
    return;
  }
  COLLIE_WARN("a pinned region at %p given back is not one of ours; ignored", host);
}

size_t pinnedRegionBytesHeld() {
  PinnedRegions& r = regions();
  std::lock_guard<std::mutex> lock(r.mu);
  size_t total = 0;
  for (const PinnedRegion& region : r.all) total += region.bytes;
  return total;
}

}  // namespace collie
