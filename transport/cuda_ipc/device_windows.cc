#include "transport/cuda_ipc/device_windows.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <mutex>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "base/log.h"
#include "transport/bootstrap/bootstrap.h"

namespace collie {

namespace {

// What each rank publishes about its window. Raw bytes over the bootstrap.
struct WindowRecord {
  cudaIpcMemHandle_t handle;
  uint64_t pointer;  // valid only inside the publishing process
  int32_t device;
  int32_t pooled;  // from the owner's pool, held by its peers in the process (PooledWindow)
};

}  // namespace

// A window from its owner's pool, and that pool: given back once the owner and every peer of the process that
// maps it have let go. A peer's kernel may still read or write our window after we are destroyed (it waits for
// a rank that left mid-call, until its timeout or abort); the memory must stay until the peer's destroy, which
// waits for its kernels. (cudaFree would give that wait too, by waiting for the whole device, which no destroy may.)
struct DeviceWindows::PooledWindow {
  std::shared_ptr<DevicePool> pool;
  void* ptr = nullptr;
  ~PooledWindow();
};

namespace {

// The pooled windows of this process by address, for peers to find and hold.
std::mutex gPooledMu;
std::map<const void*, std::weak_ptr<DeviceWindows::PooledWindow>>& pooledWindows() {
  static auto* m = new std::map<const void*, std::weak_ptr<DeviceWindows::PooledWindow>>();  // ranks may outlive main
  return *m;
}

}  // namespace

DeviceWindows::PooledWindow::~PooledWindow() {
  {
    // Before the release: once given back, the address may be handed out again.
    std::lock_guard<std::mutex> lock(gPooledMu);
    pooledWindows().erase(ptr);
  }
  pool->release(ptr);
}

Status DeviceWindows::create(Bootstrap* bootstrap, const std::vector<PeerInfo>& peers, int device, size_t bytes,
                             size_t stagingBytes, std::shared_ptr<DevicePool> pool,
                             std::unique_ptr<DeviceWindows>* out) {
  std::unique_ptr<DeviceWindows> w(new DeviceWindows());
  w->device_ = device;
  w->bytes_ = bytes;
  DeviceGuard guard(device);
  COLLIE_RETURN_IF_ERROR(guard.status());
  const int n = bootstrap->nranks(), rank = bootstrap->rank();
  // A peer process of this host maps the window through a cudaIpc handle, which only cudaMalloc memory has. Else
  // the window comes from the communicator's pool (base/device_memory.h), opened to the other GPUs of this
  // process that peers run on.
  std::vector<int> peerDevices;
  bool ipc = false;
  for (int r = 0; r < n; ++r) {
    if (r == rank || !sameHost(peers, r, rank)) continue;
    if (!sameProcess(peers, r, rank))
      ipc = true;
    else if (peers[static_cast<size_t>(r)].cudaDevice != device)
      peerDevices.push_back(peers[static_cast<size_t>(r)].cudaDevice);
  }
  void* own = nullptr;
  if (ipc) {
    COLLIE_RETURN_IF_ERROR(
        cudaStatus(cudaMalloc(&own, bytes + stagingBytes), "cudaMalloc of the device window and staging buffer"));
    w->own_ = static_cast<uint8_t*>(own);
    w->stagingBytes_ = stagingBytes;
  } else {
    COLLIE_RETURN_IF_ERROR(pool->allocate(bytes, &own, "allocating the device window"));
    auto held = std::make_shared<PooledWindow>();
    held->pool = pool;
    held->ptr = own;
    w->held_.push_back(held);
    for (int d : peerDevices) COLLIE_RETURN_IF_ERROR(pool->grantAccess(d));
  }
  // Flags start at zero, and the zeroes land before any peer can learn the window's address. On the pool's
  // stream: a cudaMemset would go to the legacy stream, which waits for the kernels of blocking streams.
  COLLIE_RETURN_IF_ERROR(pool->zero(own, bytes, "zeroing the device window"));
  if (!ipc) {
    std::lock_guard<std::mutex> lock(gPooledMu);
    pooledWindows()[own] = w->held_.back();
  }

  std::vector<WindowRecord> records(static_cast<size_t>(n));
  WindowRecord& mine = records[static_cast<size_t>(rank)];
  memset(&mine, 0, sizeof(mine));
  if (ipc) COLLIE_RETURN_IF_ERROR(cudaStatus(cudaIpcGetMemHandle(&mine.handle, own), "cudaIpcGetMemHandle"));
  mine.pooled = ipc ? 0 : 1;
  mine.pointer = reinterpret_cast<uint64_t>(own);
  mine.device = device;
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(records.data(), sizeof(WindowRecord)));

