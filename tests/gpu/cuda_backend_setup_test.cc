// The CUDA backend's set-up and its errors, ranks as threads: buffers, streams
// and devices in the wrong place (errors naming the argument, not faults), more
// blocks than the GPU holds, the staged path (COLLIE_P2P=0, or GPUs without
// P2P) against device windows, a bad COLLIE_P2P, ranks sharing a GPU (their
// tuning, and the streams they need), a rank that never joins (the kernel's
// bounded wait becomes collieCommGetAsyncError's collieTimeout), stopping
// the kernels that wait for it (collieCommRevoke, collieCommShrink), and ranks
// whose calls differ.
// Built into collectives_gpu_test with collectives_gpu_test.cc, whose cases
// run the collectives themselves. Every test skips, saying why, when no GPU is
// usable; scripts/fake_gpu.sh runs them on the fake CUDA runtime.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algorithms/tuner.h"
#include "collie.h"
#include "common/collective_case.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/cuda_executor.h"
#include "executor/remote_proxy.h"
#include "executor/staged_executor.h"
#include "gpu/gpu_skip.h"

namespace {

using collie::test::Coll;
using collie::test::Memory;
using collie::test::ScopedEnv;
using collie::test::timeoutSeconds;

// Buffers the executor cannot reach are errors naming the argument, not faults.
TEST(CudaBackend, BuffersInTheWrongPlaceAreErrors) {
  SKIP_WITHOUT_GPU();
  collie::test::Comms host(1);  // the tests' default: COLLIE_DEVICE=host
  ASSERT_EQ(host.result, collieSuccess) << collieGetLastError(nullptr);
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  collie::test::Comms gpu(1);
  ASSERT_EQ(gpu.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<float> hostBuf(16);
  float* devBuf = nullptr;
  ASSERT_EQ(cudaMalloc(&devBuf, 16 * sizeof(float)), cudaSuccess);
  EXPECT_EQ(collieAllReduce(hostBuf.data(), devBuf, 16, collieFloat32, collieSum, gpu[0], nullptr),
            collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(gpu[0])).find("sendbuff is host memory"), std::string::npos)
      << collieGetLastError(gpu[0]);
  EXPECT_EQ(collieAllReduce(devBuf, devBuf, 16, collieFloat32, collieSum, host[0], nullptr), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(host[0])).find("host backend"), std::string::npos)
      << collieGetLastError(host[0]);
  cudaFree(devBuf);
}

// A stream of another GPU than the communicator's is an error naming it, not a
// kernel launched where the windows are not (needs two GPUs).
TEST(CudaBackend, AStreamOfAnotherGpuIsAnError) {
  SKIP_WITHOUT_GPU();
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << gpus;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  collie::test::Comms gpu(1);
  ASSERT_EQ(gpu.result, collieSuccess) << collieGetLastError(nullptr);
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 16 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreate(&other), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(collieAllReduce(buf, buf, 16, collieFloat32, collieSum, gpu[0], other), collieInvalidArgument);
  EXPECT_NE(std::string(collieGetLastError(gpu[0])).find("belongs to GPU 1"), std::string::npos)
      << collieGetLastError(gpu[0]);
  cudaStreamDestroy(other);
  cudaFree(buf);
}

// More blocks than the GPU can hold at once (COLLIE_CHANNELS x ranks sharing
// it): the ranks' kernels wait for each other, so init refuses, naming the
// numbers, instead of kernels that would wait until COLLIE_TIMEOUT.
TEST(CudaBackend, MoreBlocksThanTheGpuHoldsIsAnError) {
  SKIP_WITHOUT_GPU();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv channels("COLLIE_CHANNELS", "32");
  const int n = sms / 32 + 1;  // n x 32 blocks > sms
  collie::test::Comms comms(n);
  EXPECT_EQ(comms.result, collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(nullptr)).find("lower COLLIE_CHANNELS"), std::string::npos)
      << collieGetLastError(nullptr);
}

