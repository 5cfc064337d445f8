#include <cuda_runtime.h>

#include <cstring>

#include "executor/reduce_ops.h"
#include "kernels/scale.h"

namespace collie {

namespace {

// The scalar travels in the launch's parameters (host-immediate) or is read
// from device memory by every thread (device-resident: its value at run time,
// as NCCL reads it, which a graph replay must see too).
template <typename T>
__global__ void scaleKernel(T* dst, const T* src, size_t n, T immediate, const T* deviceScalar) {
  const T s = deviceScalar != nullptr ? *deviceScalar : immediate;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    dst[i] = scaleBy(src[i], s);
}

}  // namespace

int preloadScaleKernels() {
  int rc = static_cast<int>(cudaSuccess);
  for (int t = 0; t < collieNumTypes; ++t)
    visitType(static_cast<collieDataType_t>(t), [&](auto tag) {
      using T = typename decltype(tag)::type;
      cudaFuncAttributes attr;
      const cudaError_t e = cudaFuncGetAttributes(&attr, scaleKernel<T>);
      if (e != cudaSuccess && rc == 0) rc = static_cast<int>(e);
    });
  return rc;
}

int launchScale(collieDataType_t type, void* dst, const void* src, size_t n, const void* hostScalar,
                const void* deviceScalar, void* stream) {
  if (n == 0) return static_cast<int>(cudaSuccess);
  int rc = static_cast<int>(cudaErrorInvalidValue);
  // Enough blocks to fill a large GPU; each thread strides over the rest.
  const size_t want = (n + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want > 4096 ? 4096 : want);
  visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T immediate{};
    if (hostScalar != nullptr) memcpy(&immediate, hostScalar, sizeof(T));
    // As the program kernel's launch: an error of this launch only, not one the caller's code left behind.
    T* d = static_cast<T*>(dst);
    const T* sp = static_cast<const T*>(src);
    const T* ds = static_cast<const T*>(deviceScalar);
    void* params[] = {&d, &sp, &n, &immediate, &ds};
    rc = static_cast<int>(
        cudaLaunchKernel(scaleKernel<T>, dim3(blocks), dim3(256), params, 0, static_cast<cudaStream_t>(stream)));
  });
  return rc;
}

}  // namespace collie
