// The proxy's memory for the CUDA kernels: pinned host memory the GPU reads
// and writes over PCIe/NVLink-C2C by its mapped device address, while the
// proxy thread and UCX use the host address. Only this file of the proxy
// needs a GPU.
#include <cuda_runtime_api.h>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "executor/remote_proxy.h"

namespace collie {

RemoteProxy::Memory RemoteProxy::pinnedMemory(int device) {
  Memory m;
  // From the process's pinned regions, never freed (base/device_memory.h): a destroy that called cudaFreeHost
  // could wait for a peer's kernel of another communicator that waits for this rank.
  m.allocate = [device](size_t bytes, Region* out) {
    DeviceGuard guard(device);
    COLLIE_RETURN_IF_ERROR(guard.status());
    void* host = nullptr;
    void* user = nullptr;
    COLLIE_RETURN_IF_ERROR(takePinnedRegion(bytes, &host, &user));
    out->host = static_cast<uint8_t*>(host);
    out->user = static_cast<uint8_t*>(user);
    return Status();
  };
  m.release = [](const Region& r) { givePinnedRegionBack(r.host); };
  return m;
}

}  // namespace collie
