// The CUDA executor's uploaded programs (executor/program_cache.h) on the
// device: programs too long for the launch parameters (a ring of 22 ranks: 44
// steps) are uploaded and found again; those whose counts change at every
// call reuse a bounded set of blocks;
// calls queued behind a held stream keep theirs; a global-mode capture in
// another thread survives the cache's bookkeeping; a captured program is
// never overwritten, so its graph replays right after many eager calls, and is
// released once its graph is gone. Every result is checked. Skips, saying why, when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/cuda_executor.h"
#include "gpu/gpu_skip.h"

namespace {

using collie::test::Coll;
using collie::test::Memory;
using collie::test::ScopedEnv;

// Sets the environment of these tests: the CUDA backend, a ring on one channel (22 ranks make 44 steps,
// uploaded), room for `programs` cached programs (nullptr: the default).
struct LongRingEnv {
  explicit LongRingEnv(const char* programs) : cache("COLLIE_PROGRAM_CACHE", programs) {}
  ScopedEnv device{"COLLIE_DEVICE", "cuda"};
  ScopedEnv algo{"COLLIE_ALGO", "allreduce:ring"};
  ScopedEnv channels{"COLLIE_CHANNELS", "1"};
  ScopedEnv timeout{"COLLIE_TIMEOUT", "60"};
  ScopedEnv cache;
};

// The fake runtime's count of this thread's host waits (tests/fake_cuda/fake_cuda.h); absent on real CUDA.
extern "C" unsigned long long fakecudaHostWaitsOfThisThread(void) __attribute__((weak));

// collieAllReduce of these arguments; "" or what failed. Its enqueue must not wait on the host: on a GPU
// a wait for our own copy (an eager launch's program copy, or a captured one's) can sit behind a peer's kernel
// that waits for this very launch. The fake runtime counts the waits.
std::string enqueueAllReduce(const float* in, float* out, size_t count, collieComm_t comm, cudaStream_t s) {
  const bool counted = fakecudaHostWaitsOfThisThread != nullptr;
  const unsigned long long before = counted ? fakecudaHostWaitsOfThisThread() : 0;
  if (collieAllReduce(in, out, count, collieFloat32, collieSum, comm, s) != collieSuccess)
    return std::string("collieAllReduce: ") + collieGetLastError(comm);
  const unsigned long long waits = counted ? fakecudaHostWaitsOfThisThread() - before : 0;
  return waits == 0 ? "" : "collieAllReduce waited on the host " + std::to_string(waits) + " time(s)";
}

// Rank r's input of call k: (r + 1) (k + 1) + i % 7; the sum over n ranks is exact in float.
float input(int r, int k, size_t i) { return static_cast<float>((r + 1) * (k + 1) + static_cast<int>(i % 7)); }
float sum(int n, int k, size_t i) {
  return static_cast<float>((k + 1) * n * (n + 1) / 2 + n * static_cast<int>(i % 7));
}

// A device buffer holding rank r's input of call k (count elements), and one poisoned for the output.
struct CallBuffers {
  CallBuffers() = default;
  CallBuffers(const CallBuffers&) = delete;
  CallBuffers& operator=(const CallBuffers&) = delete;
  CallBuffers(CallBuffers&& o) noexcept : in(o.in), out(o.out), count(o.count) { o.in = o.out = nullptr; }
  float* in = nullptr;
  float* out = nullptr;
  size_t count = 0;
  bool make(int r, int k, size_t n) {
    count = n;
    std::vector<float> host(n);
    for (size_t i = 0; i < n; ++i) host[i] = input(r, k, i);
    return cudaMalloc(&in, n * sizeof(float)) == cudaSuccess && cudaMalloc(&out, n * sizeof(float)) == cudaSuccess &&
           cudaMemcpy(in, host.data(), n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaMemset(out, 0xff, n * sizeof(float)) == cudaSuccess &&
           // Both may return before they land; the calls run on non-blocking streams.
           cudaStreamSynchronize(cudaStreamLegacy) == cudaSuccess;
  }
  // "" when out holds the sum of call k over n ranks.
  std::string check(int n, int k) const {
    std::vector<float> got(count);
    if (cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      return "reading results";
    for (size_t i = 0; i < count; ++i)
      if (got[i] != sum(n, k, i))
        return "call " + std::to_string(k) + " element " + std::to_string(i) + ": " + std::to_string(got[i]) +
               ", expected " + std::to_string(sum(n, k, i));
    return "";
  }
  // An allreduce of these buffers captured on `s` into *graph, instantiated as *exec; "" or what failed.
  std::string capture(collieComm_t comm, cudaStream_t s, cudaGraph_t* graph, cudaGraphExec_t* exec) const {
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    const std::string err = enqueueAllReduce(in, out, count, comm, s);
    if (cudaStreamEndCapture(s, graph) != cudaSuccess || !err.empty()) return "capture: " + err;
    return cudaGraphInstantiate(exec, *graph, 0) == cudaSuccess ? "" : "cudaGraphInstantiate";
  }
  // Call k of n ranks, eager, waited for and checked; "" or what failed.
  std::string call(collieComm_t comm, cudaStream_t s, int n, int k) const {
    const std::string err = enqueueAllReduce(in, out, count, comm, s);
    if (!err.empty()) return "eager call " + std::to_string(k) + ": " + err;
    if (cudaStreamSynchronize(s) != cudaSuccess) return "cudaStreamSynchronize";
    return check(n, k);
  }
  ~CallBuffers() {
    cudaFree(in);
    cudaFree(out);
  }
};

// Holds each rank thread until all n have arrived (or 60 s have passed: a broken test must not hang). Every rank
// makes its buffers before it arrives, so that none is still in cudaMalloc once a peer calls: cudaMalloc may wait
// for the kernels running on the device (the fake runtime's does), among them the peer's, which waits for this
// rank's call.
class Arrival {
 public:
  explicit Arrival(int n) : n_(n) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++arrived_ == n_) all_.notify_all();
    all_.wait_for(lock, std::chrono::seconds(60), [&] { return arrived_ >= n_; });
  }

