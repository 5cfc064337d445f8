// One launch serving every rank of a direct_oneshot allreduce (COLLIE_DIRECT_ONE_LAUNCH=1,
// executor/cuda_one_launch.cc), ranks as threads sharing the GPU, driven by one thread through groups as
// collieCommInitAll programs and NCCL's grouped calls are: every result exact over calls of several sizes, types and
// operators, in and out of place, and every call served by rank 0's one launch; the launch ordered after every
// rank's stream reached the call and before any goes past it; captured calls launched per rank and replayed exact;
// calls that differ refused on every rank; a call outside a group waits for its peers until COLLIE_TIMEOUT and says
// why. Every test skips, saying why, when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/cuda_executor.h"
#include "gpu/gpu_skip.h"

namespace {

using collie::test::ScopedEnv;

// One rank's buffers and stream, freed only after every rank's work is done (the test body's scope).
struct RankBuffers {
  explicit RankBuffers(size_t bytes) {
    cudaMalloc(&in, bytes);
    cudaMalloc(&out, bytes);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~RankBuffers() {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    cudaFree(in);
    cudaFree(out);
  }
  void* in = nullptr;
  void* out = nullptr;
  cudaStream_t stream = nullptr;
};

// Rank r's input element i of call k: small integers, so every sum and maximum is exact in any order.
int valueOf(int r, size_t i, int k) { return static_cast<int>((i * 7 + static_cast<size_t>(r) * 13 + k) % 61) - 30; }

uint64_t oneLaunchCalls(collieComm_t comm) {
  const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comm->executor.get());
  return exec != nullptr ? exec->oneLaunchCalls() : 0;
}

struct Shape {
  size_t count;
  collieDataType_t type;
  collieRedOp_t op;
  bool inPlace;
};

// Writes every rank's input of call k (and, in place, its output buffer holds it), makes every rank's call inside
// one group from this thread (the output of rank r being rank r's `out`, or with `capture` the calls captured, one
// graph per rank, and replayed), and returns what is wrong ("" when every element is exact).
std::string runGroup(const collie::test::Comms& comms, std::vector<std::unique_ptr<RankBuffers>>& bufs, const Shape& s,
                     int k, bool capture) {
  const int n = comms.size();
  const size_t size = s.type == collieFloat32 ? sizeof(float) : sizeof(int32_t);
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> host(s.count * size);
    for (size_t i = 0; i < s.count; ++i) {
      const int v = valueOf(r, i, k);
      const float f = static_cast<float>(v);
      memcpy(host.data() + i * size, s.type == collieFloat32 ? static_cast<const void*>(&f) : &v, size);
    }
    RankBuffers& b = *bufs[static_cast<size_t>(r)];
    cudaMemcpyAsync(s.inPlace ? b.out : b.in, host.data(), host.size(), cudaMemcpyHostToDevice, b.stream);
    if (!s.inPlace) cudaMemsetAsync(b.out, 0xff, host.size(), b.stream);
    cudaStreamSynchronize(b.stream);
  }
  if (capture)
    for (int r = 0; r < n; ++r)
      cudaStreamBeginCapture(bufs[static_cast<size_t>(r)]->stream, cudaStreamCaptureModeRelaxed);
  if (collieGroupStart() != collieSuccess) return "collieGroupStart failed";
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = *bufs[static_cast<size_t>(r)];
    collieAllReduce(s.inPlace ? b.out : b.in, b.out, s.count, s.type, s.op, comms[r], b.stream);
  }
  const collieResult_t end = collieGroupEnd();
  std::vector<cudaGraphExec_t> graphs;
  if (capture)
    for (int r = 0; r < n; ++r) {
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      cudaStreamEndCapture(bufs[static_cast<size_t>(r)]->stream, &graph);
      if (graph != nullptr && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) graphs.push_back(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
    }
  if (end != collieSuccess) return std::string("collieGroupEnd: ") + collieGetLastError(nullptr);
  if (capture) {
    if (graphs.size() != static_cast<size_t>(n)) return "a capture made no graph";
    for (int r = 0; r < n; ++r) cudaGraphLaunch(graphs[static_cast<size_t>(r)], bufs[static_cast<size_t>(r)]->stream);
  }
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = *bufs[static_cast<size_t>(r)];
    if (cudaStreamSynchronize(b.stream) != cudaSuccess) return "rank " + std::to_string(r) + ": its stream failed";
    std::vector<uint8_t> got(s.count * size);
    cudaMemcpy(got.data(), b.out, got.size(), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < s.count; ++i) {
      int want = s.op == collieMax ? -1000 : 0;
      for (int p = 0; p < n; ++p) want = s.op == collieMax ? std::max(want, valueOf(p, i, k)) : want + valueOf(p, i, k);
      float f = 0;
      int v = 0;
      memcpy(s.type == collieFloat32 ? static_cast<void*>(&f) : &v, got.data() + i * size, size);
      const double value = s.type == collieFloat32 ? f : v;
      if (value != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " is " + std::to_string(value) +
               ", not " + std::to_string(want);
    }
  }
  for (cudaGraphExec_t g : graphs) cudaGraphExecDestroy(g);
  return "";
}

