// The proxy's memory for the CUDA kernels: pinned host memory the GPU reads
// and writes over PCIe/NVLink-C2C by its mapped device address, while the
// proxy thread and UCX use the host address. Only this file of the proxy
// needs a GPU.
#include <cuda_runtime_api.h>

#include <cstring>

#include "core/cuda_check.h"
#include "executor/remote_proxy.h"

namespace collie {

RemoteProxy::Memory RemoteProxy::pinnedMemory(int device) {
  Memory m;
  m.allocate = [device](size_t bytes, Region* out) {
    DeviceGuard guard(device);
    COLLIE_RETURN_IF_ERROR(guard.status());
    void* host = nullptr;
    COLLIE_RETURN_IF_ERROR(cudaStatus(cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                                      "cudaHostAlloc of the proxy's memory"));
    memset(host, 0, bytes);
    void* user = nullptr;
    const Status st = cudaStatus(cudaHostGetDevicePointer(&user, host, 0), "cudaHostGetDevicePointer");
    if (!st.ok()) {
      (void)cudaFreeHost(host);
      return st;
    }
    out->host = static_cast<uint8_t*>(host);
    out->user = static_cast<uint8_t*>(user);
    return Status();
  };
  m.release = [](const Region& r) {
    (void)cudaFreeHost(r.host);
    (void)cudaGetLastError();
  };
  return m;
}

}  // namespace collie
