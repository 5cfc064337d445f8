// Whether a GPU is usable, and why not (the CUDA runtime's error, or 0 devices): for the GPU tests' skip
// (gpu_skip.h) and for the GPU programs that are not GoogleTest tests, which exit 77 (skip) without one.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace collie {
namespace test {

inline bool gpuUsable(std::string* why) {
  int count = 0;  // left unwritten when there is no driver
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    *why = std::string("no usable GPU: ") + (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

}  // namespace test
}  // namespace collie
