// Whether a GPU is usable, and why not (the CUDA runtime's error, or 0 devices): for the GPU tests' skip
// (gpu_skip.h) and for the GPU programs that are not GoogleTest tests, which exit 77 (skip) without one.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// The start of a GPU program outside GoogleTest: 77 (skip) with the reason printed when no GPU is usable, 0 when
/// the program was run as `PROGRAM --probe` (only asked whether it would run), else -1: go on.
inline int gpuProbe(int argc, char** argv) {
  std::string why;
  if (!gpuUsable(&why)) {
    printf("skipped: %s\n", why.c_str());
    return 77;
  }
  return argc > 1 && strcmp(argv[1], "--probe") == 0 ? 0 : -1;
}

/// A rank process started by a launcher: gpuProbe, then the GPU of its local rank (COLLIE_LOCAL_RANK, modulo the
/// GPUs there are) made current. Its answer is gpuProbe's.
inline int gpuProbeAndPickLocal(int argc, char** argv) {
  const int probe = gpuProbe(argc, argv);
  if (probe >= 0) return probe;
  const char* local = getenv("COLLIE_LOCAL_RANK");
  int gpus = 1;
  cudaGetDeviceCount(&gpus);
  cudaSetDevice((local ? atoi(local) : 0) % (gpus > 0 ? gpus : 1));
  return -1;
}

}  // namespace test
}  // namespace collie
