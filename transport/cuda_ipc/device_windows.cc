#include "transport/cuda_ipc/device_windows.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>

#include "core/cuda_check.h"
#include "core/log.h"
#include "transport/bootstrap/bootstrap.h"

namespace collie {

namespace {

// What each rank publishes about its window. Raw bytes over the bootstrap.
struct WindowRecord {
  cudaIpcMemHandle_t handle;
  uint64_t pointer;  // valid only inside the publishing process
  int32_t pid;
  int32_t device;
};

}  // namespace

Status DeviceWindows::create(Bootstrap* bootstrap, const std::vector<PeerInfo>& peers, int device, size_t bytes,
                             std::unique_ptr<DeviceWindows>* out) {
  std::unique_ptr<DeviceWindows> w(new DeviceWindows());
  w->device_ = device;
  w->bytes_ = bytes;
  DeviceGuard guard(device);
  COLLIE_RETURN_IF_ERROR(guard.status());
  void* own = nullptr;
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&own, bytes), "cudaMalloc of the device window"));
  w->own_ = static_cast<uint8_t*>(own);
  // Flags start at zero, and the zeroes land before any peer can learn the
  // window's address. (Only the legacy stream is waited for: a device-wide
  // wait would also wait for kernels of other communicators of ranks sharing
  // the GPU.)
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMemset(own, 0, bytes), "cudaMemset of the device window"));
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaStreamSynchronize(cudaStreamLegacy), "synchronising the window's memset"));

  const int n = bootstrap->nranks(), rank = bootstrap->rank();
  std::vector<WindowRecord> records(static_cast<size_t>(n));
  WindowRecord& mine = records[static_cast<size_t>(rank)];
  memset(&mine, 0, sizeof(mine));
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaIpcGetMemHandle(&mine.handle, own), "cudaIpcGetMemHandle"));
  mine.pointer = reinterpret_cast<uint64_t>(own);
  mine.pid = getpid();
  mine.device = device;
  COLLIE_RETURN_IF_ERROR(bootstrap->allGather(records.data(), sizeof(WindowRecord)));

  w->windows_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const WindowRecord& rec = records[static_cast<size_t>(r)];
    if (r == rank) {
      w->windows_[static_cast<size_t>(r)] = w->own_;
      continue;
    }
    // A peer on another host (or fake node) cannot be mapped: the proxy reaches it (executor/remote_proxy.h).
    const bool sameHost = memcmp(peers[static_cast<size_t>(r)].hostId, peers[static_cast<size_t>(rank)].hostId,
                                 sizeof(peers[0].hostId)) == 0;
    if (!sameHost) continue;
    // One process: the same pid in the same pid namespace (containers on one host may reuse pids).
    if (rec.pid == mine.pid &&
        peers[static_cast<size_t>(r)].pidNamespace == peers[static_cast<size_t>(rank)].pidNamespace) {
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
      continue;
    }
    void* mapped = nullptr;
    COLLIE_RETURN_IF_ERROR(cudaStatus(cudaIpcOpenMemHandle(&mapped, rec.handle, cudaIpcMemLazyEnablePeerAccess),
                                      "cudaIpcOpenMemHandle of a peer's window")
                               .withContext("rank " + std::to_string(r)));
    w->opened_.push_back(mapped);
    w->windows_[static_cast<size_t>(r)] = static_cast<uint8_t*>(mapped);
  }
  *out = std::move(w);
  return Status();
}

DeviceWindows::~DeviceWindows() {
  DeviceGuard guard(device_);
  for (void* p : opened_) (void)cudaIpcCloseMemHandle(p);
  if (own_ != nullptr) (void)cudaFree(own_);
  (void)cudaGetLastError();
}

}  // namespace collie
