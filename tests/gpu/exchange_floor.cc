// The exchange floor: the least a small collective of ranks sharing one GPU costs there, measured with a kernel
// that does nothing else (kernels/exchange_floor.h): each rank's one block hands a payload to every peer and
// waits for every peer's, checking every word, and each exchange ends in a block barrier, as Collie's waits do.
// Collie's small calls (the goal: 8 B to 64 KiB in 10 us at 2-8 ranks) are then read against the floor measured
// in the same run: what is above it is Collie's own; what is below it no design of this shape can reach.
//
// Ranks are threads of this process, each with a stream of its own, as collie-bench -t runs them.
//   per exchange  2 ranks, one launch each of 10 x ITERS exchanges of 4 bytes: the device clock's time per
//                 exchange (the slower rank), for each way a payload travels (LL lines; a flag released at GPU
//                 scope; at system scope) and blocks of 1 and of 512 threads. Collie's per-step times
//                 (COLLIE_KERNEL_TIMING) compare with this.
//   per call      T ranks, ITERS launches of one exchange each (LL lines, 512 threads) after 50 to warm up, of
//                 each payload size; a rank queues launch k only once every peer has queued launch k-1, as Collie
//                 does (docs/cuda-executor.md, "Ranks sharing hardware queues"). The slowest thread's time per
//                 call, and its kernel's own part by the device clock; then the same with a drain (credits back,
//                 and each launch waiting for them at its end, as Collie's kernels do). A one-shot allreduce of
//                 that size moves the same payload to every peer, plus its reduction: collie-bench's small
//                 allreduces compare.
// A wrong word or a wait past 5 s fails the run.
// Run by tests/gpu/run.sh as bench_exchange_floor; exits 77 without a GPU.
// Usage: exchange_floor [--sizes BYTES,...] [ITERS [T ...]]   (sizes: 8,4096,65536 by default)
#include "kernels/exchange_floor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_usable.h"

