#include <cuda_runtime.h>

#include <cstring>

#include "kernels/store.h"

namespace collie {

namespace {

// Within the 4 KiB of kernel parameters every architecture we build for allows.
struct StoreArgs {
  unsigned char* dst;
  unsigned int bytes;
  unsigned char data[kStoreChunkBytes];
};
static_assert(sizeof(StoreArgs) <= 4096, "StoreArgs must fit the kernel parameter space");

// One block; a few kilobytes, so bytes one by one.
__global__ void storeKernel(const StoreArgs a) {
  for (unsigned int i = threadIdx.x; i < a.bytes; i += blockDim.x) a.dst[i] = a.data[i];
}

}  // namespace

int preloadStoreKernel() {
  cudaFuncAttributes attr;
  return static_cast<int>(cudaFuncGetAttributes(&attr, storeKernel));
}

int launchStore(void* dst, const void* src, size_t bytes, void* stream) {
  StoreArgs a;
  for (size_t off = 0; off < bytes; off += kStoreChunkBytes) {
    const size_t n = bytes - off < kStoreChunkBytes ? bytes - off : kStoreChunkBytes;
    a.dst = static_cast<unsigned char*>(dst) + off;
    a.bytes = static_cast<unsigned int>(n);
    memcpy(a.data, static_cast<const unsigned char*>(src) + off, n);
    void* params[] = {&a};
    const cudaError_t e =
        cudaLaunchKernel(storeKernel, dim3(1), dim3(256), params, 0, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) return static_cast<int>(e);
  }
  return static_cast<int>(cudaSuccess);
}

}  // namespace collie
