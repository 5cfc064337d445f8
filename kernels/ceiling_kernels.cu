// The ceiling kernels (kernels/ceiling_kernels.h): one per source count, 1..8, float sum only.
#include <cuda_runtime.h>

#include "kernels/ceiling_block.cuh"

namespace collie {

namespace {

template <int N>
__global__ void __launch_bounds__(kDirectMaxThreads, 1) ceilingKernel(const __grid_constant__ CeilingArgs a) {
  direct::ceilingMove<N>(a, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x));
}

template <typename F>
bool visitCeilingKernel(int nsrc, F&& f) {
  return direct::visitCeilingSources(
      nsrc, [&](auto nc) { f(reinterpret_cast<const void*>(ceilingKernel<decltype(nc)::value>)); });
}

}  // namespace

int ceilingBlocks(int nsrc, int threads, int sharers, int* blocks) {
  *blocks = 0;
  int device = 0, sms = 0, perSm = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (!visitCeilingKernel(nsrc, [&](const void* kernel) {
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, threads, 0);
      }))
    return static_cast<int>(cudaErrorInvalidValue);
  if (e != cudaSuccess) return static_cast<int>(e);
  const int fit = sms * perSm / (sharers > 0 ? sharers : 1);
  *blocks = fit > 0 ? fit : 1;
  return 0;
}

int launchCeiling(const CeilingArgs& args, int blocks, int threads, void* stream) {
  if (ceilingRefusal(args, blocks, threads) != nullptr || threads % 32 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  void* params[] = {const_cast<CeilingArgs*>(&args)};
  int rc = static_cast<int>(cudaErrorInvalidValue);
  visitCeilingKernel(args.nsrc, [&](const void* kernel) {
    rc = static_cast<int>(
        cudaLaunchKernel(kernel, dim3(blocks), dim3(threads), params, 0, static_cast<cudaStream_t>(stream)));
  });
  return rc;
}

}  // namespace collie
