// Whether a GPU is usable, and the skip every GPU test starts with: without
// one, the test is skipped with the reason printed (the CUDA runtime's error,
// or 0 devices).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

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

#define SKIP_WITHOUT_GPU()                                     \
  do {                                                         \
    std::string why_;                                          \
    if (!collie::test::gpuUsable(&why_)) GTEST_SKIP() << why_; \
  } while (0)
