#include "bench/buffers.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

namespace collie {
namespace bench {

const char* memKindName(MemKind k) { return k == MemKind::kHost ? "host" : "device"; }

bool gpuUsable(int* count, std::string* why) {
  // Without a driver cudaGetDeviceCount fails and leaves the count unwritten.
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n <= 0) {
    (void)cudaGetLastError();
    if (why != nullptr)
      *why = rc != cudaSuccess ? std::string("no usable GPU (cudaGetDeviceCount: ") + cudaGetErrorString(rc) + ")"
                               : "no usable GPU (cudaGetDeviceCount found 0 devices)";
    *count = 0;
    return false;
  }
  *count = n;
  return true;
}

std::string gpuName() {
  int n = 0;
  if (!gpuUsable(&n, nullptr)) return "none";
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return "unknown";
  return std::to_string(n) + " x " + prop.name;
}

std::string timeGraphs(const std::vector<void*>& streams, const std::function<std::string()>& issue, int iters,
                       int perGraph, double* sec) {
  const size_t n = streams.size();
  std::vector<cudaGraph_t> graphs(n, nullptr);
  std::vector<cudaGraphExec_t> execs(n, nullptr);
  auto cuda = [](cudaError_t rc, const char* what) {
    return rc == cudaSuccess ? std::string() : std::string(what) + ": " + cudaGetErrorString(rc);
  };
  std::string err;
  for (void* s : streams)
    if (err.empty())
      err = cuda(cudaStreamBeginCapture(static_cast<cudaStream_t>(s), cudaStreamCaptureModeThreadLocal),
                 "cudaStreamBeginCapture");
  for (int k = 0; k < perGraph && err.empty(); ++k) err = issue();
  for (size_t i = 0; i < n; ++i) {
    const std::string e =
        cuda(cudaStreamEndCapture(static_cast<cudaStream_t>(streams[i]), &graphs[i]), "cudaStreamEndCapture");
    if (err.empty()) err = e;
    if (err.empty()) err = cuda(cudaGraphInstantiate(&execs[i], graphs[i], 0), "cudaGraphInstantiate");
  }
  const int launches = std::max(1, iters / perGraph);
  auto launchAll = [&]() {
    for (size_t i = 0; i < n && err.empty(); ++i)
      err = cuda(cudaGraphLaunch(execs[i], static_cast<cudaStream_t>(streams[i])), "cudaGraphLaunch");
  };
  auto syncAll = [&]() {
    for (size_t i = 0; i < n && err.empty(); ++i)
      err = cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(streams[i])), "cudaStreamSynchronize");
  };
  launchAll();  // warm-up: the first launch uploads the graph
  syncAll();
  const auto t0 = std::chrono::steady_clock::now();
  for (int l = 0; l < launches && err.empty(); ++l) launchAll();
  syncAll();
  *sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / (launches * perGraph);
  for (size_t i = 0; i < n; ++i) {
    if (execs[i] != nullptr) cudaGraphExecDestroy(execs[i]);
    if (graphs[i] != nullptr) cudaGraphDestroy(graphs[i]);
  }
  return err;
}

void Buffer::release() {
  if (ptr_ == nullptr) return;
  if (kind_ == MemKind::kHost) {
    free(ptr_);
  } else {
    int old = 0;
    cudaGetDevice(&old);
    cudaSetDevice(device_);
    cudaFree(ptr_);
    cudaSetDevice(old);
  }
  ptr_ = nullptr;
  bytes_ = 0;
}

std::string Buffer::reserve(MemKind kind, size_t bytes, int device) {
  if (ptr_ != nullptr && kind == kind_ && device == device_ && bytes <= bytes_) return "";
  release();
  kind_ = kind;
  device_ = device;
  const size_t size = bytes == 0 ? 64 : bytes;  // a valid pointer even for empty buffers
  if (kind == MemKind::kHost) {
    // Page-aligned: what a real application's large buffers look like.
    if (posix_memalign(&ptr_, 4096, size) != 0) {
      ptr_ = nullptr;
      return "cannot allocate " + std::to_string(size) + " bytes of host memory";
    }
  } else {
    cudaError_t rc = cudaSetDevice(device);
    if (rc == cudaSuccess) rc = cudaMalloc(&ptr_, size);
    if (rc != cudaSuccess) {
      ptr_ = nullptr;
      return "cudaMalloc of " + std::to_string(size) + " bytes on device " + std::to_string(device) + ": " +
             cudaGetErrorString(rc);
    }
  }
  bytes_ = size;
  return "";
}

std::string Buffer::upload(size_t offset, const void* host, size_t bytes) {
  if (bytes == 0) return "";
  char* dst = static_cast<char*>(ptr_) + offset;
  if (kind_ == MemKind::kHost) {
    memcpy(dst, host, bytes);
    return "";
  }
  // From pageable memory cudaMemcpy may return before the DMA lands, and the
  // calls that read the buffer run on non-blocking streams: wait for it. Only
  // for the legacy stream's work: a device-wide wait would also wait for other
  // ranks' kernels (ranks as threads), which may be waiting for this rank.
  cudaError_t rc = cudaSetDevice(device_);
  if (rc == cudaSuccess) rc = cudaMemcpy(dst, host, bytes, cudaMemcpyHostToDevice);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(cudaStreamLegacy);
  return rc == cudaSuccess ? "" : std::string("cudaMemcpy to device: ") + cudaGetErrorString(rc);
}

std::string Buffer::download(void* host, size_t offset, size_t bytes) const {
  if (bytes == 0) return "";
  const char* src = static_cast<const char*>(ptr_) + offset;
  if (kind_ == MemKind::kHost) {
    memcpy(host, src, bytes);
    return "";
  }
  const cudaError_t rc = cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost);
  return rc == cudaSuccess ? "" : std::string("cudaMemcpy from device: ") + cudaGetErrorString(rc);
}

}  // namespace bench
}  // namespace collie