namespace {

using collie::FloorArgs;
using collie::FloorMode;

// Device memory every rank of one measurement shares, zeroed: flags start below every exchange's number.
struct Buffers {
  uint64_t* lines = nullptr;
  uint64_t* flags = nullptr;
  uint64_t* credits = nullptr;
  uint64_t* elapsedNs = nullptr;
  uint32_t* failed = nullptr;
  cudaError_t allocate(int n, uint64_t words) {
    const size_t slots = static_cast<size_t>(n) * n * 2 * sizeof(uint64_t);
    cudaError_t e = cudaMalloc(&lines, slots * words);
    if (e == cudaSuccess) e = cudaMalloc(&flags, slots);
    if (e == cudaSuccess) e = cudaMalloc(&credits, slots / 2);
    if (e == cudaSuccess) e = cudaMalloc(&elapsedNs, static_cast<size_t>(n) * sizeof(uint64_t));
    if (e == cudaSuccess) e = cudaMalloc(&failed, sizeof(uint32_t));
    if (e == cudaSuccess) e = cudaMemset(lines, 0, slots * words);
    if (e == cudaSuccess) e = cudaMemset(flags, 0, slots);
    if (e == cudaSuccess) e = cudaMemset(credits, 0, slots / 2);
    if (e == cudaSuccess) e = cudaMemset(elapsedNs, 0, static_cast<size_t>(n) * sizeof(uint64_t));
    if (e == cudaSuccess) e = cudaMemset(failed, 0, sizeof(uint32_t));
    // The ranks' streams do not wait for the legacy stream the memsets went to.
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    return e;
  }
  ~Buffers() {
    for (void* p : {static_cast<void*>(lines), static_cast<void*>(flags), static_cast<void*>(credits),
                    static_cast<void*>(elapsedNs), static_cast<void*>(failed)})
      if (p != nullptr) cudaFree(p);
  }
};

// One measurement's shape.
struct Shape {
  int ranks;
  FloorMode mode;
  int threads;         // per block
  int warm, timed;     // launches
  uint32_t perLaunch;  // exchanges per launch
  uint64_t words;      // 4-byte words each rank hands each peer per exchange
  bool drain = false;  // FloorArgs::drain
};

// What one rank measured; seconds < 0 after a failure, printed.
struct Measured {
  double wallSec = -1;   // the timed launches, from the first launch to the end of the stream
  double kernelSec = 0;  // thread 0's time in them, by the device clock
};

// One rank's thread: its launches, each queued only once every peer has queued the launch before.
Measured runRank(const Shape& shape, const Buffers& b, int rank, std::vector<std::atomic<int>>* queued,
                 std::atomic<int>* ready) {
  Measured m;
  const char* stage = "set-up";
  cudaStream_t stream = nullptr;
  uint64_t before = 0, after = 0;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  FloorArgs a;
  a.lines = b.lines;
  a.flags = b.flags;
  a.failed = b.failed;
  a.elapsedNs = b.elapsedNs;
  a.rank = rank;
  a.nranks = shape.ranks;
  a.mode = static_cast<int>(shape.mode);
  a.count = shape.perLaunch;
  a.words = shape.words;
  a.credits = b.credits;
  a.drain = shape.drain ? 1 : 0;
  bool late = false;
  auto launch = [&](int k) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (int p = 0; p < shape.ranks; ++p)
      while ((*queued)[static_cast<size_t>(p)].load() < k) {
        if (std::chrono::steady_clock::now() > deadline) {
          late = true;
          return cudaErrorNotReady;
        }
        std::this_thread::yield();
      }
    a.first = 1 + static_cast<uint32_t>(k) * shape.perLaunch;
    const cudaError_t rc = static_cast<cudaError_t>(collie::launchExchangeFloor(a, shape.threads, stream));
    (*queued)[static_cast<size_t>(rank)].store(k + 1);
    return rc;
  };
  // A thread that failed still arrives, and still counts its launches as queued, so the others do not wait.
  auto arrive = [&] {
    ready->fetch_add(1);
    while (ready->load() < shape.ranks) std::this_thread::yield();
  };
  auto elapsed = [&](uint64_t* out) {
    const cudaError_t rc = cudaMemcpyAsync(out, b.elapsedNs + rank, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream);
    return rc == cudaSuccess ? cudaStreamSynchronize(stream) : rc;
  };
  int k = 0;
  if (e == cudaSuccess) stage = "warm-up";
  for (; k < shape.warm && e == cudaSuccess; ++k) e = launch(k);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = elapsed(&before);
  arrive();
  const auto t0 = std::chrono::steady_clock::now();
  if (e == cudaSuccess) stage = "timed launches";
  for (; k < shape.warm + shape.timed && e == cudaSuccess; ++k) e = launch(k);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  const auto t1 = std::chrono::steady_clock::now();
  if (e == cudaSuccess) e = elapsed(&after);
  (*queued)[static_cast<size_t>(rank)].store(1 << 30);  // nobody waits for a rank that stopped
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (e != cudaSuccess) {
    fprintf(stderr, "exchange_floor: rank %d of %d: %s: %s\n", rank, shape.ranks, stage,
            late ? "a peer queued nothing for 10 s" : cudaGetErrorString(e));
    return m;
  }
  m.wallSec = std::chrono::duration<double>(t1 - t0).count();
  m.kernelSec = static_cast<double>(after - before) * 1e-9;
  return m;
}

