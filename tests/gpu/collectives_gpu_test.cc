// The CUDA backend with ranks as threads sharing the GPUs there are (on a
// one-GPU machine all ranks share device 0): every collective x every
// registered algorithm for N = 1, 2, 3, 4, 8, several types and operators,
// counts 0, odd and multi-round, in place and out of place (small counts go
// through the LL protocol, large ones through Simple); the buffers are
// device memory, checked by the same code as the host tests (Memory::kDevice).
// Also: uneven channel splits with tiny slots, calls in many rounds, sends
// read in place, all-to-all-v and grouped send/recv, CUDA graph capture, one
// rank's copies, and LL flags coming round. Programs too long for the launch
// parameters: see program_cache_gpu_test.cc. Wrong buffers, streams and
// devices, the staged path and a rank that never joins:
// cuda_backend_setup_test.cc (the same binary).
// Pre-multiplied sums: premulsum_gpu_test.cc; program files: program_files_gpu_test.cc. Every test skips,
// saying why, when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "collie.h"
#include "common/coll_map.h"
#include "common/collective_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "core/comm.h"
#include "executor/cuda_executor.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"
#include "transport/cuda_ipc/device_windows.h"

namespace {

using collie::test::Coll;
using collie::test::Memory;
using collie::test::ScopedEnv;
using collie::test::timeoutSeconds;

struct Param {
  const collie::AlgorithmInfo* algo;
  int nranks;
};

class CudaAlgorithmsTest : public ::testing::TestWithParam<Param> {};

TEST_P(CudaAlgorithmsTest, ExactOnDeviceBuffers) {
  SKIP_WITHOUT_GPU();
  const Param p = GetParam();
  Coll coll;
  ASSERT_TRUE(collie::test::toColl(p.algo->collective, &coll));
  const uint64_t seed = collie::test::testSeed();
  const std::string spec = std::string(collie::collectiveName(p.algo->collective)) + ":" + p.algo->name;
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  collie::test::ExpectNoHostWaits noHostWaits;  // checked on the fake runtime
  collie::test::Comms comms(p.nranks);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  int cases = 0, index = 0;
  for (collieDataType_t type : collie::test::sweepTypes(p.nranks, false)) {
    for (collieRedOp_t op : collie::test::allOps()) {
      if (!collie::test::collHasOp(coll) && op != collieSum) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{4099}, size_t{1} << 20}) {
        for (bool inPlace : {false, true}) {
          ++index;
          if (inPlace && !collie::test::collHasInPlace(coll)) continue;
          // Operators rotated over the counts and placements but for float32 and int32, as in the host sweeps
          // (test_util.h), not chosen by the type alone, which would leave a collective without an operator
          // (whose only "operator" is sum) with no case at all for most types.
          if (collie::test::collHasOp(coll) && !collie::test::sweepTakesOp(type, op, count + (inPlace ? 1 : 0)))
            continue;
          const int root = (index * 7 + p.nranks) % p.nranks;
          const std::string err =
              collie::test::runCollectiveCase(comms, coll, type, op, count, inPlace, root, seed, Memory::kDevice);
          ASSERT_EQ(err, "") << spec << " nranks " << p.nranks << " " << collie::typeName(type) << " "
                             << collie::opName(op) << " count " << count << " root " << root
                             << (inPlace ? " in-place" : " out-of-place") << " (seed " << seed << ")";
          ++cases;
        }
      }
    }
  }
  printf("%s nranks %d on the GPU: %d cases exact (%s)\n", spec.c_str(), p.nranks, cases,
         collie::test::sweepTypesLabel(p.nranks, false).c_str());
}