// Runs every collective on device buffers (two types, counts 0, odd and several rounds, in place and not) and
// says whether each rank took the staged path (pinned host memory, the host executor) instead of device windows.
void expectExactEverywhere(const collie::test::Comms& comms, bool staged) {
  const uint64_t seed = collie::test::testSeed();
  for (int r = 0; r < comms.size(); ++r) {
    EXPECT_EQ(comms[r]->deviceWindows == nullptr, staged) << "rank " << r;
    EXPECT_EQ(dynamic_cast<collie::CudaExecutor*>(comms[r]->executor.get()) == nullptr, staged) << "rank " << r;
  }
  int cases = 0;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce,
                    Coll::kAllToAll, Coll::kGather, Coll::kScatter}) {
    for (collieDataType_t type : {collieFloat32, collieBfloat16}) {
      const collieRedOp_t op = type == collieFloat32 ? collieSum : collieMax;
      for (size_t count : {size_t{0}, size_t{4099}, size_t{1} << 20}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !collie::test::collHasInPlace(coll)) continue;
          const int root = (cases + 1) % comms.size();
          ASSERT_EQ(collie::test::runCollectiveCase(comms, coll, type, op, count, inPlace, root, seed, Memory::kDevice),
                    "")
              << collie::test::collName(coll) << " " << collie::typeName(type) << " count " << count
              << (inPlace ? " in place" : "") << " (seed " << seed << ")";
          ++cases;
        }
      }
    }
  }
  printf("%d ranks, %s: %d cases exact\n", comms.size(), staged ? "staged through host memory" : "device windows",
         cases);
}

// COLLIE_P2P=0: device buffers go through pinned host memory (the path of GPUs that cannot reach each other by
// P2P), every collective exact; a capture into a CUDA graph is refused before anything is recorded.
TEST(CudaBackend, P2POffStagesThroughHostMemory) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv p2p("COLLIE_P2P", "0");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  expectExactEverywhere(comms, true);
  int device0 = 0;
  ASSERT_EQ(collieCommCuDevice(comms[0], &device0), collieSuccess);
  ASSERT_EQ(cudaSetDevice(device0), cudaSuccess);
  float* buf = nullptr;
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(collieAllReduce(buf, buf, 64, collieFloat32, collieSum, comms[0], s), collieInvalidUsage);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("cannot be captured"), std::string::npos)
      << collieGetLastError(comms[0]);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(buf);
}

// A COLLIE_P2P that is neither 0 nor 1 is refused at init, on every rank, with a sentence naming it.
TEST(CudaBackend, ABadCollieP2PIsRefusedAtInit) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  for (const char* bad : {"2", "-1", "yes"}) {
    ScopedEnv p2p("COLLIE_P2P", bad);
    collie::test::Comms comms(2);
    EXPECT_EQ(comms.result, collieInvalidArgument) << "COLLIE_P2P='" << bad << "'";
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find("COLLIE_P2P must be 0"), std::string::npos)
        << collieGetLastError(nullptr);
  }
}

// collieCommInitAll naming a GPU this process does not see fails before any rank starts, with a sentence naming
// the entry (not a CUDA error from the middle of init); the host backend ignores devlist.
TEST(CudaBackend, InitAllRefusesADeviceThatIsNotThere) {
  SKIP_WITHOUT_GPU();
  int gpus = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  const int devices[2] = {0, gpus};
  const std::string want =
      "devlist[1] = " + std::to_string(gpus) + " is not a device (this process sees " + std::to_string(gpus) + ")";
  {
    ScopedEnv device("COLLIE_DEVICE", "cuda");
    collie::test::Comms comms(2, devices);
    EXPECT_EQ(comms.result, collieInvalidArgument);
    EXPECT_NE(std::string(collieGetLastError(nullptr)).find(want), std::string::npos) << collieGetLastError(nullptr);
    EXPECT_EQ(comms[0], nullptr);
    EXPECT_EQ(comms[1], nullptr);
  }
  ScopedEnv device("COLLIE_DEVICE", "host");
  collie::test::Comms comms(2, devices);
  EXPECT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
}

