// Benchmark buffers: host memory (page-aligned) for host implementations,
// cudaMalloc'd memory for device ones (NCCL, Collie's CUDA backend). The check
// run fills and reads device buffers through host staging copies.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace collie {
namespace bench {

enum class MemKind { kHost, kDevice };
const char* memKindName(MemKind k);

/// Whether a CUDA device is usable; *count devices, else *why says why not.
bool gpuUsable(int* count, std::string* why);
/// "NVIDIA H100 80GB HBM3" for device 0, or "none".
std::string gpuName();

/// Times `iters` calls captured as CUDA graphs of `perGraph` calls each on
/// `streams` (cudaStream_t, one per rank); *sec is seconds per call of this
/// rank. Returns an error sentence or "".
std::string timeGraphs(const std::vector<void*>& streams, const std::function<std::string()>& issue, int iters,
                       int perGraph, double* sec);

class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : kind_(o.kind_), ptr_(o.ptr_), bytes_(o.bytes_), device_(o.device_) {
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  Buffer& operator=(Buffer&&) = delete;

  /// Makes room for `bytes` (grows only; contents are lost on growth). Device
  /// memory is allocated on `device`. Returns an error sentence or "".
  std::string reserve(MemKind kind, size_t bytes, int device);
  void* data() const { return ptr_; }
  MemKind kind() const { return kind_; }

  /// Host <-> buffer copies at a byte offset (plain memcpy for host memory).
  std::string upload(size_t offset, const void* host, size_t bytes);
  std::string download(void* host, size_t offset, size_t bytes) const;

 private:
  void release();
  MemKind kind_ = MemKind::kHost;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

}  // namespace bench
}  // namespace collie
