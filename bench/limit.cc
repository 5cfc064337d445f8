#include "bench/limit.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "bench/launch.h"
#include "bench/options.h"

namespace collie {
namespace bench {

double copySeconds(Team& team, int worker, const Options& o, MemKind kind, size_t bytes) {
  const int g = team.perThread();
  int ndev = 0;
  gpuUsable(&ndev, nullptr);
  std::vector<std::unique_ptr<Buffer>> src, dst;
  std::string err;
  for (int j = 0; j < g && err.empty(); ++j) {
    src.push_back(std::make_unique<Buffer>());
    dst.push_back(std::make_unique<Buffer>());
    const int dev = team.deviceOf(worker, j, ndev);
    err = src.back()->reserve(kind, bytes, dev);
    if (err.empty()) err = dst.back()->reserve(kind, bytes, dev);
    if (err.empty() && kind == MemKind::kHost) memset(src.back()->data(), 1, bytes);
    if (err.empty() && kind == MemKind::kDevice) cudaMemset(src.back()->data(), 1, bytes);
  }
  if (!err.empty()) die("--limit: " + err);
  // Small copies finish in nanoseconds: repeat them until ~64 MiB have moved.
  const size_t floorIters = bytes > 0 ? (size_t{64} << 20) / bytes : 1;
  const int iters = static_cast<int>(std::min<size_t>(100000, std::max<size_t>(o.iters, floorIters)));
  auto copyAll = [&] {
    for (int j = 0; j < g; ++j) {
      if (kind == MemKind::kHost) {
        memcpy(dst[static_cast<size_t>(j)]->data(), src[static_cast<size_t>(j)]->data(), bytes);
        asm volatile("" ::: "memory");  // every copy happens: the destination is never read
      } else {
        cudaMemcpyAsync(dst[static_cast<size_t>(j)]->data(), src[static_cast<size_t>(j)]->data(), bytes,
                        cudaMemcpyDeviceToDevice, nullptr);
      }
    }
  };
  auto sync = [&] {
    if (kind == MemKind::kDevice)
      for (int j = 0; j < g; ++j) {
        cudaSetDevice(team.deviceOf(worker, j, ndev));
        cudaDeviceSynchronize();
      }
  };
  for (int w = 0; w < 2; ++w) copyAll();  // touches every page first
  sync();
  team.barrier(worker);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) copyAll();
  sync();
  // Per rank: the thread copied once for each of its g ranks.
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
}

}  // namespace bench
}  // namespace collie