// Ranks that all share one GPU tune with a model of its memory, which they share (algorithms/topology.h,
// sharedGpuTopology): at 128 MiB and 2 ranks the ring, which reads and writes 4 bytes per busbw byte, beats
// rhd's 6.5. A slice costs little bandwidth there, so fewer, larger steps win longer than
// where each rank has a link of its own: at 64 KiB rd, where the host model with the same slots picks ring. The
// simulator's round is the executor's: one slot of every channel.
TEST(CudaBackend, RanksSharingAGpuTuneForItsMemory) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  const int devices[2] = {0, 0};
  collie::test::Comms comms(2, devices);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const uint64_t bytes = uint64_t{128} << 20;
  for (int r = 0; r < 2; ++r) {
    collieComm_t c = comms[r];
    EXPECT_GT(c->topology.sharedMemoryBeta, 0);
    EXPECT_EQ(c->topology.intra, collie::LinkClass::kSharedGpu);
    EXPECT_EQ(c->topology.slotBytes, c->executor->roundElems(1));
    EXPECT_STREQ(c->algorithmFor(collie::Collective::kAllReduce, bytes)->name, "ring");
    EXPECT_STREQ(c->algorithmFor(collie::Collective::kAllReduce, 64 << 10)->name, "rd");
  }
  collie::Topology host = *collie::findTopology("host");
  host.nranks = host.ranksPerNode = 2;
  host.slotBytes = comms[0]->topology.slotBytes;
  host.slots = comms[0]->topology.slots;
  EXPECT_STREQ(collie::tunedAlgorithm(collie::Collective::kAllReduce, 64 << 10, 2, host)->name, "ring");
}

// Two ranks that are threads of this process on one GPU put one collective on streams CUDA runs one after the
// other (one stream, or the legacy default stream and a blocking one): the second rank's enqueue is refused,
// saying why, where both would wait until COLLIE_TIMEOUT; streams that run side by side pass.
TEST(CudaBackend, RanksSharingAGpuNeedStreamsThatRunSideBySide) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "2");  // what the refused case's first kernel waits before giving up
  const int devices[2] = {0, 0};
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  cudaStream_t blocking = nullptr, own[2] = {nullptr, nullptr};
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  for (cudaStream_t& s : own) ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  const size_t count = 1000;
  float* buf[2] = {nullptr, nullptr};
  for (float*& b : buf) ASSERT_EQ(cudaMalloc(&b, count * sizeof(float)), cudaSuccess);
  struct Case {
    const char* name;
    cudaStream_t s0, s1;
    const char* refusal;  // nullptr: the call runs
  };
  const Case cases[] = {
      {"one stream for both", blocking, blocking, "went to blocking stream"},
      {"the legacy default stream for both", nullptr, nullptr, "went to the legacy default stream, which CUDA runs"},
      {"legacy and blocking", nullptr, blocking, "the legacy default stream (rank 0) and blocking stream"},
      {"legacy and non-blocking", nullptr, own[1], nullptr},
      {"a stream each", own[0], own[1], nullptr},
  };
  const std::vector<float> ones(count, 1.0f);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    for (float* b : buf) ASSERT_EQ(cudaMemcpy(b, ones.data(), count * sizeof(float), cudaMemcpyDefault), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    collie::test::Comms comms(2, devices);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    ASSERT_EQ(collieGroupStart(), collieSuccess);
    EXPECT_EQ(collieAllReduce(buf[0], buf[0], count, collieFloat32, collieSum, comms[0], c.s0), collieSuccess);
    EXPECT_EQ(collieAllReduce(buf[1], buf[1], count, collieFloat32, collieSum, comms[1], c.s1), collieSuccess);
    const collieResult_t end = collieGroupEnd();
    const std::string said = collieGetLastError(nullptr);
    if (c.refusal != nullptr) {
      EXPECT_EQ(end, collieInvalidUsage);
      EXPECT_NE(said.find("ranks 0 and 1 are threads of this process on GPU 0"), std::string::npos) << said;
      EXPECT_NE(said.find(c.refusal), std::string::npos) << said;
    } else {
      EXPECT_EQ(end, collieSuccess) << said;
    }
    // The refused case's first kernel gives up after COLLIE_TIMEOUT; then the communicators go.
    for (cudaStream_t s : {c.s0, c.s1}) (void)cudaStreamSynchronize(s);
    if (c.refusal == nullptr)
      for (float* b : buf) {
        std::vector<float> got(count);
        ASSERT_EQ(cudaMemcpy(got.data(), b, count * sizeof(float), cudaMemcpyDefault), cudaSuccess);
        EXPECT_EQ(got, std::vector<float>(count, 2.0f));
      }
    (void)cudaGetLastError();
  }
  for (float* b : buf) cudaFree(b);
  for (cudaStream_t s : {blocking, own[0], own[1]}) cudaStreamDestroy(s);
}