// Runs one shape on fresh buffers; the slowest rank's figures, or wallSec < 0 after a failure (printed).
Measured measure(const Shape& shape) {
  Measured worst;
  Buffers b;
  cudaError_t e = b.allocate(shape.ranks, shape.words);
  if (e != cudaSuccess) {
    fprintf(stderr, "exchange_floor: allocating %d ranks' slots: %s\n", shape.ranks, cudaGetErrorString(e));
    return worst;
  }
  std::vector<std::atomic<int>> queued(static_cast<size_t>(shape.ranks));
  for (auto& q : queued) q.store(0);
  std::atomic<int> ready{0};
  std::vector<Measured> got(static_cast<size_t>(shape.ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < shape.ranks; ++r)
    threads.emplace_back([&, r] { got[static_cast<size_t>(r)] = runRank(shape, b, r, &queued, &ready); });
  for (std::thread& t : threads) t.join();
  uint32_t failed = 0;
  e = cudaMemcpy(&failed, b.failed, sizeof(failed), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess || failed != 0) {
    fprintf(stderr, "exchange_floor: %d ranks: %s\n", shape.ranks,
            e != cudaSuccess ? cudaGetErrorString(e) : "a rank's wait timed out or it took a wrong word");
    return worst;
  }
  worst.wallSec = 0;
  for (const Measured& m : got) {
    if (m.wallSec < 0) return m;
    worst.wallSec = std::max(worst.wallSec, m.wallSec);
    worst.kernelSec = std::max(worst.kernelSec, m.kernelSec);
  }
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbe(argc, argv);  // 77, "skipped: ..." without a usable GPU
  if (probe >= 0) return probe;
  std::vector<uint64_t> sizes = {8, 4096, 65536};
  int arg = 1;
  if (argc > 2 && std::string(argv[1]) == "--sizes") {
    sizes.clear();
    for (const char* p = argv[2]; *p != '\0';) {
      char* end = nullptr;
      const unsigned long long v = strtoull(p, &end, 10);
      if (end == p || v == 0 || (*end != ',' && *end != '\0')) {
        fprintf(stderr, "exchange_floor: --sizes wants byte counts above 0, comma-separated: %s\n", argv[2]);
        return 2;
      }
      sizes.push_back(v);
      p = *end == ',' ? end + 1 : end;
    }
    arg = 3;
  }
  const int iters = argc > arg ? std::max(1, atoi(argv[arg])) : 2000;
  std::vector<int> counts;
  for (int i = arg + 1; i < argc; ++i) counts.push_back(std::max(1, atoi(argv[i])));
  if (counts.empty()) counts = {2, 4, 8};
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int preload = collie::preloadExchangeFloor();
  if (preload != 0) {
    printf("exchange_floor: loading the kernel failed: %s\n", cudaGetErrorString(static_cast<cudaError_t>(preload)));
    return 1;
  }
  int rc = 0;
  const uint32_t many = 10 * static_cast<uint32_t>(iters);
  printf("exchange floor on %s: ranks are threads, each with its own stream\n", prop.name);
  printf(
      "per exchange of 4 bytes, 2 ranks, one launch of %u exchanges after one as long: us by the device clock, "
      "the slower rank\n%-10s %10s %12s\n",
      many, "way", "1 thread", "512 threads");
  const struct {
    FloorMode mode;
    const char* name;
  } ways[] = {{FloorMode::kLine, "LL lines"}, {FloorMode::kFlagGpu, "flag gpu"}, {FloorMode::kFlagSys, "flag sys"}};
  for (const auto& way : ways) {
    printf("%-10s", way.name);
    for (int threads : {1, 512}) {
      // The warm-up launch's exchanges are as many as the timed one's; the timed one's are numbered after them.
      const Measured m = measure(Shape{2, way.mode, threads, 1, 1, many, 1});
      if (m.wallSec < 0) rc = 1;
      printf(" %*.3f", threads == 1 ? 10 : 12, m.wallSec < 0 ? -1.0 : m.kernelSec * 1e6 / many);
    }
    printf("\n");
  }
  printf(
      "per call, one exchange per launch (LL lines, 512 threads), %d launches after 50: us per call, the slowest "
      "rank; drained: each launch also waits for its peers' credits, as Collie's kernels do\n%6s %10s %10s %10s "
      "%14s %14s\n",
      iters, "ranks", "bytes", "wall", "kernel", "wall drained", "kernel drained");
  for (int t : counts)
    for (uint64_t bytes : sizes) {
      printf("%6d %10llu", t, static_cast<unsigned long long>(bytes));
      for (bool drain : {false, true}) {
        const Measured m = measure(Shape{t, FloorMode::kLine, 512, 50, iters, 1, (bytes + 3) / 4, drain});
        if (m.wallSec < 0) rc = 1;
        const int width = drain ? 14 : 10;
        printf(" %*.2f %*.2f", width, m.wallSec < 0 ? -1.0 : m.wallSec * 1e6 / iters, width,
               m.wallSec < 0 ? -1.0 : m.kernelSec * 1e6 / iters);
      }
      printf("\n");
    }
  return rc;
}
