// Runs the program kernel's own code on the CPU (COLLIE_EMULATE_KERNELS): one
// launch becomes one group of host threads per block, with a barrier for
// __syncthreads, so the device primitives (Simple and LL), the kernel body and
// the launch arguments the CUDA executor builds are exercised, under the
// sanitizers too, on machines without a GPU. What it cannot show is anything
// about the GPU itself: the PTX memory model, warps, speed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "collie.h"
#include "executor/reduce_ops.h"

namespace collie {

struct KernelArgs;

namespace emu {

/// __syncthreads for a block of host threads (C++17 has no std::barrier).
class BlockBarrier {
 public:
  explicit BlockBarrier(int threads) : threads_(threads) {}
  void arriveAndWait();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int threads_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

/// Who the calling emulated thread is; set for the duration of a launch.
struct ThreadContext {
  int tid = 0;
  int nthreads = 1;
  BlockBarrier* barrier = nullptr;
  uint32_t polls = 0;
};
ThreadContext& self();

/// Called by every flag poll: yields the core now and then.
void pollPause();
uint64_t nowNs();

/// Runs one launch of the program kernel (kernels/program_block.cuh) with
/// `threadsPerBlock` host threads per block, one block per channel, and returns
/// when every block has finished. Any failure is recorded in `args` (failed,
/// status) as on the GPU. Returns collieInvalidArgument for an unknown type.
int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, int threadsPerBlock);

}  // namespace emu
}  // namespace collie