// Ranks on two GPUs (alternating): device windows when the GPUs reach each other by P2P, else the staged path,
// chosen by init with no setting (the fake runtime plays both: COLLIE_TEST_FAKE_CUDA_P2P). Needs two GPUs.
TEST(CudaBackend, RanksOnTwoGpusStageOnlyWithoutP2P) {
  SKIP_WITHOUT_GPU();
  int gpus = 0, can = 0;
  ASSERT_EQ(cudaGetDeviceCount(&gpus), cudaSuccess);
  if (gpus < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << gpus;
  ASSERT_EQ(cudaDeviceCanAccessPeer(&can, 0, 1), cudaSuccess);
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv p2p("COLLIE_P2P", nullptr);
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int devices[4] = {0, 1, 0, 1};
  collie::test::Comms comms(4, devices);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  printf("GPUs 0 and 1 %s by P2P\n", can ? "reach each other" : "cannot reach each other");
  expectExactEverywhere(comms, can == 0);
}

// Rank 1 never calls: rank 0's kernel gives up after COLLIE_TIMEOUT and the
// error, naming the peer, comes back through collieCommGetAsyncError.
TEST(CudaBackend, MissingPeerTimesOutWithAsyncError) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "2");
  collie::test::Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  float* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1024 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(collieAllReduce(buf, buf, 1024, collieFloat32, collieSum, comms[0], nullptr), collieSuccess);
  collieResult_t async = collieSuccess;
  for (int i = 0; i < 200 && async == collieSuccess; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(collieCommGetAsyncError(comms[0], &async), collieSuccess);
  }
  EXPECT_EQ(async, collieTimeout);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("waiting on rank 1"), std::string::npos)
      << collieGetLastError(comms[0]);
  // Rank 1 never launched anything: the report says its kernel never began.
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("rank 1 had started no kernel yet"), std::string::npos)
      << collieGetLastError(comms[0]);
  cudaDeviceSynchronize();
  cudaFree(buf);
}