  w->windows_.resize(static_cast<size_t>(n));
  w->ownerAddresses_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) w->ownerAddresses_[static_cast<size_t>(r)] = records[static_cast<size_t>(r)].pointer;
  for (int r = 0; r < n; ++r) {
    const WindowRecord& rec = records[static_cast<size_t>(r)];
    if (r == rank) {
      w->windows_[static_cast<size_t>(r)] = static_cast<uint8_t*>(own);
      continue;
    }
    // A peer on another host (or fake node) cannot be mapped: the proxy reaches it (executor/remote_proxy.h).
    if (!sameHost(peers, r, rank)) continue;
    if (sameProcess(peers, r, rank)) {
      if (rec.device != device) {
        int can = 0;
        COLLIE_RETURN_IF_ERROR(
            cudaStatus(cudaDeviceCanAccessPeer(&can, device, rec.device), "cudaDeviceCanAccessPeer"));
        if (!can)
          return Status::error(collieInvalidUsage,
                               "rank %d on device %d cannot reach rank %d's device %d by P2P; the ranks should have "
                               "agreed on the staged path (core/comm_cuda.cc, agreeOnDirectPeers)",
                               rank, device, r, rec.device);
        const cudaError_t e = cudaDeviceEnablePeerAccess(rec.device, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
        } else {
          COLLIE_RETURN_IF_ERROR(cudaStatus(e, "cudaDeviceEnablePeerAccess"));
        }
      }
      w->windows_[static_cast<size_t>(r)] = reinterpret_cast<uint8_t*>(rec.pointer);
      if (rec.device == device) w->colocated_.push_back(r);
      if (rec.pooled != 0) {
        std::lock_guard<std::mutex> lock(gPooledMu);
        auto it = pooledWindows().find(reinterpret_cast<const void*>(rec.pointer));
        std::shared_ptr<PooledWindow> held = it != pooledWindows().end() ? it->second.lock() : nullptr;
        // Only the peer's own init lets its window go before ours has mapped it: that init failed, for a reason
        // its own error gives (a setting it refused after the windows were exchanged, say).
        if (!held)
          return Status::error(collieRemoteError,
                               "rank %d's device window is gone before rank %d could map it: rank %d's init failed "
                               "(its own error says why)",
                               r, rank, r);
        w->held_.push_back(std::move(held));
      }
      continue;
    }
    void* mapped = nullptr;
    COLLIE_RETURN_IF_ERROR(cudaStatus(cudaIpcOpenMemHandle(&mapped, rec.handle, cudaIpcMemLazyEnablePeerAccess),
                                      "cudaIpcOpenMemHandle of a peer's window")
                               .withContext("rank " + std::to_string(r)));
    w->opened_.push_back(mapped);
    w->ipcRanks_.push_back(r);
    w->windows_[static_cast<size_t>(r)] = static_cast<uint8_t*>(mapped);
  }
  *out = std::move(w);
  return Status();
}

DeviceWindows::~DeviceWindows() {
  DeviceGuard guard(device_);
  for (void* p : opened_) (void)cudaIpcCloseMemHandle(p);
  if (own_ != nullptr) (void)cudaFree(own_);
  held_.clear();
  (void)cudaGetLastError();
}

}  // namespace collie