 private:
  const int n_;
  int arrived_ = 0;
  std::mutex mu_;
  std::condition_variable all_;
};

// Runs body(r, stream, error, arrival) on n rank threads, each with a non-blocking stream of its own; the body
// calls arrival.arriveAndWait() once its buffers are made, failed or not. Returns each rank's error ("" when it
// passed).
std::vector<std::string> onRankStreams(int n,
                                       const std::function<void(int, cudaStream_t, std::string&, Arrival&)>& body) {
  std::vector<std::string> errors(n);
  Arrival arrival(n);
  collie::test::onRanks(n, [&](int r) {
    std::string& err = errors[static_cast<size_t>(r)];
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      err = "cudaStreamCreate";
      arrival.arriveAndWait();
      return;
    }
    body(r, s, err, arrival);
    cudaStreamDestroy(s);
  });
  return errors;
}

// Programs longer than the 40 steps a launch carries are uploaded to the
// device and found again by their content on the next call (the default
// cache size).
TEST(CudaBackend, LongProgramsAreUploaded) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env(nullptr);
  const uint64_t seed = collie::test::testSeed();
  collie::test::Comms comms(22);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (int call = 0; call < 2; ++call)
    for (bool inPlace : {false, true}) {
      const std::string err = collie::test::runCollectiveCase(comms, Coll::kAllReduce, collieFloat32, collieSum, 1001,
                                                              inPlace, 0, seed + call, Memory::kDevice);
      ASSERT_EQ(err, "") << "call " << call << (inPlace ? " in-place" : " out-of-place") << " (seed " << seed << ")";
    }
}