// Rank 0 gives up (rank 1 has not called yet) after handing its block to rank 1 in place, and its caller frees
// that buffer. Rank 1, calling late, must not read it: a fault on the fake runtime, which unmaps freed memory;
// stale data on a GPU, which the poisoned output shows. Its call fails at once, naming rank 0 as the rank that
// gave up first (executor/protocol.h, "Giving up").
TEST(CudaBackend, ALatePeerNeverReadsTheFreedBufferOfARankThatGaveUp) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "2");
  ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", "0");
  ScopedEnv protocol("COLLIE_PROTO", "simple");
  ScopedEnv ring("COLLIE_ALGO", "allgather:ring");
  collie::test::Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t count = 4096;
  float* in[2] = {nullptr, nullptr};
  float* out[2] = {nullptr, nullptr};
  cudaStream_t stream[2] = {nullptr, nullptr};  // a stream each: one stream for both would be refused
  std::vector<float> host(2 * count, -1.0f);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&in[r], count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out[r], 2 * count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(out[r], host.data(), 2 * count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<float> mine(count, static_cast<float>(r + 7));
    ASSERT_EQ(cudaMemcpy(in[r], mine.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // A copy from pageable memory may land after cudaMemcpy returns; the kernels run on other streams.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(collieAllGather(in[0], out[0], count, collieFloat32, comms[0], stream[0]), collieSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream[0]), cudaSuccess);
  collieResult_t async = collieSuccess;
  ASSERT_EQ(collieCommGetAsyncError(comms[0], &async), collieSuccess);
  EXPECT_EQ(async, collieTimeout) << collieGetLastError(comms[0]);
  ASSERT_EQ(cudaFree(in[0]), cudaSuccess);
  ASSERT_EQ(collieAllGather(in[1], out[1], count, collieFloat32, comms[1], stream[1]), collieSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream[1]), cudaSuccess);
  ASSERT_EQ(collieCommGetAsyncError(comms[1], &async), collieSuccess);
  EXPECT_EQ(async, collieRemoteError) << collieGetLastError(comms[1]);
  EXPECT_NE(std::string(collieGetLastError(comms[1])).find("rank 0 had given up this call first"), std::string::npos)
      << collieGetLastError(comms[1]);
  ASSERT_EQ(cudaMemcpy(host.data(), out[1], 2 * count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(host[i], -1.0f) << "rank 1 read rank 0's freed block, element " << i;
  cudaFree(in[1]);
  cudaFree(out[0]);
  cudaFree(out[1]);
  for (cudaStream_t st : stream) cudaStreamDestroy(st);
}

// Rank 2 calls an allreduce of `lone` floats, its two peers one of `count` (ring, COLLIE_PROTO=`proto`): every
// rank's call fails with collieInvalidUsage long before COLLIE_TIMEOUT, one naming the difference and the others
// the rank that refused, and none returns a result computed from the wrong slices.
void expectEveryRankRefuses(const char* proto, size_t lone, size_t count) {
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  ScopedEnv protocol("COLLIE_PROTO", proto);
  ScopedEnv ring("COLLIE_ALGO", "allreduce:ring");
  constexpr int kRanks = 3;
  const std::string what =
      std::string(proto) + ", rank 2 " + std::to_string(lone) + " floats, the others " + std::to_string(count);
  collie::test::Comms comms(kRanks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t most = std::max(lone, count);
  float* buf[kRanks] = {};
  cudaStream_t stream[kRanks] = {};
  const std::vector<float> ones(most, 1.0f);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&buf[r], most * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(buf[r], ones.data(), most * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // A copy from pageable memory may land after cudaMemcpy returns; the kernels run on other streams.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(collieAllReduce(buf[r], buf[r], r == 2 ? lone : count, collieFloat32, collieSum, comms[r], stream[r]),
              collieSuccess)
        << what << ": " << collieGetLastError(comms[r]);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(cudaStreamSynchronize(stream[r]), cudaSuccess);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 30.0) << what << ": a kernel waited for its timeout";
  int named = 0;
  for (int r = 0; r < kRanks; ++r) {
    collieResult_t async = collieSuccess;
    ASSERT_EQ(collieCommGetAsyncError(comms[r], &async), collieSuccess);
    const std::string text = collieGetLastError(comms[r]);
    EXPECT_EQ(async, collieInvalidUsage) << what << ", rank " << r << ": " << text;
    const bool differs = text.find("data of another call") != std::string::npos;
    EXPECT_TRUE(differs || text.find("stopped on finding a rank whose call differs") != std::string::npos)
        << what << ", rank " << r << ": " << text;
    named += differs ? 1 : 0;
  }
  EXPECT_GE(named, 1) << what << ": no rank named the difference";
  for (int r = 0; r < kRanks; ++r) {
    cudaFree(buf[r]);
    cudaStreamDestroy(stream[r]);
  }
}

// Rank 2's allreduce has one more element than its peers' (100000 floats, Simple slices, the ring's read in
// place). The kernels compare the first slice they take from each peer with their own call (executor/protocol.h,
// signature[][][]).
TEST(CudaBackend, ACallThatDiffersFailsEveryRank) {
  SKIP_WITHOUT_GPU();
  expectEveryRankRefuses("simple", 100001, 100000);
}

// Calls on either side of the LL line (COLLIE_PROTO=auto: 1000 floats run LL, 100000 Simple), each way round:
// each receiver learns from its peer's ready counter that the slice it waits for was posted with the other
// protocol (executor/protocol.h, kFlagLL), and fails at once instead of waiting out COLLIE_TIMEOUT.
TEST(CudaBackend, CallsOnEitherSideOfTheLLLineFailEveryRank) {
  SKIP_WITHOUT_GPU();
  expectEveryRankRefuses("auto", 1000, 100000);
  expectEveryRankRefuses("auto", 100000, 1000);
}

// Every rank of `comms` but `missing` queues an allreduce on a stream of its own; each kernel then waits for the
// missing rank. Buffers and streams are freed with the object. All are allocated before the first call: a
// cudaMalloc may wait for the kernels running on the device, here the first rank's, which waits for 60 s.
struct KernelsWaitingForOneRank {
  void start(const collie::test::Comms& comms, int missing) {
    bufs.assign(static_cast<size_t>(comms.size()), nullptr);
    streams.assign(static_cast<size_t>(comms.size()), nullptr);
    for (int r = 0; r < comms.size(); ++r) {
      if (r == missing) continue;
      ASSERT_EQ(cudaMalloc(&bufs[r], 1024 * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    }
    for (int r = 0; r < comms.size(); ++r) {
      if (r == missing) continue;
      ASSERT_EQ(collieAllReduce(bufs[r], bufs[r], 1024, collieFloat32, collieSum, comms[r], streams[r]), collieSuccess)
          << collieGetLastError(comms[r]);
    }
  }
  ~KernelsWaitingForOneRank() {
    for (size_t r = 0; r < bufs.size(); ++r) {
      if (streams[r] != nullptr) cudaStreamDestroy(streams[r]);
      if (bufs[r] != nullptr) cudaFree(bufs[r]);
    }
  }
  std::vector<float*> bufs;
  std::vector<cudaStream_t> streams;
};

// Kernels left waiting for a rank that never calls are stopped by collieCommRevoke, which returns once they have:
// the streams are then idle, the revoked communicators report success, and take no more collectives.
TEST(CudaBackend, RevokeStopsKernelsWaitingForTheMissingRank) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const int gone = 1;
  KernelsWaitingForOneRank waiting;
  ASSERT_NO_FATAL_FAILURE(waiting.start(comms, gone));
  const auto t0 = std::chrono::steady_clock::now();
  for (int r : {0, 2})
    EXPECT_EQ(collieCommRevoke(comms[r], COLLIE_REVOKE_DEFAULT), collieSuccess) << collieGetLastError(comms[r]);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 30.0) << "revoke waited for the kernels' timeout";
  for (int r : {0, 2}) {
    EXPECT_EQ(cudaStreamQuery(waiting.streams[r]), cudaSuccess)
        << "rank " << r << ": a kernel still runs after the revoke";
    collieResult_t async = collieInternalError;
    EXPECT_EQ(collieCommGetAsyncError(comms[r], &async), collieSuccess);
    EXPECT_EQ(async, collieSuccess);
    EXPECT_EQ(
        collieAllReduce(waiting.bufs[r], waiting.bufs[r], 1024, collieFloat32, collieSum, comms[r], waiting.streams[r]),
        collieInvalidUsage);
  }
}

// Kernels left waiting for a rank that never calls are stopped by a shrink with COLLIE_SHRINK_ABORT, long before
// COLLIE_TIMEOUT; the ranks that stay go on, on the same GPU and streams, with exact results.
TEST(CudaBackend, ShrinkWithAbortStopsKernelsWaitingForTheMissingRank) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "60");
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const int gone = 1;
  KernelsWaitingForOneRank waiting;
  ASSERT_NO_FATAL_FAILURE(waiting.start(comms, gone));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<collieComm_t> children(3, nullptr);
  collie::test::onRanks(3, [&](int r) {
    if (r == gone) return;
    EXPECT_EQ(collieCommShrink(comms[r], &gone, 1, &children[r], nullptr, COLLIE_SHRINK_ABORT), collieSuccess)
        << collieGetLastError(comms[r]);
  });
  for (int r : {0, 2}) EXPECT_EQ(cudaStreamSynchronize(waiting.streams[r]), cudaSuccess);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(took, 30.0) << "the parent's kernels waited for rank " << gone << " instead of stopping";
  collieResult_t async = collieSuccess;
  EXPECT_EQ(collieCommGetAsyncError(comms[0], &async), collieSuccess);
  EXPECT_NE(async, collieSuccess) << "the stopped kernel reported nothing";
  ASSERT_NE(children[0], nullptr);
  ASSERT_NE(children[2], nullptr);
  const collie::test::Comms kids(std::vector<collieComm_t>{children[0], children[2]});
  const uint64_t seed = collie::test::testSeed();
  for (bool inPlace : {false, true})
    EXPECT_EQ(collie::test::runCollectiveCase(kids, Coll::kAllReduce, collieFloat32, collieSum, 4099, inPlace, 0, seed,
                                              Memory::kDevice),
              "")
        << (inPlace ? "in place" : "out of place") << " (seed " << seed << ")";
}

}  // namespace

