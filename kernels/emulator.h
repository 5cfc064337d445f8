// Runs the program kernel's own code on the CPU (COLLIE_TEST_EMULATE_KERNELS): one
// launch becomes one group of host threads per block, with a barrier for
// __syncthreads, so the device primitives (Simple and LL), the kernel body and
// the launch arguments the CUDA executor builds are exercised, under the
// sanitizers too, on machines without a GPU. What it cannot show is anything
// about the GPU itself: the PTX memory model, warps, speed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collie.h"
#include "executor/reduce_ops.h"

namespace collie {

struct KernelArgs;

namespace emu {

/// __syncthreads (and __syncthreads_or) for a block of host threads (C++17
/// has no std::barrier). Returns whether any thread arrived with `pred` true.
class BlockBarrier {
 public:
  explicit BlockBarrier(int threads) : threads_(threads) {}
  bool arriveAndWait(bool pred);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int threads_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
  bool any_ = false;     // the OR of this generation's predicates so far
  bool result_ = false;  // the OR of the last completed generation
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
/// The emulated system-scope fences (dev::fenceSystem) taken by this process so far, for tests: on the CPU a
/// fence orders nothing the emulation's atomics do not already, so they are only counted.
void countFence();
uint64_t fencesTaken();
/// The same for the flag loads and stores at system scope (dev::loadAcquireSys, storeReleaseSys).
void countSystemScope();
uint64_t systemScopeTaken();
/// The same for block barriers (dev::sync, dev::syncOr): one per barrier a whole block passed.
void countBarrier();
uint64_t barriersTaken();

/// The host threads that play a launch's blocks: `blocks` x `threadsPerBlock`
/// threads, started once and reused by every launch (thread creation per launch
/// made the emulation crawl under ThreadSanitizer).
class Launcher {
 public:
  Launcher(int blocks, int threadsPerBlock);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  int blocks() const { return blocks_; }
  int threadsPerBlock() const { return threadsPerBlock_; }
  /// Runs body(block) on every thread, with self() set (tid, barrier of its
  /// block), and returns when all have returned.
  void run(const std::function<void(int block)>& body);

 private:
  void work(int block, int tid);

  const int blocks_, threadsPerBlock_;
  std::vector<std::unique_ptr<BlockBarrier>> barriers_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable start_, done_;
  const std::function<void(int)>* body_ = nullptr;
  uint64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
};

/// Runs one launch of the program kernel (kernels/program_block.cuh) on
/// `launcher`, one block per channel (layout.nchannels of them), and returns
/// when every block has finished. A failure is recorded in `args` (failed,
/// status) as on the GPU. Returns collieInvalidArgument for an unknown type.
int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, Launcher* launcher);

}  // namespace emu
}  // namespace collie