// Long programs whose counts change at every call (as all-to-all-v's do with
// a mixture of experts' splits) reuse a bounded set of device blocks instead
// of one new upload kept per count (executor/program_cache.h), and the reused
// blocks carry the right program: every result is checked.
TEST(CudaBackend, ChangingCountsReuseUploadedPrograms) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env("2");
  const uint64_t seed = collie::test::testSeed();
  const int calls = 24;
  collie::test::Comms comms(22);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (int call = 0; call < calls; ++call) {
    const std::string err = collie::test::runCollectiveCase(comms, Coll::kAllReduce, collieFloat32, collieSum,
                                                            1001 + 16 * static_cast<uint64_t>(call), false, 0,
                                                            seed + static_cast<uint64_t>(call), Memory::kDevice);
    ASSERT_EQ(err, "") << "call " << call << " (seed " << seed << ")";
  }
  for (int r = 0; r < comms.size(); ++r) {
    const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
    ASSERT_NE(exec, nullptr);
    // The cache's 2, programs of launches not yet known to be finished (up to 4 checkpoints), a few free.
    EXPECT_LE(exec->programBlocks(), 8u) << "rank " << r << " after " << calls << " counts";
  }
}

TEST(CudaBackend, ABadProgramCacheSettingIsRefusedAtInit) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  for (const char* bad : {"0", "lots", "-3"}) {
    ScopedEnv cache("COLLIE_PROGRAM_CACHE", bad);
    collie::test::Comms comms(2);
    EXPECT_EQ(comms.result, collieInvalidArgument) << bad;
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find("COLLIE_PROGRAM_CACHE must be 1..1048576"),
              std::string::npos)
        << collieGetLastError(nullptr);
  }
}

// Calls queued behind a held stream keep their programs: with room for one
// cached program, each new count's upload must not overwrite the program of
// an earlier call that has not run yet (its checkpoint has not happened), so
// every result is right once the streams are let go.
TEST(CudaBackend, QueuedLaunchesKeepTheirPrograms) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env("1");
  const int n = 22, calls = 6;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::atomic<int> queued{0};
  std::atomic<bool> go{false};
  std::vector<std::string> errors(n);
  Arrival arrival(n);
  collie::test::onRanks(n, [&](int r) {
    std::string& err = errors[static_cast<size_t>(r)];
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) err = "cudaStreamCreate";
    std::vector<CallBuffers> b(calls);
    for (int k = 0; k < calls && err.empty(); ++k)
      if (!b[k].make(r, k, 1001 + 16 * static_cast<size_t>(k))) err = "preparing buffers";
    arrival.arriveAndWait();  // no rank holds its stream while another still allocates
    // Hold the stream until every rank has queued every call (bounded: a broken test must not hang).
    auto hold = [](void* flag) {
      for (int i = 0; i < 60000 && !static_cast<std::atomic<bool>*>(flag)->load(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    };
    if (err.empty() && cudaLaunchHostFunc(s, hold, &go) != cudaSuccess) err = "cudaLaunchHostFunc";
    for (int k = 0; k < calls && err.empty(); ++k) {
      err = enqueueAllReduce(b[k].in, b[k].out, b[k].count, comms[r], s);
      if (!err.empty()) err = "call " + std::to_string(k) + ": " + err;
    }
    if (++queued == n) go = true;
    if (cudaStreamSynchronize(s) != cudaSuccess && err.empty()) err = "cudaStreamSynchronize";
    for (int k = 0; k < calls && err.empty(); ++k) err = b[k].check(n, k);
    cudaStreamDestroy(s);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// While another thread captures in global mode, CUDA forbids every thread's
// unsafe calls (a query of an event among them) unless that thread is in
// relaxed mode: the cache's checkpoint queries must not invalidate the other
// thread's capture, nor fail the calls making them. Everything else (buffers,
// waits) happens before and after the capture, as such a program must.
TEST(CudaBackend, AGlobalCaptureInAnotherThreadSurvivesTheCache) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env("1");
  const int n = 22, calls = 6;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<cudaStream_t> streams(n);
  std::vector<std::vector<CallBuffers>> b(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    b[r] = std::vector<CallBuffers>(calls);
    for (int k = 0; k < calls; ++k) ASSERT_TRUE(b[r][k].make(r, k, 1001 + 16 * static_cast<size_t>(k)));
  }
  cudaStream_t other;
  void* scratch = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&scratch, 64), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(other, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(scratch, 0, 64, other), cudaSuccess);
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    for (int k = 0; k < calls && errors[r].empty(); ++k) {
      errors[r] = enqueueAllReduce(b[r][k].in, b[r][k].out, b[r][k].count, comms[r], streams[r]);
      if (!errors[r].empty()) errors[r] = "call " + std::to_string(k) + ": " + errors[r];
    }
  });
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(other, &graph), cudaSuccess) << "the other thread's capture was invalidated";
  if (graph != nullptr) cudaGraphDestroy(graph);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    for (int k = 0; k < calls && errors[r].empty(); ++k) errors[r] = b[r][k].check(n, k);
    EXPECT_EQ(errors[r], "") << "rank " << r;
    cudaStreamDestroy(streams[r]);
  }
  cudaStreamDestroy(other);
  cudaFree(scratch);
}