// On the fake runtime: the calls of this thread that waited for other streams' work (see fake_cuda.h).
extern "C" unsigned long long fakecudaDeviceWaitsOfThisThread(void) __attribute__((weak));

namespace {

// Two ranks that are threads on one GPU, with a communicator of both (`world`), a stream and a buffer each, all
// made before any call (a cudaMalloc may wait for the kernels running on the device). COLLIE_TIMEOUT is 8 s.
struct TwoRanksCalling {
  TwoRanksCalling() {
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(cudaMalloc(&bufs[r], kCount * sizeof(float)), cudaSuccess);
      EXPECT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    }
  }
  ~TwoRanksCalling() {
    for (int r = 0; r < 2; ++r) {
      if (streams[r] != nullptr) cudaStreamDestroy(streams[r]);
      if (bufs[r] != nullptr) cudaFree(bufs[r]);
    }
  }
  // Checks that `world` was made, and makes every element of every buffer `v`.
  void start(float v) {
    ASSERT_EQ(world.result, collieSuccess) << collieGetLastError(nullptr);
    const std::vector<float> host(kCount, v);
    for (float* b : bufs) ASSERT_EQ(cudaMemcpy(b, host.data(), kCount * sizeof(float), cudaMemcpyDefault), cudaSuccess);
    // From pageable memory the copies may still be on their way; the calls come on non-blocking streams.
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    value = v;
  }
  // Each rank makes an allreduce on `world`, then `between` (rank 0 after a pause, so that rank 1's next kernel
  // is already waiting for rank 0), then two more allreduces, and waits for its stream. Rank 1's third call
  // waits in its stream behind the second, which waits for rank 0: where streams share a hardware queue, work
  // of any stream queued behind it waits too. All calls must succeed long before COLLIE_TIMEOUT; on the fake
  // runtime, `between` must make no call that waits for other streams.
  void run(const char* what, const std::function<void(int)>& between) {
    const auto t0 = std::chrono::steady_clock::now();
    collie::test::onRanks(2, [&](int r) {
      EXPECT_EQ(collieAllReduce(bufs[r], bufs[r], kCount, collieFloat32, collieSum, world[r], streams[r]),
                collieSuccess);
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const unsigned long long before = fakecudaDeviceWaitsOfThisThread ? fakecudaDeviceWaitsOfThisThread() : 0;
      between(r);
      if (fakecudaDeviceWaitsOfThisThread) {
        EXPECT_EQ(fakecudaDeviceWaitsOfThisThread() - before, 0u)
            << "rank " << r << ": " << what << " made calls that wait for the whole device";
      }
      for (int call = 0; call < 2; ++call)
        EXPECT_EQ(collieAllReduce(bufs[r], bufs[r], kCount, collieFloat32, collieSum, world[r], streams[r]),
                  collieSuccess);
      EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    });
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 4.0) << what << ": a kernel waited for a rank that waited for it";
    for (int r = 0; r < 2; ++r) {
      collieResult_t async = collieInternalError;
      EXPECT_EQ(collieCommGetAsyncError(world[r], &async), collieSuccess);
      EXPECT_EQ(async, collieSuccess) << collieGetLastError(world[r]);
      std::vector<float> got(kCount);
      ASSERT_EQ(cudaMemcpy(got.data(), bufs[r], kCount * sizeof(float), cudaMemcpyDefault), cudaSuccess);
      EXPECT_EQ(got, std::vector<float>(kCount, value * 8)) << what << ", rank " << r;
    }
    value *= 8;
  }
  static constexpr size_t kCount = 1024;
  ScopedEnv device{"COLLIE_DEVICE", "cuda"};
  ScopedEnv timeout{"COLLIE_TIMEOUT", "8"};
  collie::test::Comms world{2};
  float* bufs[2] = {nullptr, nullptr};
  cudaStream_t streams[2] = {nullptr, nullptr};
  float value = 0;  // every element of every buffer, as run() left it
};

