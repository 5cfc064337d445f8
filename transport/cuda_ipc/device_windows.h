// Device windows: each rank's receive slots and flags (executor/protocol.h) in
// device memory, mapped by every peer of the communicator: cudaMalloc memory
// where a peer process needs a cudaIpc handle, else the communicator's pool
// (base/device_memory.h). How a peer's window is reached depends on where the
// peer runs:
//
//   same process, same device        the peer's pointer, as is
//   same process, another device     the peer's pointer after cudaDeviceEnablePeerAccess
//   another process (same host)      cudaIpcGetMemHandle -> bootstrap -> cudaIpcOpenMemHandle
//
// Two devices without P2P would need a staged copy through host memory; that
// path is not written yet and init says so. Peers on other hosts get no window
// here (window(r) is null): the proxy and UCX reach them (executor/remote_proxy.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/peer_info.h"
#include "base/status.h"

namespace collie {

class Bootstrap;
class DevicePool;

class DeviceWindows {
 public:
  /// Collective over the bootstrap: every rank allocates and zeroes `bytes` on
  /// `device` and maps every peer's window. `peers` come from the bootstrap.
  /// `stagingBytes`: where a peer process maps the window, this many more bytes after it in the same allocation,
  /// which the peers map with it (the direct kernels' staging buffer); else none.
  static Status create(Bootstrap* bootstrap, const std::vector<PeerInfo>& peers, int device, size_t bytes,
                       size_t stagingBytes, std::shared_ptr<DevicePool> pool, std::unique_ptr<DeviceWindows>* out);
  ~DeviceWindows();
  DeviceWindows(const DeviceWindows&) = delete;
  DeviceWindows& operator=(const DeviceWindows&) = delete;

  /// Rank r's window as this rank's device addresses it.
  uint8_t* window(int r) const { return windows_[static_cast<size_t>(r)]; }
  size_t bytes() const { return bytes_; }
  /// How many peer windows came through cudaIpc handles (for the init log).
  int ipcPeers() const { return static_cast<int>(opened_.size()); }
  /// The peers whose windows came through cudaIpc handles: other processes of this host.
  const std::vector<int>& ipcRanks() const { return ipcRanks_; }
  /// Rank r's window as r itself addresses it (meaningful for ipcRanks()).
  uint64_t ownerAddress(int r) const { return ownerAddresses_[static_cast<size_t>(r)]; }
  /// This rank's staging bytes after its window (create's stagingBytes), or null and 0.
  uint8_t* staging() const { return stagingBytes_ > 0 ? own_ + bytes_ : nullptr; }
  size_t stagingBytes() const { return stagingBytes_; }
  /// The peers that are threads of this process on this rank's GPU (their kernels share its context).
  const std::vector<int>& colocatedPeers() const { return colocated_; }

  struct PooledWindow;  // device_windows.cc

 private:
  DeviceWindows() = default;
  int device_ = -1;
  size_t bytes_ = 0;
  size_t stagingBytes_ = 0;
  std::vector<uint64_t> ownerAddresses_;
  uint8_t* own_ = nullptr;  // cudaMalloc memory, for peer processes' cudaIpc handles; else held_[0]
  // Pooled windows this rank maps: its own (first) and those of the peers that are threads of this process.
  std::vector<std::shared_ptr<PooledWindow>> held_;
  std::vector<uint8_t*> windows_;
  std::vector<void*> opened_;  // cudaIpcOpenMemHandle mappings, closed on destroy
  std::vector<int> ipcRanks_;
  std::vector<int> colocated_;
};

}  // namespace collie
