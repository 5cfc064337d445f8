// The CPU emulation's threads, barrier and launch (kernels/emulator.h). The
// kernel body it runs is kernels/program_block.cuh, compiled here by g++ with
// kernels/device_ops.cuh's host operations.
#include "kernels/emulator.h"

#include <sched.h>

#include <atomic>
#include <chrono>

#include "kernels/launch.h"
#include "kernels/program_block.cuh"

namespace collie {
namespace emu {

bool BlockBarrier::arriveAndWait(bool pred) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = generation_;
  any_ = any_ || pred;
  if (++waiting_ == threads_) {
    countBarrier();
    waiting_ = 0;
    result_ = any_;
    any_ = false;
    ++generation_;
    cv_.notify_all();
    return result_;
  }
  // No thread can complete the next generation (and overwrite result_) before this one has read it: it must
  // arrive there too.
  cv_.wait(lock, [&] { return generation_ != gen; });
  return result_;
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

namespace {
std::atomic<uint64_t> gFences{0};
std::atomic<uint64_t> gSystemScope{0};
std::atomic<uint64_t> gBarriers{0};
}  // namespace

void countFence() { gFences.fetch_add(1, std::memory_order_relaxed); }
uint64_t fencesTaken() { return gFences.load(std::memory_order_relaxed); }
void countSystemScope() { gSystemScope.fetch_add(1, std::memory_order_relaxed); }
uint64_t systemScopeTaken() { return gSystemScope.load(std::memory_order_relaxed); }
void countBarrier() { gBarriers.fetch_add(1, std::memory_order_relaxed); }
uint64_t barriersTaken() { return gBarriers.load(std::memory_order_relaxed); }

uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

Launcher::Launcher(int blocks, int threadsPerBlock) : blocks_(blocks), threadsPerBlock_(threadsPerBlock) {
  for (int b = 0; b < blocks; ++b) barriers_.push_back(std::make_unique<BlockBarrier>(threadsPerBlock));
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threadsPerBlock; ++t) threads_.emplace_back([this, b, t] { work(b, t); });
}

Launcher::~Launcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Launcher::run(const std::function<void(int)>& body) {
  std::unique_lock<std::mutex> lock(mu_);
  body_ = &body;
  running_ = blocks_ * threadsPerBlock_;
  ++generation_;
  start_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  body_ = nullptr;
}

void Launcher::work(int block, int tid) {
  ThreadContext& me = self();
  me = ThreadContext{tid, threadsPerBlock_, barriers_[static_cast<size_t>(block)].get(), 0};
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* body = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      body = body_;
    }
    (*body)(block);
    std::lock_guard<std::mutex> lock(mu_);
    if (--running_ == 0) done_.notify_one();
  }
}

namespace {

template <typename T, ReduceOp Op, bool LL>
void runBlocks(const KernelArgs& a, Launcher* launcher) {
  const int C = static_cast<int>(a.layout.nchannels);
  struct Shared {
    std::vector<uint64_t> memory;  // the dynamic shared memory: counters, then LL's staged slices
    int handoff = 0;
  };
  std::vector<Shared> shared(static_cast<size_t>(C));
  for (Shared& s : shared) s.memory.resize((programSharedBytes(a, LL) + 7) / 8);
  launcher->run([&](int c) {
    Shared& s = shared[static_cast<size_t>(c)];
    programBlock<T, Op, LL>(a, c, C, s.memory.data(), &s.handoff);
  });
}

}  // namespace

int launchProgram(const KernelArgs& args, collieDataType_t type, ReduceOp op, Launcher* launcher) {
  if (launcher->blocks() != static_cast<int>(args.layout.nchannels)) return collieInternalError;
  const bool known = visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(op, [&](auto opc) {
      if (args.lowLatency)
        runBlocks<T, decltype(opc)::value, true>(args, launcher);
      else
        runBlocks<T, decltype(opc)::value, false>(args, launcher);
    });
  });
  return known ? 0 : collieInvalidArgument;
}

}  // namespace emu
}  // namespace collie