// A rank destroys a communicator, then calls on another, while its peer (a thread on the same GPU) has already
// destroyed its own and launched that next call, whose kernel waits for this rank. Destroy must not wait for the
// device (base/device_memory.h): before, its cudaFree waited for that kernel until COLLIE_TIMEOUT.
TEST(CudaBackend, DestroyBesideAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  TwoRanksCalling ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.start(1.0f));
  collieComm_t sub[2] = {nullptr, nullptr};
  collie::test::onRanks(2, [&](int r) {
    EXPECT_EQ(collieCommSplit(ranks.world[r], 0, r, &sub[r], nullptr), collieSuccess) << collieGetLastError(nullptr);
  });
  ranks.run("destroy", [&](int r) { EXPECT_EQ(collieCommDestroy(sub[r]), collieSuccess); });
}

// The same for a communicator being made: once its last barrier is past, a peer may already have launched a
// kernel of another communicator that waits for this rank, and what init does after it must not wait for that.
TEST(CudaBackend, SplitBesideAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  TwoRanksCalling ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.start(1.0f));
  collieComm_t sub[2] = {nullptr, nullptr};
  ranks.run("split", [&](int r) {
    EXPECT_EQ(collieCommSplit(ranks.world[r], 0, r, &sub[r], nullptr), collieSuccess) << collieGetLastError(nullptr);
  });
  for (collieComm_t c : sub) collieCommDestroy(c);
}

