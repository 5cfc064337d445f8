#include <cuda_runtime.h>

#include "executor/reduce_ops.h"
#include "kernels/reduce_check.h"

namespace collie {

namespace {

template <typename T, ReduceOp Op>
__global__ void reduceCheckKernel(const T* a, const T* b, T* out, size_t n, int divisor) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    T r = applyOp<Op>(a[i], b[i]);
    out[i] = divisor > 0 ? divideBy(r, divisor) : r;
  }
}

}  // namespace

int launchReduceCheck(collieDataType_t type, collieRedOp_t op, const void* a, const void* b, void* out, size_t n,
                      int divisor, void* stream) {
  ReduceOp rop;
  if (!toReduceOp(op, &rop)) return static_cast<int>(cudaErrorInvalidValue);
  int rc = static_cast<int>(cudaErrorInvalidValue);
  const unsigned blocks = static_cast<unsigned>(n == 0 ? 1 : (n + 255) / 256 > 1024 ? 1024 : (n + 255) / 256);
  visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(rop, [&](auto opc) {
      reduceCheckKernel<T, decltype(opc)::value><<<blocks, 256, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n, divisor);
      rc = static_cast<int>(cudaGetLastError());
    });
  });
  return rc;
}

}  // namespace collie
