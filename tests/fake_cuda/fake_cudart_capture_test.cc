// Unit tests of the fake CUDA runtime's stream capture and graphs: what is recorded and replayed,
// and the misuses CUDA refuses during a capture, with its error codes.
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "fake_cudart_test_util.h"

namespace fakecuda_test {
namespace {

using fakecuda::enqueue;

cudaStreamCaptureStatus statusOf(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  return status;
}

cudaStream_t nonBlockingStream() {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return s;
}

// Work appending `v` to `order` (guarded: graphs run on worker threads).
struct Order {
  std::mutex mu;
  std::vector<int> seen;
  fakecuda::Work add(int v) {
    return [this, v] {
      std::lock_guard<std::mutex> lock(mu);
      seen.push_back(v);
      return cudaSuccess;
    };
  }
};

TEST_F(FakeCuda, CapturedWorkRunsOnlyWhenTheGraphIsLaunched) {
  cudaStream_t s = nonBlockingStream();
  CaptureGuard guard{s};
  char* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 64), cudaSuccess);
  std::atomic<int> runs{0};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusActive);
  ASSERT_EQ(enqueue(s,
                    [&] {
                      ++runs;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dev, 9, 64, s), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(runs.load(), 0);
  char out[64] = {};
  ASSERT_EQ(cudaMemcpy(out, dev, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[0], static_cast<char>(kGarbage));
  cudaGraphExec_t x = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);  // the executable graph does not need it
  EXPECT_EQ(cudaGraphDestroy(g), cudaErrorInvalidValue);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(runs.load(), 2);
  ASSERT_EQ(cudaMemcpy(out, dev, 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(out[0], 9);
  EXPECT_EQ(out[63], 9);
  EXPECT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(x, s), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// An event recorded in a capture stands for graph nodes, not for work on a stream.
TEST_F(FakeCuda, CapturedEventsAreRefusedOutsideTheirCapture) {
  cudaStream_t s = nonBlockingStream(), other = nonBlockingStream();
  CaptureGuard guard{s};
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(enqueue(s, [] { return cudaSuccess; }), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(e), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorCapturedEvent);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(other, e, 0), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaEventSynchronize(e), cudaErrorCapturedEvent);
  EXPECT_EQ(cudaGetLastError(), cudaErrorCapturedEvent);
  ASSERT_EQ(cudaEventRecord(e, other), cudaSuccess);  // recorded outside: an ordinary event again
  EXPECT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s, e, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

// A stream waiting on an event of a capture joins it (a fork); the origin must wait for it again
// (the join) before the capture ends.
TEST_F(FakeCuda, ForkAndJoinAcrossStreams) {
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream();
  CaptureGuard guard1{s1}, guard2{s2};
  cudaEvent_t fork, join;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  Order order;
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(enqueue(s1, order.add(1)), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, fork, 0), cudaSuccess);
  EXPECT_EQ(statusOf(s2), cudaStreamCaptureStatusActive);
  ASSERT_EQ(enqueue(s2, order.add(2)), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s1, join, 0), cudaSuccess);
  ASSERT_EQ(enqueue(s1, order.add(3)), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s1, &g), cudaSuccess);
  EXPECT_EQ(statusOf(s2), cudaStreamCaptureStatusNone);
  EXPECT_TRUE(order.seen.empty());
  cudaGraphExec_t x = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s2), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
  EXPECT_EQ(order.seen, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);

  // Ending on the forked stream is not allowed, and spoils the capture.
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, fork, 0), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s2, &g), cudaErrorStreamCaptureUnmatched);
  EXPECT_EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  // Without the join the capture fails at its end.
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, s1), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s2, fork, 0), cudaSuccess);
  ASSERT_EQ(enqueue(s2, order.add(4)), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(statusOf(s2), cudaStreamCaptureStatusNone);
  for (cudaEvent_t e : {fork, join}) EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s1), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s2), cudaSuccess);
  cudaGetLastError();
}