// The same for a communicator whose calls go through pinned host memory: the staged path (COLLIE_P2P=0 here; also
// GPUs without P2P, and hosts apart), and the proxy thread to another host (2 fake nodes, COLLIE_GPU_REMOTE=proxy,
// UCX shared memory between them). Each makes a call first, so that its pinned memory is all there; its destroy
// must not give that back with cudaFreeHost, which waits for the device as cudaFree does.
void destroyBesideAWaitingKernel(const char* what, bool proxied, std::vector<std::pair<const char*, const char*>> env) {
  TwoRanksCalling ranks;
  ASSERT_NO_FATAL_FAILURE(ranks.start(1.0f));
  std::vector<std::unique_ptr<ScopedEnv>> scoped;
  for (const auto& e : env) scoped.push_back(std::make_unique<ScopedEnv>(e.first, e.second));
  collie::test::Comms other(2);
  ASSERT_EQ(other.result, collieSuccess) << what << ": " << collieGetLastError(nullptr);
  scoped.clear();
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(other[r]->proxy != nullptr, proxied) << what << ", rank " << r;
    ASSERT_EQ(dynamic_cast<collie::StagedExecutor*>(other[r]->executor.get()) != nullptr, !proxied)
        << what << ", rank " << r;
  }
  float* scratch[2] = {nullptr, nullptr};
  for (float*& b : scratch) ASSERT_EQ(cudaMalloc(&b, 4096 * sizeof(float)), cudaSuccess);
  collie::test::onRanks(2, [&](int r) {
    EXPECT_EQ(collieAllReduce(scratch[r], scratch[r], 4096, collieFloat32, collieSum, other[r], ranks.streams[r]),
              collieSuccess)
        << collieGetLastError(other[r]);
    EXPECT_EQ(cudaStreamSynchronize(ranks.streams[r]), cudaSuccess);
  });
  ranks.run(what, [&](int r) {
    EXPECT_EQ(collieCommDestroy(other[r]), collieSuccess);
    other.comms[static_cast<size_t>(r)] = nullptr;
  });
  for (float* b : scratch) cudaFree(b);
}

TEST(CudaBackend, DestroyOfAStagedCommunicatorBesideAWaitingKernel) {
  SKIP_WITHOUT_GPU();
  destroyBesideAWaitingKernel("destroy, staged", false, {{"COLLIE_P2P", "0"}});
}

TEST(CudaBackend, DestroyOfAProxiedCommunicatorBesideAWaitingKernel) {
  SKIP_WITHOUT_GPU();
#if !defined(COLLIE_TEST_UCX)
  GTEST_SKIP() << "Collie was built without UCX (COLLIE_WITH_UCX), which the proxy forwards to";
#endif
  destroyBesideAWaitingKernel("destroy, proxied", true,
                              {{"COLLIE_FAKE_NODES", "2"}, {"COLLIE_GPU_REMOTE", "proxy"}, {"UCX_TLS", "sm,self"}});
}

// A rank destroys its communicator while its peer's kernel still waits for it (the rank never made the call):
// the destroy returns at once, and the peer's kernel goes on writing slices into the rank's window and, when it
// gives up, reads there which call the rank had started. The window stays until the peer's destroy (before, a
// cudaFree in the rank's destroy waited for the whole device, the peer's kernel included, until its timeout).
TEST(CudaBackend, ADestroyedRanksWindowOutlivesThePeerKernelWaitingForIt) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "3");
  collie::test::Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const size_t count = 1 << 16;
  float* buf = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(collieAllReduce(buf, buf, count, collieFloat32, collieSum, comms[0], stream), collieSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(collieCommDestroy(comms[1]), collieSuccess);
  comms.comms[1] = nullptr;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5)
      << "the destroy waited for the peer's kernel";
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  collieResult_t async = collieSuccess;
  EXPECT_EQ(collieCommGetAsyncError(comms[0], &async), collieSuccess);
  EXPECT_EQ(async, collieTimeout);
  EXPECT_NE(std::string(collieGetLastError(comms[0])).find("waiting on rank 1"), std::string::npos)
      << collieGetLastError(comms[0]);
  cudaStreamDestroy(stream);
  cudaFree(buf);
}

}  // namespace