// Calls of several shapes at 3 and 8 ranks, each a group driven from this thread, then a captured one; then, on
// communicators of their own, calls that differ and a call outside a group.
TEST(CudaBackend, OneLaunchServesEveryRankOfAGroup) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv oneLaunch("COLLIE_DIRECT_ONE_LAUNCH", "1");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:direct_oneshot");
  ScopedEnv timeout("COLLIE_TIMEOUT", "3");
  const Shape shapes[] = {{1001, collieFloat32, collieSum, false},
                          {7, collieInt32, collieMax, true},
                          {4096, collieInt32, collieSum, false},
                          {1, collieFloat32, collieMax, false},
                          {333, collieFloat32, collieSum, true}};
  for (int n : {3, 8}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<std::unique_ptr<RankBuffers>> bufs;
    for (int r = 0; r < n; ++r) bufs.push_back(std::make_unique<RankBuffers>(4096 * sizeof(float)));
    int k = 0;
    for (const Shape& s : shapes) ASSERT_EQ(runGroup(comms, bufs, s, k++, false), "") << "call " << k;
    for (int r = 0; r < n; ++r) EXPECT_EQ(oneLaunchCalls(comms[r]), std::size(shapes)) << "rank " << r;
    // Captured: each rank's own launch, its graph replayed on its stream; the calls after it one launch again.
    ASSERT_EQ(runGroup(comms, bufs, shapes[0], k++, true), "");
    ASSERT_EQ(runGroup(comms, bufs, shapes[1], k++, false), "");
    for (int r = 0; r < n; ++r) EXPECT_EQ(oneLaunchCalls(comms[r]), std::size(shapes) + 1) << "rank " << r;
  }
  // Rank 1's count differs: every rank refuses before any launch, saying so (the communicators are then broken, as
  // after any call that differs).
  {
    collie::test::Comms comms(3);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<std::unique_ptr<RankBuffers>> bufs;
    for (int r = 0; r < 3; ++r) bufs.push_back(std::make_unique<RankBuffers>(4096 * sizeof(float)));
    ASSERT_EQ(runGroup(comms, bufs, shapes[0], 0, false), "");
    ASSERT_EQ(collieGroupStart(), collieSuccess);
    for (int r = 0; r < 3; ++r) {
      RankBuffers& b = *bufs[static_cast<size_t>(r)];
      collieAllReduce(b.in, b.out, r == 1 ? 100 : 99, collieFloat32, collieSum, comms[r], b.stream);
    }
    EXPECT_EQ(collieGroupEnd(), collieInvalidUsage);
    for (int r = 0; r < 3; ++r) {
      const std::string why = collieGetLastError(comms[r]);
      EXPECT_NE(why.find("differs from rank"), std::string::npos) << "rank " << r << ": " << why;
    }
  }
  // Rank 0's call alone, from this thread: its peers never come.
  {
    collie::test::Comms comms(3);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    RankBuffers b0(4096 * sizeof(float));
    EXPECT_EQ(collieAllReduce(b0.in, b0.out, 10, collieFloat32, collieSum, comms[0], b0.stream), collieTimeout);
    const std::string why = collieGetLastError(comms[0]);
    EXPECT_NE(why.find("must make its call from a thread of its own or inside one group"), std::string::npos) << why;
  }
}

// The one launch is ordered by events alone: rank 0's stream launches only once every peer's stream has reached
// the call, and no rank's stream goes past the call before the launch has ended. The last rank starts with stale
// input; its stream is held shut by a host function, then poisons its output and writes its input, then makes its
// call: 100 ms after the group's calls, rank 0's and rank 1's streams must still be busy, and once it opens, every
// output must be exact (a launch before its write would reduce the stale input).
TEST(CudaBackend, OneLaunchWaitsForEveryRanksStream) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv oneLaunch("COLLIE_DIRECT_ONE_LAUNCH", "1");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:direct_oneshot");
  const int n = 3, slow = n - 1;
  const size_t count = 1001;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::unique_ptr<RankBuffers>> bufs;
  std::vector<std::vector<float>> inputs(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    bufs.push_back(std::make_unique<RankBuffers>(count * sizeof(float)));
    for (size_t i = 0; i < count; ++i) inputs[static_cast<size_t>(r)][i] = static_cast<float>(valueOf(r, i, 0));
    std::vector<float> stale = inputs[static_cast<size_t>(r)];
    for (float& x : stale) x += 0.5f;
    cudaMemcpyAsync(bufs.back()->in, (r == slow ? stale : inputs[static_cast<size_t>(r)]).data(), count * sizeof(float),
                    cudaMemcpyHostToDevice, bufs.back()->stream);
    cudaStreamSynchronize(bufs.back()->stream);
  }
  std::atomic<bool> open{false};
  RankBuffers& held = *bufs[static_cast<size_t>(slow)];
  cudaLaunchHostFunc(
      held.stream,
      [](void* gate) {
        while (!static_cast<std::atomic<bool>*>(gate)->load())
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
      },
      &open);
  cudaMemsetAsync(held.out, 0xff, count * sizeof(float), held.stream);
  cudaMemcpyAsync(held.in, inputs[static_cast<size_t>(slow)].data(), count * sizeof(float), cudaMemcpyHostToDevice,
                  held.stream);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = *bufs[static_cast<size_t>(r)];
    collieAllReduce(b.in, b.out, count, collieFloat32, collieSum, comms[r], b.stream);
  }
  const collieResult_t end = collieGroupEnd();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (int r = 0; r < slow && end == collieSuccess; ++r)
    EXPECT_EQ(cudaStreamQuery(bufs[static_cast<size_t>(r)]->stream), cudaErrorNotReady)
        << "rank " << r << "'s stream went past the call before the held rank's stream reached it";
  open = true;
  ASSERT_EQ(end, collieSuccess) << collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    RankBuffers& b = *bufs[static_cast<size_t>(r)];
    ASSERT_EQ(cudaStreamSynchronize(b.stream), cudaSuccess);
    std::vector<float> got(count);
    cudaMemcpy(got.data(), b.out, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += inputs[static_cast<size_t>(p)][i];
      ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
    }
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(oneLaunchCalls(comms[r]), 1u) << "rank " << r;
}

}  // namespace