std::vector<Param> params() {
  std::vector<Param> v;
  for (const collie::AlgorithmInfo& a : collie::algorithms()) {
    Coll unused;
    if (!collie::test::toColl(a.collective, &unused) || a.mapsPeers) continue;  // direct steps: not interpreted
    for (int n : {1, 2, 3, 4, 8}) v.push_back({&a, n});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaAlgorithmsTest, ::testing::ValuesIn(params()), [](const auto& info) {
  return std::string(collie::collectiveName(info.param.algo->collective)) + "_" + info.param.algo->name + "_n" +
         std::to_string(info.param.nranks);
});

// 4 KiB slots, 2 per connection and 3 channels: many rounds, full FIFOs, and
// channel parts that do not divide the counts evenly; with each protocol
// forced (LL with 1 KiB slots: several LL slices per step).
TEST(CudaBackend, TinySlotsAndUnevenChannels) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", "4096");
  ScopedEnv llSlotBytes("COLLIE_LL_SLOT_BYTES", "1024");
  ScopedEnv slots("COLLIE_SLOTS", "2");
  ScopedEnv channels("COLLIE_CHANNELS", "3");
  const uint64_t seed = collie::test::testSeed();
  for (const char* proto : {"simple", "ll"})
    for (int n : {3, 5}) {
      ScopedEnv protocol("COLLIE_PROTO", proto);
      collie::test::Comms comms(n);
      ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
      for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kAllToAll})
        for (size_t count : {size_t{7}, size_t{1000}, size_t{100003}})
          for (collieDataType_t type : {collieFloat16, collieFloat32, collieInt8}) {
            const std::string err = collie::test::runCollectiveCase(comms, coll, type, collieSum, count, false, 1 % n,
                                                                    seed, Memory::kDevice);
            ASSERT_EQ(err, "") << proto << " " << collie::test::collName(coll) << " n " << n << " count " << count
                               << " " << collie::typeName(type) << " (seed " << seed << ")";
          }
    }
}

// A call too large for one round of the slot FIFOs (here 2 channels of 4 KiB
// slots: 17 rounds of allreduce, 49 of reduce-scatter) is one kernel launch per rank: its
// rounds follow each other inside the kernel. Several launches queued per rank
// on a GPU the ranks share could keep a peer's kernel from starting (under the
// fake runtime's model of one shared hardware queue, COLLIE_TEST_FAKE_CUDA_QUEUES=1,
// ring allreduce at 3 ranks with one launch per round deadlocks at its first such call).
TEST(CudaBackend, ACallInManyRoundsIsOneLaunchPerRank) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", "4096");
  ScopedEnv channels("COLLIE_CHANNELS", "2");
  ScopedEnv protocol("COLLIE_PROTO", "simple");  // LL calls are one round anyway
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring,reducescatter:ring");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  const int n = 3;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter})
    // Many rounds, the last one short; 6144: exactly one round of allreduce, three of reduce-scatter.
    for (size_t count : {size_t{100003}, size_t{6144}}) {
      std::vector<uint64_t> before(n);
      for (int r = 0; r < n; ++r) {
        const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
        ASSERT_NE(exec, nullptr);
        before[r] = exec->launches();
      }
      const std::string err = collie::test::runCollectiveCase(comms, coll, collieFloat32, collieSum, count, false, 0,
                                                              seed, Memory::kDevice);
      ASSERT_EQ(err, "") << collie::test::collName(coll) << " count " << count << " (seed " << seed << ")";
      for (int r = 0; r < n; ++r) {
        const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
        EXPECT_EQ(exec->launches() - before[r], 1u)
            << collie::test::collName(coll) << " count " << count << ": launches of rank " << r;
      }
    }
}

// Whether any byte of rank r's Simple slots (every channel, peer and slot) is not zero. Windows start zeroed.
bool slotsWritten(const collie::test::Comms& comms, int r) {
  const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
  EXPECT_NE(exec, nullptr);
  if (exec == nullptr) return false;
  const collie::WindowLayout& l = exec->layout();
  std::vector<uint8_t> slots(l.llBase() - l.slotsBase());
  EXPECT_EQ(cudaMemcpy(slots.data(), comms[r]->deviceWindows->window(r) + l.slotsBase(), slots.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (uint8_t b : slots)
    if (b != 0) return true;
  return false;
}

// Ranks that are threads of one process on one GPU read each other's large sends where they lie, in the
// sender's buffer (executor/direct_sends.h): an allgather out of place then writes nothing into any slot,
// while with reading in place off (COLLIE_DIRECT_READ_BYTES=-1) the same call fills them. Then, with every
// send that may be read in place so read (0), the collectives whose programs mix both kinds of send stay exact
// in place and out, in one round and in many (small slots), with avg (whose dividing forwards go through slots).
TEST(CudaBackend, LargeSendsAreReadInPlace) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv channels("COLLIE_CHANNELS", "2");
  ScopedEnv protocol("COLLIE_PROTO", "simple");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  const int n = 3;
  for (const char* minBytes : {"0", "-1"}) {
    ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", minBytes);
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    ASSERT_EQ(collie::test::runCollectiveCase(comms, Coll::kAllGather, collieFloat32, collieSum, 4099, false, 0, seed,
                                              Memory::kDevice),
              "")
        << "seed " << seed;
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(slotsWritten(comms, r), minBytes[0] == '-')
          << "COLLIE_DIRECT_READ_BYTES=" << minBytes << ", rank " << r;
  }
  ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", "0");
  for (const char* slotBytes : {"262144", "4096"}) {
    ScopedEnv slots("COLLIE_SLOT_BYTES", slotBytes);
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll, Coll::kBroadcast})
      for (bool inPlace : {false, true}) {
        if (inPlace && !collie::test::collHasInPlace(coll)) continue;
        for (collieRedOp_t op : {collieSum, collieAvg}) {
          if (op == collieAvg && !collie::test::collHasOp(coll)) continue;
          const std::string err =
              collie::test::runCollectiveCase(comms, coll, collieFloat32, op, 20011, inPlace, 1, seed, Memory::kDevice);
          ASSERT_EQ(err, "") << collie::test::collName(coll) << (inPlace ? " in place" : "") << " op " << op
                             << ", slots of " << slotBytes << " bytes (seed " << seed << ")";
        }
      }
  }
}

