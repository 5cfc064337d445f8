// What the fake CUDA runtime's tests share: the fixture, bounded waits, a capture guard.
//
// The process runs with COLLIE_TEST_FAKE_CUDA_DEVICES=4. Device 3 is where sticky errors are provoked
// (and cleared through the test hook). Work items stand for kernels: they run on the stream's worker
// thread and may touch device memory directly, as a kernel does. Every wait inside a Work is bounded
// (kWait) and fails the work instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "fake_cuda.h"

namespace fakecuda_test {

using namespace std::chrono_literals;

constexpr auto kWait = 10s;
constexpr unsigned char kGarbage = 0xA5;

// Set at static initialization, before any test (spawned children inherit it).
inline const bool kDevicesSet = setenv("COLLIE_TEST_FAKE_CUDA_DEVICES", "4", 1) == 0;

/// Bounded wait for a flag another work item or thread sets; false after kWait.
inline bool waitFlag(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + kWait;
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

/// A kernel that waits for `gate` (cudaErrorLaunchTimeout if it never opens).
inline fakecuda::Work gated(const std::atomic<bool>& gate) {
  return [&gate] { return waitFlag(gate) ? cudaSuccess : cudaErrorLaunchTimeout; };
}

/// Ends a capture left open by a failed assertion, so later tests are not affected.
struct CaptureGuard {
  cudaStream_t stream;
  ~CaptureGuard() {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream, &g);
      if (g != nullptr) cudaGraphDestroy(g);
    }
    cudaGetLastError();
  }
};

/// Each test starts on device 0 with no last error, and must leave no error and no capture behind.
class FakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kDevicesSet);
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaGetLastError();
  }
  void TearDown() override {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
};

}  // namespace fakecuda_test
