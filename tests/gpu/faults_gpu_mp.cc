// One rank of a CUDA job (ranks as processes of one machine, windows through cudaIpc) in which one rank, the
// victim, is killed (SIGKILL) right after init; run by tests/gpu/faults_gpu_test.sh through
// tests/mp/faults_test.sh. The survivors' kernels wait on the victim's window, in device memory, which no kernel
// can tell from a slow peer: the executor's PeerWatch notices the process is gone and stops them. Every
// survivor's allreduce must fail with collieRemoteError naming the victim's exit well before COLLIE_TIMEOUT (the
// script sets 60 s; 10 s allowed here), and its destroy must be prompt.
//   faults_gpu_mp --probe        exit 77 (skip), saying why, when no GPU is usable
//   faults_gpu_mp before VICTIM  as above (the mode and victim as faults_test.sh passes them)
#include <cuda_runtime.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "collie.h"
#include "gpu/gpu_usable.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbe(argc, argv);
  if (probe >= 0) return probe;
  if (argc < 3 || strcmp(argv[1], "before") != 0) {
    fprintf(stderr, "usage: faults_gpu_mp --probe | before VICTIM\n");
    return 2;
  }
  const int victim = atoi(argv[2]);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  cudaSetDevice(0);
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.backend = collieBackendCuda;
  collieComm_t comm = nullptr;
  if (collieCommInitFromEnv(&comm, &config) != collieSuccess) {
    printf("init failed: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  int rank = 0;
  collieCommUserRank(comm, &rank);
  if (rank == victim) raise(SIGKILL);
  // Allocated before the call: a cudaMalloc may wait for the device, where our kernel will be waiting.
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  if (cudaMalloc(&buf, 4096 * sizeof(float)) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    printf("rank %d: FAIL: cudaMalloc or cudaStreamCreate\n", rank);
    return 1;
  }
  // Let the victim die first, so that the call finds it gone.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const Clock::time_point start = Clock::now();
  collieResult_t rc = collieAllReduce(buf, buf, 4096, collieFloat32, collieSum, comm, stream);
  collieResult_t async = collieSuccess;
  if (rc == collieSuccess) {
    // The kernel reports through collieCommGetAsyncError, as a watchdog polls it.
    while (async == collieSuccess && since(start) < 30) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (collieCommGetAsyncError(comm, &async) != collieSuccess) break;
    }
    rc = async;
  }
  const double took = since(start);
  const std::string text = collieGetLastError(comm);
  printf("rank %d: allreduce failed with %s after %.2f s: %s\n", rank, collieGetErrorString(rc), took, text.c_str());
  cudaStreamSynchronize(stream);  // the kernel has stopped
  const Clock::time_point d = Clock::now();
  collieCommDestroy(comm);
  const double destroy = since(d);
  printf("rank %d: destroy took %.2f s\n", rank, destroy);
  cudaStreamDestroy(stream);
  cudaFree(buf);
  const std::string named = "rank " + std::to_string(victim) + " (pid ";
  // A survivor that waits on the victim names it; one that waits on a survivor which gave up first (its failure mark,
  // executor/protocol.h) names that rank instead, as fast (rd on 3 ranks: rank 2 waits on rank 0 at step 1).
  const bool namesVictim = text.find(named) != std::string::npos && text.find(") exited") != std::string::npos;
  const bool namesQuitter = text.find("had given up this call first") != std::string::npos;
  const bool ok = rc == collieRemoteError && took < 10 && destroy < 5 && (namesVictim || namesQuitter);
  if (!ok)
    printf(
        "rank %d: FAIL (collieRemoteError naming %s...) exited, or a rank that had given up first, within 10 s, "
        "expected)\n",
        rank, named.c_str());
  return ok ? 0 : 1;
}