// Holds `stream` shut, from the host, until `open` is set: work queued behind it waits.
cudaError_t holdShut(cudaStream_t stream, std::atomic<bool>* open) {
  auto gate = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  return cudaLaunchHostFunc(stream, gate, open);
}

// Per-rank device buffers and a non-blocking stream, made before the rank
// threads start: work on the legacy default stream (a synchronous cudaMemcpy or
// cudaMemset, a blocking stream's kernel) would wait for other ranks' kernels,
// which wait for this rank: ranks sharing a GPU must stay off it while others
// may be running.
struct RankDevice {
  void* in = nullptr;
  void* out = nullptr;
  cudaStream_t stream = nullptr;
  cudaStream_t other = nullptr;  // a second stream of the rank
  RankDevice(size_t inBytes, size_t outBytes) {
    cudaSetDevice(0);
    EXPECT_EQ(cudaMalloc(&in, inBytes), cudaSuccess);
    EXPECT_EQ(cudaMalloc(&out, outBytes), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    EXPECT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  }
  ~RankDevice() {
    cudaStreamSynchronize(stream);
    cudaStreamSynchronize(other);
    cudaStreamDestroy(stream);
    cudaStreamDestroy(other);
    cudaFree(in);
    cudaFree(out);
  }
};

// A peer reads what a rank's kernel hands over in place until it credits it: the kernel must not end before
// then, or the rank's next work on its stream (here a memset of every buffer, queued at once) would change what
// the peer still reads. Wrong results, or a race ThreadSanitizer reports over the fake runtime
// (scripts/fake_gpu.sh), if it ended early.
TEST(CudaBackend, AKernelEndsOnlyOnceItsPeersHaveReadItsBuffers) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv direct("COLLIE_DIRECT_READ_BYTES", "0");
  ScopedEnv protocol("COLLIE_PROTO", "simple");
  ScopedEnv ring("COLLIE_ALGO", "allreduce:ring,allgather:ring");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 3;
  const size_t count = 3 * 5000 + 1;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::unique_ptr<RankDevice>> dev;
  for (int r = 0; r < n; ++r) dev.emplace_back(new RankDevice(count * 4, count * (n + 1) * 4));
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    cudaStream_t s = dev[r]->stream;
    float* in = static_cast<float*>(dev[r]->in);
    float* out = static_cast<float*>(dev[r]->out);  // the allreduce's count, then the allgather's n x count
    std::vector<float> host(count), got(count * (n + 1));
    std::string& err = errors[static_cast<size_t>(r)];
    for (int iter = 0; iter < 10 && err.empty(); ++iter) {
      for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>((r + 1) * (iter + 1)) + static_cast<float>(i % 7);
      cudaMemcpyAsync(in, host.data(), count * 4, cudaMemcpyHostToDevice, s);
      if (collieAllReduce(in, out, count, collieFloat32, collieSum, comms[r], s) != collieSuccess ||
          collieAllGather(in, out + count, count, collieFloat32, comms[r], s) != collieSuccess) {
        err = collieGetLastError(comms[r]);
        break;
      }
      cudaMemcpyAsync(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost, s);
      cudaMemsetAsync(in, 0xff, count * 4, s);  // at once, in stream order after the kernels
      cudaMemsetAsync(out, 0xff, got.size() * 4, s);
      if (cudaStreamSynchronize(s) != cudaSuccess) {
        err = "cudaStreamSynchronize failed";
        break;
      }
      for (size_t i = 0; i < count && err.empty(); ++i) {
        const float want = static_cast<float>(6 * (iter + 1)) + 3.0f * static_cast<float>(i % 7);
        if (got[i] != want)
          err = "allreduce, call " + std::to_string(iter) + ", element " + std::to_string(i) + ": " +
                std::to_string(got[i]) + " != " + std::to_string(want);
        for (int q = 0; q < n && err.empty(); ++q) {
          const float from = static_cast<float>((q + 1) * (iter + 1)) + static_cast<float>(i % 7);
          if (got[count * static_cast<size_t>(q + 1) + i] != from)
            err = "allgather, call " + std::to_string(iter) + ", rank " + std::to_string(q) + "'s element " +
                  std::to_string(i);
        }
      }
    }
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// A rank that runs ahead of its peers queues its next collective only once they have queued the one before
// (executor/colocated_streams.h): where streams share a hardware queue, its second kernel, waiting in its stream
// for its first, would otherwise hold back a peer's first kernel queued behind it, which the first waits for.
// Rank 0 makes its calls at once; the others start theirs 200 ms after its first returned. LL and Simple calls
// alternate; ranks 0 and 1 exchange a block by grouped send/recv after the second call, which waits likewise for
// the peers to have queued that call, as the third call waits for the partner to have queued its send/recv
// (with a wait for collectives only, the send/recv times out with one queue). Then one thread makes the same calls on
// every rank inside a group (each communicator's queue runs on a thread of its own at collieGroupEnd), which must not
// wait for itself. With every stream in one hardware queue (COLLIE_TEST_FAKE_CUDA_QUEUES=1 in scripts/fake_gpu.sh;
// CUDA_DEVICE_MAX_CONNECTIONS=1 in tests/gpu/run.sh) the first part deadlocks until COLLIE_TIMEOUT without the wait.
TEST(CudaBackend, ARankAheadQueuesItsNextCallOnlyOnceItsPeersHaveQueuedTheLast) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 3, calls = 4;
  const size_t counts[calls] = {1000, 70001, 3, 70001};  // LL, Simple, ...
  const size_t most = 70001;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::unique_ptr<RankDevice>> dev;
  const size_t swapped = 1000;  // elements ranks 0 and 1 send each other, into their outputs' last block
  for (int r = 0; r < n; ++r) dev.emplace_back(new RankDevice(most * 4, (calls + 1) * most * 4));
  // Rank r's element i: r + 1 + i % 5, so every sum is 6 + 3 (i % 5) and exact.
  auto fill = [&](int r) {
    std::vector<float> host(most);
    for (size_t i = 0; i < most; ++i) host[i] = static_cast<float>(r + 1) + static_cast<float>(i % 5);
    EXPECT_EQ(cudaMemcpyAsync(dev[r]->in, host.data(), most * 4, cudaMemcpyHostToDevice, dev[r]->stream), cudaSuccess);
    EXPECT_EQ(cudaMemsetAsync(dev[r]->out, 0xff, (calls + 1) * most * 4, dev[r]->stream), cudaSuccess);  // NaN
    EXPECT_EQ(cudaStreamSynchronize(dev[r]->stream), cudaSuccess);
  };
  // "" or what is wrong in rank r's outputs, after its stream is done.
  auto check = [&](int r, const char* part, bool swap) -> std::string {
    std::vector<float> got((calls + 1) * most);
    // On the rank's stream: the legacy one could wait for peers' kernels that wait for this rank.
    if (cudaMemcpyAsync(got.data(), dev[r]->out, got.size() * 4, cudaMemcpyDeviceToHost, dev[r]->stream) !=
            cudaSuccess ||
        cudaStreamSynchronize(dev[r]->stream) != cudaSuccess)
      return std::string(part) + ": the stream failed";
    collieResult_t async = collieSuccess;
    if (collieCommGetAsyncError(comms[r], &async) != collieSuccess || async != collieSuccess)
      return std::string(part) + ": " + collieGetLastError(comms[r]);
    for (int c = 0; c < calls; ++c)
      for (size_t i = 0; i < counts[c]; ++i)
        if (got[c * most + i] != 6.0f + 3.0f * static_cast<float>(i % 5))
          return std::string(part) + ", call " + std::to_string(c) + ", element " + std::to_string(i) + ": " +
                 std::to_string(got[c * most + i]);
    for (size_t i = 0; swap && r < 2 && i < swapped; ++i)
      if (got[calls * most + i] != static_cast<float>(2 - r) + static_cast<float>(i % 5))
        return std::string(part) + ", send/recv, element " + std::to_string(i);
    return "";
  };
  auto swap = [&](int r) {  // ranks 0 and 1
    collieGroupStart();
    collieSend(dev[r]->in, swapped, collieFloat32, 1 - r, comms[r], dev[r]->stream);
    collieRecv(static_cast<float*>(dev[r]->out) + calls * most, swapped, collieFloat32, 1 - r, comms[r],
               dev[r]->stream);
    return collieGroupEnd();
  };
  auto call = [&](int r, int c) {
    return collieAllReduce(dev[r]->in, static_cast<float*>(dev[r]->out) + c * most, counts[c], collieFloat32, collieSum,
                           comms[r], dev[r]->stream);
  };
  for (int r = 0; r < n; ++r) fill(r);
  std::atomic<bool> firstReturned{false};
  std::atomic<int> finished{0};  // ranks done with their calls, failed or not
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    if (r != 0) {
      while (!firstReturned.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    for (int c = 0; c < calls; ++c) {
      if (call(r, c) != collieSuccess) {
        errors[r] = "call " + std::to_string(c) + ": " + collieGetLastError(comms[r]);
        break;
      }
      if (r == 0) firstReturned = true;
      if (c == 1 && r < 2 && swap(r) != collieSuccess) {
        errors[r] = std::string("send/recv: ") + collieGetLastError(comms[r]);
        break;
      }
    }
    if (r == 0) firstReturned = true;  // also when its first call failed: the others must not wait for ever
    // The copy back is work of our own behind the last call: queued before every peer has queued that call, it
    // could hold a peer's kernel back in a shared queue just the same (docs/cuda-executor.md).
    ++finished;
    while (finished.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (errors[r].empty()) errors[r] = check(r, "ahead", true);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  const auto* exec0 = dynamic_cast<const collie::CudaExecutor*>(comms[0]->executor.get());
  ASSERT_NE(exec0, nullptr);
  // Its second call and its send/recv at least (its later calls may find the peers caught up).
  EXPECT_GE(exec0->peerWaits(), 2u) << "rank 0 queued work before its peers had queued the call before";

  for (int r = 0; r < n; ++r) fill(r);
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < calls; ++c) ASSERT_EQ(call(r, c), collieSuccess) << collieGetLastError(comms[r]);
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) EXPECT_EQ(check(r, "group", false), "") << "rank " << r;
}

// The same wait, for a peer that never calls: the second call fails within about COLLIE_TIMEOUT (the wait's own
// timeout, or the failure of the first call's kernel, whichever it sees first), naming rank 1; never a hang.
TEST(CudaBackend, ARankAheadOfAPeerThatNeverCallsFailsWithinTheTimeout) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "2");
  collie::test::Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  RankDevice dev(1024 * 4, 1024 * 4);
  float* in = static_cast<float*>(dev.in);
  float* out = static_cast<float*>(dev.out);
  ASSERT_EQ(collieAllReduce(in, out, 1024, collieFloat32, collieSum, comms[0], dev.stream), collieSuccess);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(collieAllReduce(in, out, 1024, collieFloat32, collieSum, comms[0], dev.stream), collieTimeout);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 8.0);
  const std::string said = collieGetLastError(comms[0]);
  EXPECT_TRUE(said.find("waiting on rank 1") != std::string::npos ||
              said.find("for rank 1, a thread of this process") != std::string::npos)
      << said;
}

