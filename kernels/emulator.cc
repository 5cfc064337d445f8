// The CPU emulation's threads, barrier and launch (kernels/emulator.h). The
// kernel body it runs is kernels/program_block.cuh, compiled here by g++ with
// kernels/device_ops.cuh's host operations.
#include "kernels/emulator.h"

#include <sched.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/launch.h"
#include "kernels/program_block.cuh"

namespace collie {
namespace emu {

void BlockBarrier::arriveAndWait() {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  if (++waiting_ == threads_) {
    waiting_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen; });
}

ThreadContext& self() {
  static thread_local ThreadContext context;
  return context;
}

void pollPause() {
  // A GPU block's thread 0 spins on its own SM; here dozens of emulated threads share two cores, and a spinning
  // one must not keep the peer it waits for off the CPU for a whole time slice.
  if ((++self().polls & 63) == 0) sched_yield();
}

uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

namespace {

template <typename T, ReduceOp Op, bool LL>
void runBlocks(const KernelArgs& a, int threadsPerBlock) {
  const int C = static_cast<int>(a.layout.nchannels);
  struct Block {
    explicit Block(int threads, size_t sharedBytes) : barrier(threads), shared((sharedBytes + 7) / 8) {}
    BlockBarrier barrier;
    std::vector<uint64_t> shared;  // the dynamic shared memory: counters, then LL's staged slices
    int handoff = 0;
  };
  std::vector<std::unique_ptr<Block>> blocks;
  for (int c = 0; c < C; ++c) blocks.push_back(std::make_unique<Block>(threadsPerBlock, programSharedBytes(a, LL)));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(C) * static_cast<size_t>(threadsPerBlock));
  for (int c = 0; c < C; ++c)
    for (int t = 0; t < threadsPerBlock; ++t)
      threads.emplace_back([&a, &blocks, c, C, t, threadsPerBlock] {
        Block& b = *blocks[static_cast<size_t>(c)];
        ThreadContext& me = self();
        me = ThreadContext{t, threadsPerBlock, &b.barrier, 0};
        programBlock<T, Op, LL>(a, c, C, b.shared.data(), &b.handoff);
        me = ThreadContext{};
      });
  for (std::thread& t : threads) t.join();
}

}  // namespace

int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, int threadsPerBlock) {
  if (threadsPerBlock < 1) return collieInvalidArgument;
  const bool known = visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(op, [&](auto opc) {
      if (args.lowLatency)
        runBlocks<T, decltype(opc)::value, true>(args, threadsPerBlock);
      else
        runBlocks<T, decltype(opc)::value, false>(args, threadsPerBlock);
    });
  });
  return known ? 0 : collieInvalidArgument;
}

}  // namespace emu
}  // namespace collie
