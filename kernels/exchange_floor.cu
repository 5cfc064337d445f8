// The exchange-floor kernel (kernels/exchange_floor.h): one block per launch runs the body of
// exchange_floor_block.cuh. Only tests/gpu/exchange_floor.cc launches it.
#include <cuda_runtime.h>

#include "kernels/exchange_floor_block.cuh"

namespace collie {

namespace {

__global__ void exchangeFloorKernel(const __grid_constant__ FloorArgs a) { exchangeFloorBlock(a); }

}  // namespace

int preloadExchangeFloor() {
  cudaFuncAttributes attr;
  return static_cast<int>(cudaFuncGetAttributes(&attr, exchangeFloorKernel));
}

int launchExchangeFloor(const FloorArgs& args, int threads, void* stream) {
  void* params[] = {const_cast<FloorArgs*>(&args)};
  return static_cast<int>(
      cudaLaunchKernel(exchangeFloorKernel, dim3(1), dim3(threads), params, 0, static_cast<cudaStream_t>(stream)));
}

}  // namespace collie