// All-to-all-v with uneven splits (zeros and self included) and the same
// exchange as grouped send/recv, on device buffers.
TEST(CudaBackend, AllToAllvAndGroupedSendRecv) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 4;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  auto count = [](int i, int j) { return static_cast<size_t>(((i * 7 + j * 3) % 5) * 1000 + (i == j ? 1 : 0)); };
  std::vector<std::vector<size_t>> sc(n, std::vector<size_t>(n)), sd = sc, rc = sc, rd = sc;
  std::vector<size_t> in(n, 0), out(n, 0);
  std::vector<std::unique_ptr<RankDevice>> dev;
  for (int r = 0; r < n; ++r) {
    for (int j = 0; j < n; ++j) {
      sc[r][j] = count(r, j), sd[r][j] = in[r], in[r] += sc[r][j];
      rc[r][j] = count(j, r), rd[r][j] = out[r], out[r] += rc[r][j];
    }
    dev.emplace_back(new RankDevice((in[r] + 1) * 4, (out[r] + 1) * 4));
  }
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    cudaStream_t s = dev[r]->stream;
    int32_t* dIn = static_cast<int32_t*>(dev[r]->in);
    int32_t* dOut = static_cast<int32_t*>(dev[r]->out);
    std::vector<int32_t> host(in[r]), got(out[r]);
    for (int j = 0; j < n; ++j)
      for (size_t e = 0; e < sc[r][j]; ++e) host[sd[r][j] + e] = r * 1000000 + j * 10000 + static_cast<int32_t>(e);
    cudaMemcpyAsync(dIn, host.data(), in[r] * 4, cudaMemcpyHostToDevice, s);
    for (int round = 0; round < 2; ++round) {
      cudaMemsetAsync(dOut, 0xff, (out[r] + 1) * 4, s);
      collieResult_t res;
      if (round == 0) {
        res = collieAllToAllv(dIn, sc[r].data(), sd[r].data(), dOut, rc[r].data(), rd[r].data(), collieInt32, comms[r],
                              s);
      } else {
        // The whole group is one launch (core/p2p.cc): with one per exchange, a rank's second launch would wait
        // in its hardware queue for its first, and hold back a peer's first queued behind it.
        const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[r]->executor.get());
        const uint64_t before = exec != nullptr ? exec->launches() : 0;
        collieGroupStart();
        for (int j = 0; j < n; ++j) {
          collieSend(dIn + sd[r][j], sc[r][j], collieInt32, j, comms[r], s);
          collieRecv(dOut + rd[r][j], rc[r][j], collieInt32, j, comms[r], s);
        }
        res = collieGroupEnd();
        if (res == collieSuccess && exec != nullptr && exec->launches() - before != 1)
          errors[r] = "the group was " + std::to_string(exec->launches() - before) + " launches, not one";
      }
      if (res != collieSuccess) {
        errors[r] = collieGetLastError(comms[r]);
        break;
      }
      // Waited for before the copy back is queued: a copy queued behind this rank's kernel would hold back,
      // in a hardware queue the streams share, a peer's kernel not yet queued, which this one waits for
      // (docs/cuda-executor.md, "Ranks sharing hardware queues").
      cudaError_t e = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = cudaMemcpyAsync(got.data(), dOut, out[r] * 4, cudaMemcpyDeviceToHost, s);
      if (e == cudaSuccess) e = cudaStreamSynchronize(s);
      if (e != cudaSuccess) {
        errors[r] = cudaGetErrorString(e);
        break;
      }
      for (int j = 0; j < n && errors[r].empty(); ++j)
        for (size_t e = 0; e < rc[r][j]; ++e)
          if (got[rd[r][j] + e] != j * 1000000 + r * 10000 + static_cast<int32_t>(e)) {
            errors[r] =
                (round ? "send/recv" : "alltoallv") + std::string(": wrong element from rank ") + std::to_string(j);
            break;
          }
    }
    // A wrong element after a bounded wait gave up: say where it waited.
    collieResult_t async = collieSuccess;
    collieCommGetAsyncError(comms[r], &async);
    if (async != collieSuccess) errors[r] += std::string(" (async error: ") + collieGetLastError(comms[r]) + ")";
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// Captured into a graph and replayed: each replay is a fresh allreduce. Each
// rank thread captures in thread-local mode: a global-mode capture forbids
// other threads' cudaMalloc and the like (the other rank's), not Collie's own.
TEST(CudaBackend, AllReduceInCudaGraph) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 2;
  const size_t count = 1 << 16;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::unique_ptr<RankDevice>> dev;
  for (int r = 0; r < n; ++r) dev.emplace_back(new RankDevice(count * sizeof(float), 4));
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    float* buf = static_cast<float*>(dev[r]->in);
    cudaStream_t s = dev[r]->stream;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    collieResult_t res = collieAllReduce(buf, buf, count, collieFloat32, collieSum, comms[r], s);
    cudaError_t e = cudaStreamEndCapture(s, &graph);
    if (res != collieSuccess || e != cudaSuccess) {
      errors[r] = std::string("capture: ") + collieGetLastError(comms[r]) + " / " + cudaGetErrorString(e);
      return;
    }
    e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess) {
      errors[r] = std::string("instantiate: ") + cudaGetErrorString(e);
      cudaGraphDestroy(graph);
      return;
    }
    std::vector<float> host(count, static_cast<float>(r + 1)), got(count);
    for (int replay = 0; replay < 3 && errors[r].empty(); ++replay) {
      cudaMemcpyAsync(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, s);
      cudaGraphLaunch(exec, s);
      // Waited for before the copy back is queued, as in AllToAllvAndGroupedSendRecv.
      e = cudaStreamSynchronize(s);
      if (e == cudaSuccess) e = cudaMemcpyAsync(got.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost, s);
      if (e == cudaSuccess) e = cudaStreamSynchronize(s);
      if (e != cudaSuccess) errors[r] = "replay " + std::to_string(replay) + ": " + cudaGetErrorString(e);
      for (size_t i = 0; i < count && errors[r].empty(); ++i)
        if (got[i] != 3.0f)  // 1 + 2
          errors[r] =
              "replay " + std::to_string(replay) + ": element " + std::to_string(i) + " is " + std::to_string(got[i]);
    }
    // An eager call after the replays, on another stream: it is ordered after
    // the last replay (an event recorded plainly inside the capture could not
    // be waited on: cudaErrorCapturedEvent), and its flag counters continue
    // where the replays left them in device memory.
    if (errors[r].empty()) {
      cudaStream_t s2 = dev[r]->other;
      res = collieAllReduce(buf, buf, count, collieFloat32, collieSum, comms[r], s2);
      e = cudaStreamSynchronize(s2);
      if (e == cudaSuccess) e = cudaMemcpyAsync(got.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost, s2);
      if (e == cudaSuccess) e = cudaStreamSynchronize(s2);
      if (res != collieSuccess || e != cudaSuccess)
        errors[r] =
            std::string("eager call after replays: ") + collieGetLastError(comms[r]) + " / " + cudaGetErrorString(e);
      else if (got[0] != 6.0f || got[count - 1] != 6.0f)
        errors[r] = "eager call after replays: " + std::to_string(got[0]) + ", expected 6";
    }
    // A replay, then an eager call on the stream of the last eager call: the eager call runs after the replay,
    // as a launch made after it, although the replay's stream is held shut until both are queued (a kernel that
    // did not wait would run first, or beside the replay on the same flag counters).
    if (errors[r].empty()) {
      std::atomic<bool> open{false};
      holdShut(s, &open);
      cudaMemcpyAsync(buf, host.data(), count * sizeof(float), cudaMemcpyHostToDevice, s);
      cudaGraphLaunch(exec, s);                                                                   // 1 + 2 = 3
      res = collieAllReduce(buf, buf, count, collieFloat32, collieSum, comms[r], dev[r]->other);  // 3 + 3 = 6
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      open = true;
      e = cudaStreamSynchronize(dev[r]->other);
      if (e == cudaSuccess) e = cudaStreamSynchronize(s);
      cudaMemcpy(got.data(), buf, count * sizeof(float), cudaMemcpyDeviceToHost);
      if (res != collieSuccess || e != cudaSuccess)
        errors[r] = std::string("eager call after a held replay: ") + collieGetLastError(comms[r]) + " / " +
                    cudaGetErrorString(e);
      else if (got[0] != 6.0f || got[count - 1] != 6.0f)
        errors[r] = "eager call after a held replay: " + std::to_string(got[0]) + ", expected 6 (it ran first)";
    }
    // Finalizing waits for the communicator's last launch.
    if (errors[r].empty() && collieCommFinalize(comms[r]) != collieSuccess)
      errors[r] = std::string("finalize after replays: ") + collieGetLastError(comms[r]);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