TEST_F(FakeCuda, CaptureCannotDependOnOutsideWorkOrAnotherCapture) {
  cudaStream_t s1 = nonBlockingStream(), s2 = nonBlockingStream(), outside = nonBlockingStream();
  CaptureGuard guard1{s1}, guard2{s2};
  cudaEvent_t e, fresh;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&fresh), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, outside), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s1, fresh, 0), cudaSuccess);  // never recorded: nothing to wait for
  EXPECT_EQ(cudaStreamWaitEvent(s1, e, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(statusOf(s1), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(enqueue(s1, [] { return cudaSuccess; }), cudaErrorStreamCaptureInvalidated);
  cudaGraph_t g = reinterpret_cast<cudaGraph_t>(1);
  EXPECT_EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  // Two captures may not merge.
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s1), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(s2, e, 0), cudaErrorStreamCaptureMerge);
  EXPECT_EQ(cudaStreamEndCapture(s1, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(s2, &g), cudaErrorStreamCaptureInvalidated);
  for (cudaEvent_t ev : {e, fresh}) EXPECT_EQ(cudaEventDestroy(ev), cudaSuccess);
  for (cudaStream_t s : {s1, s2, outside}) EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// cudaThreadExchangeStreamCaptureMode's rules for "potentially unsafe" calls (here cudaMalloc and
// cudaEventQuery) while a capture is in progress.
TEST_F(FakeCuda, UnsafeCallsFollowTheCaptureModes) {
  cudaStream_t s = nonBlockingStream();
  CaptureGuard guard{s};
  cudaGraph_t g = nullptr;
  void* p = nullptr;
  auto otherThreadMalloc = [&](cudaStreamCaptureMode mode) {
    cudaError_t result = cudaErrorUnknown;
    std::thread([&] {
      cudaStreamCaptureMode m = mode;
      cudaThreadExchangeStreamCaptureMode(&m);
      void* q = nullptr;
      result = cudaMalloc(&q, 64);
      if (q != nullptr) cudaFree(q);
    }).join();
    return result;
  };
  // Global capture: forbidden to this thread and to other threads in global mode.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(otherThreadMalloc(cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  // ... but allowed to threads in relaxed mode (and to thread-local ones for another thread's capture).
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(otherThreadMalloc(cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(otherThreadMalloc(cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  // Thread-local capture: other threads are free, this one is not.
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(otherThreadMalloc(cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  // Relaxed capture: nothing is forbidden, except synchronizing the capturing device.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 64), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(cudaEventDestroy(e), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// The legacy default stream synchronizes with blocking streams, so it cannot be used while one of
// them captures; a non-blocking capture leaves it usable.
TEST_F(FakeCuda, LegacyStreamDuringCapture) {
  cudaStream_t blocking;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  cudaStream_t nonBlocking = nonBlockingStream();
  CaptureGuard guard1{blocking}, guard2{nonBlocking};
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(blocking, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status;
  EXPECT_EQ(cudaStreamIsCapturing(nullptr, &status), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(statusOf(blocking), cudaStreamCaptureStatusActive);  // the query does not spoil it
  EXPECT_EQ(enqueue(nullptr, [] { return cudaSuccess; }), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(statusOf(blocking), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(blocking, &g), cudaErrorStreamCaptureInvalidated);
  std::atomic<bool> ran{false};
  ASSERT_EQ(cudaStreamBeginCapture(nonBlocking, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(statusOf(cudaStreamLegacy), cudaStreamCaptureStatusNone);
  EXPECT_EQ(enqueue(cudaStreamLegacy,
                    [&] {
                      ran = true;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(nonBlocking, &g), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(cudaStreamDestroy(blocking), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(nonBlocking), cudaSuccess);
  cudaGetLastError();
}

TEST_F(FakeCuda, CaptureMisuse) {
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamBeginCapture(cudaStreamLegacy, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
  cudaStream_t s = nonBlockingStream();
  CaptureGuard guard{s};
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, static_cast<cudaStreamCaptureMode>(7)), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorIllegalState);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  cudaError_t fromOtherThread = cudaSuccess;
  std::thread([&] { fromOtherThread = cudaStreamEndCapture(s, &g); }).join();
  EXPECT_EQ(fromOtherThread, cudaErrorStreamCaptureWrongThread);
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaStreamEndCapture(s, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(cudaThreadExchangeStreamCaptureMode(nullptr), cudaErrorInvalidValue);
  cudaGraphExec_t x = nullptr;
  EXPECT_EQ(cudaGraphInstantiate(&x, nullptr, 0), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// cudaMallocAsync and cudaFreeAsync inside a capture: the graph owns the memory (fresh garbage at
// every launch) and frees it when the last graph referring to it is destroyed.
TEST_F(FakeCuda, StreamOrderedAllocationInACapture) {
  cudaStream_t s = nonBlockingStream();
  CaptureGuard guard{s};
  size_t free0 = 0, free1 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  unsigned char* p = nullptr;
  ASSERT_EQ(cudaMallocAsync(reinterpret_cast<void**>(&p), 256, s), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [p] {
                      if (p[0] != kGarbage || p[255] != kGarbage) return cudaErrorLaunchFailure;
                      p[0] = p[255] = 0;  // the kernel's scratch use
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue);  // the graph's, not the caller's
  cudaGraphExec_t x = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaPointerAttributes a;
  ASSERT_EQ(cudaPointerGetAttributes(&a, p), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&a, p), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeDevice);  // still held by the executable graph
  EXPECT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  ASSERT_EQ(cudaPointerGetAttributes(&a, p), cudaSuccess);
  EXPECT_EQ(a.type, cudaMemoryTypeUnregistered);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

// External event nodes: a replay waits for the event's latest record as the launch is made, and
// records it so that work issued after the launch can wait for the replay; the event is never a
// captured one.
TEST_F(FakeCuda, ExternalEventNodesActWhenTheGraphIsLaunched) {
  cudaStream_t s = nonBlockingStream(), before = nonBlockingStream(), replay = nonBlockingStream(),
               after = nonBlockingStream();
  CaptureGuard guard{s};
  cudaEvent_t done;
  ASSERT_EQ(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), cudaSuccess);
  std::atomic<int> x{0};
  int seenByGraph = -1, seenAfter = -1;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s, done, cudaEventWaitExternal), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [&] {
                      seenByGraph = x;
                      std::this_thread::sleep_for(20ms);
                      x = 2;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecordWithFlags(done, s, cudaEventRecordExternal), cudaSuccess);
  EXPECT_EQ(cudaEventRecordWithFlags(done, s, 2), cudaErrorInvalidValue);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);  // not a captured event, and not recorded yet
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  std::atomic<bool> gate{false};
  ASSERT_EQ(enqueue(before,
                    [&] {
                      if (!waitFlag(gate)) return cudaErrorLaunchTimeout;
                      x = 1;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, before), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, replay), cudaSuccess);  // waits for `before`, then records `done`
  ASSERT_EQ(cudaStreamWaitEvent(after, done, 0), cudaSuccess);
  ASSERT_EQ(enqueue(after,
                    [&] {
                      seenAfter = x;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  gate = true;
  EXPECT_EQ(cudaStreamSynchronize(after), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(replay), cudaSuccess);
  EXPECT_EQ(seenByGraph, 1);
  EXPECT_EQ(seenAfter, 2);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
  for (cudaStream_t e : {s, before, replay, after}) EXPECT_EQ(cudaStreamDestroy(e), cudaSuccess);
  cudaGetLastError();
}

// Launches of one executable graph never overlap, on whatever streams; a graph launched inside a
// capture becomes part of the new graph.
TEST_F(FakeCuda, LaunchesOfOneGraphAreSerialized) {
  cudaStream_t s = nonBlockingStream(), a = nonBlockingStream(), b = nonBlockingStream();
  CaptureGuard guard{s};
  std::atomic<bool> busy{false};
  std::atomic<int> runs{0};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(enqueue(s,
                    [&] {
                      if (busy.exchange(true)) return cudaErrorLaunchFailure;
                      std::this_thread::sleep_for(10ms);
                      busy = false;
                      ++runs;
                      return cudaSuccess;
                    }),
            cudaSuccess);
  cudaGraph_t g = nullptr, outer = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t x = nullptr, y = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, a), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, b), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(runs.load(), 2);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(s, &outer), cudaSuccess);
  EXPECT_EQ(runs.load(), 2);
  ASSERT_EQ(cudaGraphInstantiate(&y, outer, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(y, a), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(a), cudaSuccess);
  EXPECT_EQ(runs.load(), 3);
  for (cudaGraphExec_t e : {x, y}) EXPECT_EQ(cudaGraphExecDestroy(e), cudaSuccess);
  for (cudaGraph_t e : {g, outer}) EXPECT_EQ(cudaGraphDestroy(e), cudaSuccess);
  for (cudaStream_t e : {s, a, b}) EXPECT_EQ(cudaStreamDestroy(e), cudaSuccess);
}

// A user object a capture's graph owns (named by cudaStreamGetCaptureInfo while it is being built) is
// destroyed only once the graph, its executable graph and the launches queued from it are all gone.
TEST_F(FakeCuda, AGraphsUserObjectGoesWithTheGraphAndItsLaunches) {
  cudaStream_t s = nonBlockingStream();
  CaptureGuard guard{s};
  std::atomic<int> destroyed{0};
  cudaUserObject_t object = nullptr;
  ASSERT_EQ(cudaUserObjectCreate(
                &object, &destroyed, [](void* p) { ++*static_cast<std::atomic<int>*>(p); }, 1,
                cudaUserObjectNoDestructorSync),
            cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t building = nullptr;
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, &building), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_NE(building, nullptr);
  ASSERT_EQ(cudaGraphRetainUserObject(building, object, 1, cudaGraphUserObjectMove), cudaSuccess);
  std::atomic<bool> gate{false};
  ASSERT_EQ(enqueue(s, gated(gate)), cudaSuccess);
  cudaGraph_t g = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  cudaGraphExec_t x = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&x, g, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(g), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(x, s), cudaSuccess);  // held by the gate
  EXPECT_EQ(cudaGraphExecDestroy(x), cudaSuccess);
  EXPECT_EQ(destroyed.load(), 0) << "a queued launch still refers to the graph";
  gate = true;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 1000 && destroyed.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(destroyed.load(), 1);
  // Not capturing: no graph; the dependency nodes are not modelled.
  ASSERT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, &building), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  size_t deps = 0;
  EXPECT_EQ(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, nullptr, nullptr, &deps), cudaErrorNotSupported);
  EXPECT_EQ(cudaUserObjectCreate(&object, nullptr, nullptr, 1, cudaUserObjectNoDestructorSync), cudaErrorInvalidValue);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  cudaGetLastError();
}

}  // namespace
}  // namespace fakecuda_test