// A program a captured launch uses is pinned: eager calls with new counts,
// which evict and reuse every other block, never take its block, so the graph
// replays the captured call right after them.
TEST(CudaBackend, ACapturedProgramIsNeverOverwritten) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env("1");
  const int n = 22, eager = 6;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const std::vector<std::string> errors =
      onRankStreams(n, [&](int r, cudaStream_t s, std::string& err, Arrival& arrival) {
        // Every buffer made first, by every rank (Arrival), and freed last: cudaMalloc and cudaFree may wait for
        // the whole device, where the other ranks' kernels wait for this rank's next call.
        // b[0]: the captured call's, larger than the eager ones, so a replay of an eager program would leave
        // part of it unwritten.
        std::vector<CallBuffers> b(eager + 1);
        for (int k = 0; k <= eager && err.empty(); ++k)
          if (!b[k].make(r, k, 1001 + 16 * static_cast<size_t>(k == 0 ? eager : k - 1))) err = "preparing buffers";
        arrival.arriveAndWait();
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        if (err.empty()) err = b[0].capture(comms[r], s, &graph, &exec);
        for (int k = 1; k <= eager && err.empty(); ++k) err = b[k].call(comms[r], s, n, k);
        if (err.empty() && (cudaGraphLaunch(exec, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess))
          err = "replay";
        if (err.empty()) err = b[0].check(n, 0);
        if (exec != nullptr) cudaGraphExecDestroy(exec);
        if (graph != nullptr) cudaGraphDestroy(graph);
      });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// Graphs captured one after another with new counts (a mixture of experts'
// splits under CUDA graphs), each replayed and then destroyed: each pins its
// program only while it exists (a CUDA user object the graph owns tells the
// executor when it is gone), so the blocks stay bounded instead of one more
// per graph. Every replay and eager call is checked.
TEST(CudaBackend, GraphsThatAreGoneUnpinTheirPrograms) {
  SKIP_WITHOUT_GPU();
  LongRingEnv env("2");
  const int n = 22, graphs = 12;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const std::vector<std::string> errors =
      onRankStreams(n, [&](int r, cudaStream_t s, std::string& err, Arrival& arrival) {
        // Call 2k is graph k's, call 2k + 1 an eager one; every buffer made first (see
        // ACapturedProgramIsNeverOverwritten).
        std::vector<CallBuffers> b(2 * graphs);
        for (int k = 0; k < 2 * graphs && err.empty(); ++k)
          if (!b[k].make(r, k, 1001 + 16 * static_cast<size_t>(k))) err = "preparing buffers";
        arrival.arriveAndWait();
        for (int k = 0; k < graphs && err.empty(); ++k) {
          cudaGraph_t graph = nullptr;
          cudaGraphExec_t exec = nullptr;
          err = b[2 * k].capture(comms[r], s, &graph, &exec);
          if (err.empty() && (cudaGraphLaunch(exec, s) != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess))
            err = "replay " + std::to_string(k);
          if (err.empty()) err = b[2 * k].check(n, 2 * k);
          if (exec != nullptr) cudaGraphExecDestroy(exec);
          if (graph != nullptr) cudaGraphDestroy(graph);
          if (err.empty()) err = b[2 * k + 1].call(comms[r], s, n, 2 * k + 1);
        }
      });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
    ASSERT_NE(exec, nullptr);
    // As in ChangingCountsReuseUploadedPrograms; with every graph's program pinned for ever it would be 12 or more.
    EXPECT_LE(exec->programBlocks(), 8u) << "rank " << r << " after " << graphs << " graphs";
  }
}

}  // namespace
