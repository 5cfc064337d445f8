// The launch floor: how fast T threads of one process, each with a stream of
// its own on the one GPU, can issue calls that are one tiny kernel each: the
// shape of a small collective whose T ranks share a GPU, without the
// collective. Issue 4 asks for 8 B to 64 KiB allreduces in 10 us at 2-8 ranks;
// if T launches into one CUDA context already take longer, no design with a
// launch per rank per call meets it there, and the figure says by how much.
//
// Per thread count (1, 2, 4, 8 by default), three ways, each timed as
// collie-bench times calls (back to back, one synchronize at the end; the
// slowest thread's time per call):
//   launch        a one-element kernel (Collie's scaling kernel, kernels/scale.h)
//   as collie     what an enqueue of Collie's CUDA executor adds around its launch:
//                 cudaStreamIsCapturing before, cudaEventRecord after
//   graph         the kernel captured once, then one cudaGraphLaunch per call
// With --jsonl FILE, each figure is also appended to FILE as a JSON line
// ({"kind": "launch_floor", "threads", "way", "us_per_call"}).
// Run by tests/gpu/run.sh as bench_launch_floor and perf_launch_floor; needs a GPU (exits 77 with the
// reason otherwise). Usage: launch_floor [--jsonl FILE] [ITERS [T ...]]
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
#include "kernels/launch.h"
#include "kernels/scale.h"

namespace {

enum class Way { kLaunch, kAsCollie, kGraph };
const char* const kWayNames[] = {"launch", "as collie", "graph"};

// One thread's calls; returns seconds per call, or a negative value after printing the failure.
double run(Way way, int iters, std::atomic<int>* ready, int threads) {
  cudaStream_t stream = nullptr;
  float* buf = nullptr;
  cudaEvent_t done = nullptr;
  cudaGraphExec_t exec = nullptr;
  const float one = 1.0f;
  auto failed = [](const char* what, cudaError_t e) {
    fprintf(stderr, "launch_floor: %s: %s\n", what, cudaGetErrorString(e));
    return -1.0;
  };
  // Every thread starts its timed calls at once, as the ranks of one collective do; one that failed its set-up
  // still arrives, so that the others do not wait for it.
  auto arrive = [&] {
    ready->fetch_add(1);
    while (ready->load() < threads) std::this_thread::yield();
  };
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMalloc(&buf, 2 * sizeof(float));
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  auto kernel = [&] {
    return static_cast<cudaError_t>(collie::launchScale(collieFloat32, buf, buf + 1, 1, &one, nullptr, stream));
  };
  if (e == cudaSuccess && way == Way::kGraph) {
    cudaGraph_t graph = nullptr;
    e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    if (e == cudaSuccess) e = kernel();
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (e == cudaSuccess) e = end;
    if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, graph, 0);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
  auto call = [&] {
    if (way == Way::kGraph) return cudaGraphLaunch(exec, stream);
    if (way == Way::kLaunch) return kernel();
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t rc = cudaStreamIsCapturing(stream, &capture);
    if (rc == cudaSuccess) rc = kernel();
    if (rc == cudaSuccess) rc = cudaEventRecord(done, stream);
    return rc;
  };
  for (int i = 0; i < 50 && e == cudaSuccess; ++i) e = call();  // warm-up
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  arrive();
  const char* stage = "set-up and warm-up";
  double sec = -1;
  if (e == cudaSuccess) {
    stage = "timed calls";
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters && e == cudaSuccess; ++i) e = call();
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  }
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  if (done != nullptr) cudaEventDestroy(done);
  if (buf != nullptr) cudaFree(buf);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return e == cudaSuccess ? sec : failed(stage, e);
}

}  // namespace

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbe(argc, argv);  // 77, "skipped: ..." without a usable GPU
  if (probe >= 0) return probe;
  FILE* jsonl = nullptr;
  int first = 1;
  if (argc > 2 && std::string(argv[1]) == "--jsonl") {
    if ((jsonl = fopen(argv[2], "a")) == nullptr) {
      fprintf(stderr, "launch_floor: cannot append to %s\n", argv[2]);
      return 1;
    }
    first = 3;
  }
  const int iters = argc > first ? std::max(1, atoi(argv[first])) : 2000;
  std::vector<int> counts;
  for (int i = first + 1; i < argc; ++i) counts.push_back(std::max(1, atoi(argv[i])));
  if (counts.empty()) counts = {1, 2, 4, 8};
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int preload = collie::preloadProgramKernels();  // the first launch should not pay for loading the module
  if (preload != 0) {
    printf("launch_floor: loading the kernels failed: %s\n", cudaGetErrorString(static_cast<cudaError_t>(preload)));
    return 1;
  }
  printf("launch floor on %s: us per call, the slowest of T threads (each its own stream), %d calls after 50\n",
         prop.name, iters);
  printf("%8s %12s %12s %12s\n", "threads", kWayNames[0], kWayNames[1], kWayNames[2]);
  int rc = 0;
  for (int t : counts) {
    printf("%8d", t);
    for (Way way : {Way::kLaunch, Way::kAsCollie, Way::kGraph}) {
      std::atomic<int> ready{0};
      std::vector<double> sec(static_cast<size_t>(t), 0);
      std::vector<std::thread> threads;
      for (int i = 0; i < t; ++i)
        threads.emplace_back([&, i] { sec[static_cast<size_t>(i)] = run(way, iters, &ready, t); });
      for (std::thread& th : threads) th.join();
      const double worst = *std::max_element(sec.begin(), sec.end());
      if (*std::min_element(sec.begin(), sec.end()) < 0) rc = 1;
      printf(" %12.2f", worst * 1e6);
      if (jsonl != nullptr)
        fprintf(jsonl, "{\"kind\": \"launch_floor\", \"threads\": %d, \"way\": \"%s\", \"us_per_call\": %.3f}\n", t,
                kWayNames[static_cast<int>(way)], worst * 1e6);
    }
    printf("\n");
  }
  if (jsonl != nullptr) fclose(jsonl);
  return rc;
}
