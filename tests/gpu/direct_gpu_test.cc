// Direct algorithms on the CUDA backend (executor/cuda_executor.h, "Direct algorithms"), ranks as threads sharing
// the GPU: allreduce direct_oneshot and direct_twoshot, and reducescatter, allgather, alltoall and broadcast direct
// run as the direct kernels, exact for every type and operator, in place and out of place, across many calls;
// what the backend cannot run yet is refused with a sentence that says so. Every test skips, saying why, when no
// GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/registry.h"
#include "collie.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"
#include "kernels/direct_kernels.h"

namespace {

using collie::test::Coll;
using collie::test::Memory;
using collie::test::ScopedEnv;
using collie::test::timeoutSeconds;

// The most elements of `type` one one-shot call holds: its slots' lines of 8 data bytes.
size_t oneShotMost(collieDataType_t type) {
  return static_cast<size_t>(uint64_t{collie::kDirectSlotLines} * collie::kDirectLinePayload / collie::typeSize(type));
}

// Every direct algorithm with a kernel on the CUDA backend (COLLIE_ALGO names them; the tuner never picks them) on
// 3 ranks (8 with an odd count): every sweep type, operators rotated over the counts (avg included), counts 0, odd,
// and large (for the one-shot the most its slots hold), in place and out of place. (Every rank count, type and
// operator, with odd offsets, runs on the kernels' bodies in direct_kernels_test; what runs here is the executor's
// part.) Consecutive calls alternate the one-shot's scratch parity, change the buffers the barrier kernels learn at
// their entry, and carry new call numbers.
TEST(CudaBackend, DirectAlgorithmsRun) {
  SKIP_WITHOUT_GPU();
  struct Algo {
    Coll coll;
    collie::Collective c;
    const char* name;
  };
  const Algo algos[] = {{Coll::kAllReduce, collie::Collective::kAllReduce, "direct_oneshot"},
                        {Coll::kAllReduce, collie::Collective::kAllReduce, "direct_twoshot"},
                        {Coll::kReduceScatter, collie::Collective::kReduceScatter, "direct"},
                        {Coll::kAllGather, collie::Collective::kAllGather, "direct"},
                        {Coll::kAllToAll, collie::Collective::kAllToAll, "direct"},
                        {Coll::kBroadcast, collie::Collective::kBroadcast, "direct"}};
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  for (const Algo& a : algos) {
    const std::string spec = std::string(collie::collectiveName(a.c)) + ":" + a.name;
    ScopedEnv algo("COLLIE_ALGO", spec.c_str());
    const bool oneShot = std::string(a.name) == "direct_oneshot";
    for (int n : {3, 8}) {
      collie::test::Comms comms(n);
      ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
      ASSERT_EQ(std::string(comms[0]->algorithmFor(a.c, 64)->name), a.name);
      size_t key = 0, cases = 0;
      for (collieDataType_t type : collie::test::sweepTypes())
        for (size_t count : {size_t{0}, size_t{1001}, oneShot ? oneShotMost(type) : size_t{20011}}) {
          if (n == 8 && count != 1001) continue;  // the most peers, at the cost of 8 ranks on the fake's threads
          for (bool inPlace : {false, true})
            for (collieRedOp_t op : collie::test::allOps()) {
              if (inPlace && !collie::test::collHasInPlace(a.coll)) continue;
              if (!collie::test::collHasOp(a.coll) && op != collieSum) continue;
              if (collie::test::collHasOp(a.coll) && !collie::test::sweepTakesOp(type, op, ++key)) continue;
              ++cases;
              const int root = static_cast<int>(++key % static_cast<size_t>(n));  // broadcast's; any rank
              const std::string err =
                  collie::test::runCollectiveCase(comms, a.coll, type, op, count, inPlace, root, seed, Memory::kDevice);
              ASSERT_EQ(err, "") << spec << " on " << n << " ranks, " << collie::typeName(type) << " "
                                 << collie::opName(op) << " count " << count << (inPlace ? " in place" : "")
                                 << ", root " << root << " (seed " << seed << ")";
            }
        }
      EXPECT_GT(cases, size_t{0});
    }
  }
}

// One rank's buffers on the GPU and a stream, for the refusals below.
struct RankDevice {
  explicit RankDevice(size_t bytes) {
    cudaMalloc(&buf, bytes);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  ~RankDevice() {
    cudaStreamDestroy(stream);
    cudaFree(buf);
  }
  void* buf = nullptr;
  cudaStream_t stream = nullptr;
};

// Every rank's call of `coll` (allreduce, or all-to-all) on `count` floats, captured into a graph when `capture`;
// each rank's result and collieGetLastError.
std::vector<std::pair<collieResult_t, std::string>> callOnRanks(const collie::test::Comms& comms, Coll coll,
                                                                size_t count, bool capture) {
  const int n = comms.size();
  std::vector<std::pair<collieResult_t, std::string>> out(static_cast<size_t>(n));
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    const size_t bytes = count * sizeof(float) * static_cast<size_t>(n) + 16;
    RankDevice in(bytes), outBuf(bytes);
    if (capture) cudaStreamBeginCapture(in.stream, cudaStreamCaptureModeThreadLocal);
    const collieResult_t rc =
        coll == Coll::kAllToAll ? collieAllToAll(in.buf, outBuf.buf, count, collieFloat32, comms[r], in.stream)
                                : collieAllReduce(in.buf, in.buf, count, collieFloat32, collieSum, comms[r], in.stream);
    out[static_cast<size_t>(r)] = {rc, collieGetLastError(comms[r])};
    if (capture) {
      cudaGraph_t graph = nullptr;
      if (cudaStreamEndCapture(in.stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
    }
    cudaStreamSynchronize(in.stream);
  });
  return out;
}

// What the CUDA backend cannot run as a direct kernel yet is refused on every rank, before anything is queued, with
// a sentence naming the algorithm and what to do: a one-shot call larger than its slots, and a captured call (a
// replay would reuse its call number).
TEST(CudaBackend, DirectCallsItCannotRunAreRefused) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  struct Case {
    const char* algo;
    Coll coll;
    size_t count;
    bool capture;
    const char* says;
  };
  const Case cases[] = {
      {"allreduce:direct_oneshot", Coll::kAllReduce, oneShotMost(collieFloat32) + 1, false,
       "takes at most 65536 bytes per rank"},
      {"allreduce:direct_twoshot", Coll::kAllReduce, 64, true, "cannot be captured into a CUDA graph yet"},
      {"alltoall:direct", Coll::kAllToAll, 64, true, "cannot be captured into a CUDA graph yet"},
  };
  for (const Case& c : cases) {
    ScopedEnv algo("COLLIE_ALGO", c.algo);
    collie::test::Comms comms(3);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    for (const auto& rank : callOnRanks(comms, c.coll, c.count, c.capture)) {
      EXPECT_EQ(rank.first, collieInvalidUsage) << c.algo << ": " << rank.second;
      EXPECT_NE(rank.second.find(c.says), std::string::npos) << c.algo << ": " << rank.second;
    }
  }
}

}  // namespace