// One rank: a collective is a copy (nothing in place) by the copy engine, not
// a kernel launch, and ordered like a launch: a call on a second stream that
// reads the first call's output waits for it, and collieCommFinalize waits for
// the last copy. The first stream is held shut by a host function until after
// both calls are made, so a copy that did not wait would read poison.
TEST(CudaBackend, OneRankCopiesInCallOrderWithoutALaunch) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  collie::test::Comms comms(1);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  const auto* exec = dynamic_cast<const collie::CudaExecutor*>(comms[0]->executor.get());
  ASSERT_NE(exec, nullptr);
  const size_t count = (size_t{1} << 20) + 3;
  const size_t bytes = count * sizeof(float);
  RankDevice dev(bytes, bytes);
  void* mid = nullptr;
  ASSERT_EQ(cudaMalloc(&mid, bytes), cudaSuccess);
  std::vector<float> host(count), got(count);
  for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 1000) + 0.5f;
  ASSERT_EQ(cudaMemcpy(dev.in, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(mid, 0xff, bytes), cudaSuccess);  // NaN
  ASSERT_EQ(cudaMemset(dev.out, 0xff, bytes), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::atomic<bool> open{false};
  // Opened on every way out, before `dev` waits for its streams: a failed assertion must not leave them shut.
  struct OpenAtExit {
    std::atomic<bool>& flag;
    ~OpenAtExit() { flag = true; }
  } openAtExit{open};
  ASSERT_EQ(holdShut(dev.stream, &open), cudaSuccess);
  ASSERT_EQ(collieAllReduce(dev.in, mid, count, collieFloat32, collieSum, comms[0], dev.stream), collieSuccess)
      << collieGetLastError(comms[0]);
  ASSERT_EQ(collieBroadcast(mid, dev.out, count, collieFloat32, 0, comms[0], dev.other), collieSuccess)
      << collieGetLastError(comms[0]);
  ASSERT_EQ(collieAllReduce(dev.out, dev.out, count, collieFloat32, collieAvg, comms[0], dev.other), collieSuccess)
      << collieGetLastError(comms[0]);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    open = true;
  });
  const collieResult_t finalized = collieCommFinalize(comms[0]);
  opener.join();
  ASSERT_EQ(finalized, collieSuccess) << collieGetLastError(comms[0]);
  // Read on a stream of its own, ordered after the calls by nothing but the finalize.
  cudaStream_t reader;
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(got.data(), dev.out, bytes, cudaMemcpyDeviceToHost, reader), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
  cudaStreamDestroy(reader);
  cudaFree(mid);
  size_t wrong = 0, first = count;
  for (size_t i = 0; i < count; ++i)
    if (got[i] != host[i] && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0u) << "first wrong element " << first << ": " << (first < count ? got[first] : 0.0f);
  EXPECT_EQ(exec->launches(), 0u);
}

// LL flags that come round every 256 slices (COLLIE_TEST_LL_FLAG_PERIOD; 2^15 by default) under the GPU's memory model:
// full-slot LL calls landing in the same slots exactly one period apart, with short LL calls (which leave the
// slots' tails alone) or Simple calls (which leave LL slots alone) between. A receiver would take a tail left a
// period earlier unless its sender had rewritten it in time (kernels/device_prims_ll.cuh, "Stale lines").
// tests/unit/ll_flags_test.cc runs the same on the emulated kernels, where it also checks every line's age.
TEST(CudaBackend, LLFlagsComeRoundWithoutAStaleLineTaken) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv period("COLLIE_TEST_LL_FLAG_PERIOD", "256");
  ScopedEnv algo("COLLIE_ALGO", "allreduce:ring");
  ScopedEnv llSlotBytes("COLLIE_LL_SLOT_BYTES", "1024");  // 128 int32s a slice
  ScopedEnv slotBytes("COLLIE_SLOT_BYTES", "4096");       // 1024 int32s a slice
  ScopedEnv slots("COLLIE_SLOTS", "4");
  ScopedEnv channels("COLLIE_CHANNELS", "1");
  const uint64_t seed = collie::test::testSeed();
  collie::test::Comms comms(2);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  // Ring allreduce of 2 ranks posts 2 slices per connection per call whose chunks (half the count) fit a slice.
  uint64_t calls = 0;
  auto allReduce = [&](size_t count) {
    const std::string err = collie::test::runCollectiveCase(comms, Coll::kAllReduce, collieInt32, collieSum, count,
                                                            false, 0, seed + calls, Memory::kDevice);
    ASSERT_EQ(err, "") << "call #" << calls << ", count " << count << " (seed " << seed << ")";
    ++calls;
  };
  for (bool simple : {false, true})
    for (int k = 0; k < 3; ++k) {
      allReduce(256);  // 2 full LL slices
      if (simple) {
        allReduce(2048 * 126);  // 252 Simple slices
      } else {
        for (int i = 0; i < 126; ++i) allReduce(2);  // 252 one-line LL slices
      }
      allReduce(2);
      allReduce(256);  // 256 slices after the first full ones: their slots, and their flags
      if (::testing::Test::HasFatalFailure()) return;
    }
}

}  // namespace
