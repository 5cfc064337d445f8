// Direct algorithms on the CUDA backend (executor/cuda_executor.h, "Direct algorithms"), ranks as threads sharing
// the GPU: allreduce direct_oneshot and direct_twoshot, and reducescatter, allgather, alltoall(v) and broadcast
// direct run as the direct kernels, and allgather, alltoall and broadcast direct_ce as copies by the copy engine,
// exact for every type and operator, in place and out of place, across many calls; what the backend cannot run yet
// is refused with a sentence that says so. Every test skips, saying why, when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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

// Every direct algorithm with a kernel or copies on the CUDA backend (COLLIE_ALGO names them here) on
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
                        {Coll::kBroadcast, collie::Collective::kBroadcast, "direct"},
                        {Coll::kAllGather, collie::Collective::kAllGather, "direct_ce"},
                        {Coll::kAllToAll, collie::Collective::kAllToAll, "direct_ce"},
                        {Coll::kBroadcast, collie::Collective::kBroadcast, "direct_ce"}};
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

// COLLIE_DIRECT_TUNE=1: the tuner weighs the direct algorithms too, here where every rank maps its peers. Each
// collective with a direct kernel goes direct at some size (the shared-GPU model), and those calls give the right
// bits, at that count and an odd one beside it; a call over what one launch moves is given the tuner's choice
// among the others, which it also gives every call without the variable.
TEST(CudaBackend, TheTunerChoosesDirectKernelsWhereAsked) {
  SKIP_WITHOUT_GPU();
  struct Case {
    Coll coll;
    collie::Collective c;
  };
  const Case cases[] = {{Coll::kAllReduce, collie::Collective::kAllReduce},
                        {Coll::kReduceScatter, collie::Collective::kReduceScatter},
                        {Coll::kAllGather, collie::Collective::kAllGather},
                        {Coll::kAllToAll, collie::Collective::kAllToAll},
                        {Coll::kBroadcast, collie::Collective::kBroadcast}};
  const uint64_t counts[] = {1, 256, 4096, 65536, 1 << 20};
  const uint64_t tooMany = uint64_t{1} << 31;  // floats: 8 GiB per rank, past kDirectMaxBytes
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  ScopedEnv algo("COLLIE_ALGO", nullptr);
  const uint64_t seed = collie::test::testSeed();
  {
    ScopedEnv tune("COLLIE_DIRECT_TUNE", "1");
    collie::test::Comms comms(3);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    ASSERT_TRUE(comms[0]->tuneDirect);
    for (const Case& k : cases) {
      const char* name = collie::collectiveName(k.c);
      uint64_t direct = 0;
      for (uint64_t count : counts)
        if (direct == 0 && comms[0]->algorithmForCall(k.c, count, collieFloat32, collieSum)->mapsPeers) direct = count;
      ASSERT_NE(direct, uint64_t{0}) << name << ": the tuner never chose a direct algorithm";
      printf("%s: the tuner's first direct pick, at %llu floats: %s\n", name, static_cast<unsigned long long>(direct),
             comms[0]->algorithmForCall(k.c, direct, collieFloat32, collieSum)->name);
      for (uint64_t count : {direct, direct + 1})
        for (bool inPlace : {false, true}) {
          if (inPlace && !collie::test::collHasInPlace(k.coll)) continue;
          const std::string err = collie::test::runCollectiveCase(comms, k.coll, collieFloat32, collieSum, count,
                                                                  inPlace, 1, seed, Memory::kDevice);
          ASSERT_EQ(err, "") << name << " count " << count << (inPlace ? " in place" : "") << " (seed " << seed << ")";
        }
      // Past one launch: weighed alone, the direct algorithm would win; for the call, the others do.
      const uint64_t bytes = tooMany * 4;
      printf("%s at %llu floats: weighed alone %s, for the call %s\n", name, static_cast<unsigned long long>(tooMany),
             comms[0]->algorithmFor(k.c, bytes)->name,
             comms[0]->algorithmForCall(k.c, tooMany, collieFloat32, collieSum)->name);
      EXPECT_TRUE(comms[0]->algorithmFor(k.c, bytes)->mapsPeers) << name << ": nothing to fall back from";
      EXPECT_FALSE(comms[0]->algorithmForCall(k.c, tooMany, collieFloat32, collieSum)->mapsPeers) << name;
      EXPECT_FALSE(comms[0]->algorithmFor(k.c, bytes, false)->mapsPeers) << name;
    }
  }
  collie::test::Comms comms(3);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  EXPECT_FALSE(comms[0]->tuneDirect);
  for (const Case& k : cases)
    for (uint64_t count : counts)
      EXPECT_FALSE(comms[0]->algorithmForCall(k.c, count, collieFloat32, collieSum)->mapsPeers)
          << collie::collectiveName(k.c) << " count " << count;
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

// What the CUDA backend cannot run as a direct kernel is refused on every rank, before anything is queued, with a
// sentence naming the algorithm and what to do: a one-shot call larger than its slots, and a copy-engine call
// being captured into a CUDA graph.
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
      {"alltoall:direct_ce", Coll::kAllToAll, 1001, true, "cannot be captured into a CUDA graph"},
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

// Every thread waits here until all `n` have come (a host barrier among the ranks' threads).
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  void arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    const int round = round_;
    if (++count_ == n_) {
      count_ = 0;
      ++round_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return round_ != round; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, round_ = 0;
};

// A direct call (allreduce one-shot and two-shot, all-to-all, all-to-all-v) captured into a CUDA graph and replayed,
// with uncaptured calls of the same algorithm between the replays: every one exact, on inputs that change before each,
// since each launch takes its call's number on the device (kernels/direct_kernels.h, "The call number"). A replay that
// reused its capture's number would take the one-shot's lines of the replay before, or pass a barrier early. Every rank
// allocates and captures before any launches, and frees after all have synchronised: an allocation or a free waits for
// the whole device, so one made while a peer's kernel waits for this rank's would deadlock.
TEST(CudaBackend, DirectCallsReplayFromCudaGraphs) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 3;
  const size_t count = 1001;  // per rank (all-to-all: per block)
  // All-to-all-v: rank r sends rank q 300 + 100 r + 10 q elements, each rank's blocks in peer order one element
  // apart; the graph holds the call's counts and displacements.
  const size_t un = static_cast<size_t>(n);
  std::vector<std::vector<size_t>> vsc(un, std::vector<size_t>(un)), vsd = vsc, vrc = vsc, vrd = vsc;
  size_t vElems = 0;
  for (size_t r = 0; r < un; ++r) {
    size_t in = 0, out = 0;
    for (size_t q = 0; q < un; ++q) {
      vsc[r][q] = 300 + 100 * r + 10 * q, vsd[r][q] = in, in += vsc[r][q] + 1;
      vrc[r][q] = 300 + 100 * q + 10 * r, vrd[r][q] = out, out += vrc[r][q] + 1;
    }
    vElems = std::max({vElems, in, out});
  }
  for (const char* algo :
       {"allreduce:direct_oneshot", "allreduce:direct_twoshot", "alltoall:direct", "alltoallv:direct"}) {
    ScopedEnv named("COLLIE_ALGO", algo);
    const bool v = std::string(algo).rfind("alltoallv", 0) == 0;
    const bool alltoall = !v && std::string(algo).rfind("alltoall", 0) == 0;
    const size_t elems = v ? vElems : alltoall ? count * n : count;
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<std::string> wrong(static_cast<size_t>(n));
    Rendezvous all(n);
    collie::test::onRanks(n, [&](int r) {
      cudaSetDevice(0);
      std::string& bad = wrong[static_cast<size_t>(r)];
      auto in = std::make_unique<RankDevice>(elems * sizeof(float));
      auto out = std::make_unique<RankDevice>(elems * sizeof(float));
      cudaStream_t stream = in->stream;
      const size_t ur = static_cast<size_t>(r);
      auto call = [&] {
        if (v)
          return collieAllToAllv(in->buf, vsc[ur].data(), vsd[ur].data(), out->buf, vrc[ur].data(), vrd[ur].data(),
                                 collieFloat32, comms[r], stream);
        return alltoall ? collieAllToAll(in->buf, out->buf, count, collieFloat32, comms[r], stream)
                        : collieAllReduce(in->buf, out->buf, count, collieFloat32, collieSum, comms[r], stream);
      };
      // Rank p's input element i in call k: small integers, so every sum is exact.
      auto value = [](int p, int k, size_t i) {
        return static_cast<float>((p + 1) * (k + 2) + static_cast<int>(i % 7));
      };
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      collieResult_t rc = collieSuccess;
      if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) rc = call();
      if (cudaStreamEndCapture(stream, &graph) != cudaSuccess || rc != collieSuccess ||
          cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
        bad = std::string("capture failed: ") + collieGetLastError(comms[r]);
      std::vector<float> host(elems), got(elems);
      all.arrive();
      // (A rank whose capture failed makes no call: its peers' first calls time out, and say so.)
      for (int k = 0; k < 4 && bad.empty(); ++k) {
        for (size_t i = 0; i < elems; ++i) host[i] = value(r, k, i);
        cudaMemcpyAsync(in->buf, host.data(), elems * sizeof(float), cudaMemcpyHostToDevice, stream);
        // Calls 0 and 2 replay the graph, 1 and 3 are made as usual.
        const bool replay = k % 2 == 0;
        if (replay ? cudaGraphLaunch(exec, stream) != cudaSuccess : call() != collieSuccess) {
          bad = "call " + std::to_string(k) + " failed: " + collieGetLastError(comms[r]);
          break;
        }
        cudaMemcpyAsync(got.data(), out->buf, elems * sizeof(float), cudaMemcpyDeviceToHost, stream);
        if (cudaStreamSynchronize(stream) != cudaSuccess || collieCommGetAsyncError(comms[r], &rc) != collieSuccess ||
            rc != collieSuccess) {
          bad = "call " + std::to_string(k) + " failed on the GPU: " + collieGetLastError(comms[r]);
          break;
        }
        for (size_t q = 0; q < un && v && bad.empty(); ++q)
          for (size_t e = 0; e < vrc[ur][q] && bad.empty(); ++e) {
            const float want = value(static_cast<int>(q), k, vsd[q][ur] + e);
            if (got[vrd[ur][q] + e] != want)
              bad = std::string(replay ? "replay " : "call ") + std::to_string(k) + ": element " + std::to_string(e) +
                    " from rank " + std::to_string(q) + " is " + std::to_string(got[vrd[ur][q] + e]) + ", not " +
                    std::to_string(want);
          }
        for (size_t i = 0; i < elems && !v && bad.empty(); ++i) {
          float want = 0;
          if (alltoall) {
            want = value(static_cast<int>(i / count), k, static_cast<size_t>(r) * count + i % count);
          } else {
            for (int p = 0; p < n; ++p) want = value(p, k, i) + want;
          }
          if (got[i] != want)
            bad = std::string(replay ? "replay " : "call ") + std::to_string(k) + ": element " + std::to_string(i) +
                  " is " + std::to_string(got[i]) + ", not " + std::to_string(want);
        }
      }
      cudaStreamSynchronize(stream);
      all.arrive();
      if (exec != nullptr) cudaGraphExecDestroy(exec);
      if (graph != nullptr) cudaGraphDestroy(graph);
      out.reset();
      in.reset();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << algo << ", rank " << r;
  }
}

// direct_ce orders its copies by events alone: a rank's stream goes past the call only once every peer's copies
// into its output have ended, and no rank touches a peer's buffers before that peer's stream has reached the call.
// The last rank (a broadcast's root) starts with stale input; its stream is held shut by a host function, then
// poisons its output and writes its input, then makes its call: the other ranks' streams must still be busy 100 ms
// after their calls (they wait for its copies), and once it opens, every output must be exact (a copy into its
// output before the poison would be overwritten, one from its input before the write would be stale).
TEST(CudaBackend, CopyEngineCallsWaitForTheirPeersStreams) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 3, slow = n - 1;
  const size_t count = 1001;  // per rank (all-to-all: per block)
  for (Coll coll : {Coll::kAllGather, Coll::kAllToAll, Coll::kBroadcast}) {
    const char* name = collie::test::collName(coll);
    const std::string spec = std::string(name) + ":direct_ce";
    ScopedEnv algo("COLLIE_ALGO", spec.c_str());
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    const size_t inElems = coll == Coll::kAllToAll ? count * n : count;
    const size_t outElems = coll == Coll::kBroadcast ? count : count * n;
    auto value = [](int p, size_t i) { return static_cast<float>(p * 100000 + static_cast<int>(i)); };
    std::atomic<bool> open{false};
    std::atomic<int> queried{0};
    std::vector<std::string> wrong(static_cast<size_t>(n));
    // An allocation or a free waits for the whole device, so none may come while the held stream is shut.
    Rendezvous all(n);
    collie::test::onRanks(n, [&](int r) {
      cudaSetDevice(0);
      std::string& bad = wrong[static_cast<size_t>(r)];
      auto in = std::make_unique<RankDevice>(inElems * sizeof(float));
      auto out = std::make_unique<RankDevice>(outElems * sizeof(float));
      cudaStream_t stream = in->stream;
      std::vector<float> host(inElems), got(outElems);
      for (size_t i = 0; i < inElems; ++i) host[i] = value(r, i) + (r == slow ? 0.5f : 0.0f);
      // (A pageable copy to the device may land after cudaMemcpy returns: ordered on the stream instead.)
      cudaMemcpyAsync(in->buf, host.data(), inElems * sizeof(float), cudaMemcpyHostToDevice, stream);
      cudaStreamSynchronize(stream);
      for (size_t i = 0; i < inElems; ++i) host[i] = value(r, i);
      all.arrive();
      if (r == slow) {
        cudaLaunchHostFunc(
            stream,
            [](void* gate) {
              while (!static_cast<std::atomic<bool>*>(gate)->load())
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            },
            &open);
        cudaMemsetAsync(out->buf, 0xff, outElems * sizeof(float), stream);
        cudaMemcpyAsync(in->buf, host.data(), inElems * sizeof(float), cudaMemcpyHostToDevice, stream);
      }
      const collieResult_t rc = collie::test::callCollective(coll, in->buf, out->buf, count, collieFloat32, collieSum,
                                                             slow, comms[r], stream);
      if (rc != collieSuccess) bad = std::string("the call failed: ") + collieGetLastError(comms[r]);
      if (r != slow) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (rc == collieSuccess && cudaStreamQuery(stream) != cudaErrorNotReady)
          bad = "its stream went past the call before the held rank's copies";
        ++queried;
      } else {
        while (queried.load() < n - 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        open = true;
      }
      if (cudaStreamSynchronize(stream) != cudaSuccess) bad += " (the stream failed)";
      cudaMemcpy(got.data(), out->buf, outElems * sizeof(float), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < outElems && bad.empty() && rc == collieSuccess; ++i) {
        const size_t q = i / count, at = i % count;
        const float want = coll == Coll::kAllGather  ? value(static_cast<int>(q), at)
                           : coll == Coll::kAllToAll ? value(static_cast<int>(q), static_cast<size_t>(r) * count + at)
                                                     : value(slow, i);
        if (got[i] != want)
          bad = "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", not " + std::to_string(want);
      }
      all.arrive();
      out.reset();
      in.reset();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << spec << ", rank " << r;
  }
}

// direct_ce's ranks meet on the host as they queue a call, so one thread cannot make their calls one after the
// other: inside one group (collieGroupStart/End runs each communicator's calls on a thread of its own) every result
// is exact; outside one, the first call waits for its peers until COLLIE_TIMEOUT and says why.
TEST(CudaBackend, CopyEngineCallsFromOneThread) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", "3");
  ScopedEnv algo("COLLIE_ALGO", "alltoall:direct_ce");
  const int n = 3;
  const size_t count = 1001, elems = count * n;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<std::unique_ptr<RankDevice>> in, out;
  for (int r = 0; r < n; ++r) {
    in.push_back(std::make_unique<RankDevice>(elems * sizeof(float)));
    out.push_back(std::make_unique<RankDevice>(elems * sizeof(float)));
    std::vector<float> host(elems);
    for (size_t i = 0; i < elems; ++i) host[i] = static_cast<float>(r * 100000 + static_cast<int>(i));
    cudaMemcpyAsync(in.back()->buf, host.data(), elems * sizeof(float), cudaMemcpyHostToDevice, in.back()->stream);
    cudaStreamSynchronize(in.back()->stream);
  }
  ASSERT_EQ(collieGroupStart(), collieSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(collieAllToAll(in[r]->buf, out[r]->buf, count, collieFloat32, comms[r], in[r]->stream), collieSuccess);
  ASSERT_EQ(collieGroupEnd(), collieSuccess) << collieGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    std::vector<float> got(elems);
    ASSERT_EQ(cudaStreamSynchronize(in[r]->stream), cudaSuccess);
    cudaMemcpy(got.data(), out[r]->buf, elems * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < elems; ++i) {
      const float want = static_cast<float>(static_cast<int>(i / count) * 100000 + r * static_cast<int>(count) +
                                            static_cast<int>(i % count));
      ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
    }
  }
  // Rank 0's call alone, from this thread: its peers never come.
  EXPECT_EQ(collieAllToAll(in[0]->buf, out[0]->buf, count, collieFloat32, comms[0], in[0]->stream), collieTimeout);
  const std::string why = collieGetLastError(comms[0]);
  EXPECT_NE(why.find("must make its call from a thread of its own or inside one group"), std::string::npos) << why;
  cudaStreamSynchronize(in[0]->stream);
}

// Moves sized by one rank's call into buffers sized by another's would overrun them: where one rank's direct call
// differs from its peers' (here its count), every rank refuses it with collieInvalidUsage, saying so, and no output
// is touched. direct_ce refuses as the call is queued (its ranks meet on the host); the kernel on the device, after
// its entry barrier, before any move (the communicator's asynchronous error).
TEST(CudaBackend, DirectCallsThatDifferAreRefused) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 3;
  const size_t count = 1001, elems = (count + 1) * n;
  for (const char* spec : {"allgather:direct_ce", "allgather:direct"}) {
    ScopedEnv algo("COLLIE_ALGO", spec);
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<std::string> wrong(static_cast<size_t>(n));
    // An allocation or a free waits for the whole device: none while a peer's kernel waits for this rank's.
    Rendezvous all(n);
    collie::test::onRanks(n, [&](int r) {
      cudaSetDevice(0);
      std::string& bad = wrong[static_cast<size_t>(r)];
      auto in = std::make_unique<RankDevice>(elems * sizeof(float));
      auto out = std::make_unique<RankDevice>(elems * sizeof(float));
      cudaMemsetAsync(out->buf, 0x7f, elems * sizeof(float), in->stream);
      cudaStreamSynchronize(in->stream);
      all.arrive();
      collieResult_t rc =
          collieAllGather(in->buf, out->buf, r == 1 ? count + 1 : count, collieFloat32, comms[r], in->stream);
      cudaStreamSynchronize(in->stream);
      if (rc == collieSuccess) collieCommGetAsyncError(comms[r], &rc);
      const std::string why = collieGetLastError(comms[r]);
      if (rc != collieInvalidUsage || why.find("differs from") == std::string::npos)
        bad = std::string(collieGetErrorString(rc)) + ", not collieInvalidUsage saying the calls differ: " + why;
      std::vector<uint8_t> got(elems * sizeof(float));
      cudaMemcpy(got.data(), out->buf, got.size(), cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < got.size() && bad.empty(); ++i)
        if (got[i] != 0x7f) bad = "output byte " + std::to_string(i) + " was written";
      all.arrive();
      out.reset();
      in.reset();
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << spec << ", rank " << r;
  }
}

// All-to-all-v by algorithm `name` (direct or direct_ce), as the test below says.
void runDirectAllToAllv(const char* name) {
  const bool copyEngine = std::string(name) == "direct_ce";
  const std::string spec = std::string("alltoallv:") + name;
  ScopedEnv algo("COLLIE_ALGO", spec.c_str());
  const int n = 3;
  constexpr int kCalls = 4;  // the last one's counts differ
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  ASSERT_EQ(std::string(comms[0]->algorithmFor(collie::Collective::kAllToAllv, 64)->name), name);
  const uint64_t seed = collie::test::testSeed();
  std::mt19937_64 rng(seed);
  struct Split {
    std::vector<size_t> sc, sd, rc, rd;
    size_t in = 0, out = 0;  // extents
  };
  const size_t un = static_cast<size_t>(n);
  std::vector<std::vector<Split>> splits(kCalls, std::vector<Split>(un));
  size_t most = 1;
  for (int k = 0; k < kCalls; ++k) {
    std::vector<std::vector<size_t>> m(un, std::vector<size_t>(un));
    for (auto& row : m)
      for (size_t& x : row) x = rng() % 4 == 0 ? 0 : rng() % 3000;
    if (k == kCalls - 1) m[0][1] = 1 + rng() % 3000;
    // Blocks in a shuffled order with gaps of up to 2 elements; returns the extent.
    auto lay = [&](const std::vector<size_t>& counts, std::vector<size_t>* displs) {
      std::vector<size_t> order(un);
      for (size_t q = 0; q < un; ++q) order[q] = q;
      std::shuffle(order.begin(), order.end(), rng);
      displs->assign(un, 0);
      size_t at = 0;
      for (size_t q : order) {
        at += rng() % 3;
        (*displs)[q] = at;
        at += counts[q];
      }
      return at;
    };
    for (size_t r = 0; r < un; ++r) {
      Split& s = splits[static_cast<size_t>(k)][r];
      s.sc = m[r];
      for (size_t q = 0; q < un; ++q) s.rc.push_back(m[q][r]);
      s.in = lay(s.sc, &s.sd);
      s.out = lay(s.rc, &s.rd);
      most = std::max({most, s.in, s.out});
    }
    if (k == kCalls - 1) splits[static_cast<size_t>(k)][1].rc[0] -= 1;
  }
  // Element e of rank `from`'s block for rank `to` in call k.
  auto value = [](int from, int to, size_t e, int k) {
    return static_cast<int32_t>(from * 100000000 + to * 10000000 + k * 1000000 + static_cast<int>(e));
  };
  std::vector<std::string> wrong(un);
  // An allocation or a free waits for the whole device: none while a peer's kernel waits for this rank's.
  Rendezvous all(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    std::string& bad = wrong[static_cast<size_t>(r)];
    auto in = std::make_unique<RankDevice>(most * sizeof(int32_t));
    auto out = std::make_unique<RankDevice>(most * sizeof(int32_t));
    all.arrive();
    for (int k = 0; k < kCalls && bad.empty(); ++k) {
      const Split& s = splits[static_cast<size_t>(k)][static_cast<size_t>(r)];
      std::vector<int32_t> host(most, -2), got(most);
      for (int j = 0; j < n; ++j)
        for (size_t e = 0; e < s.sc[static_cast<size_t>(j)]; ++e)
          host[s.sd[static_cast<size_t>(j)] + e] = value(r, j, e, k);
      cudaMemcpyAsync(in->buf, host.data(), most * sizeof(int32_t), cudaMemcpyHostToDevice, in->stream);
      cudaMemsetAsync(out->buf, 0xff, most * sizeof(int32_t), in->stream);
      collieResult_t rc = collieAllToAllv(in->buf, s.sc.data(), s.sd.data(), out->buf, s.rc.data(), s.rd.data(),
                                          collieInt32, comms[r], in->stream);
      cudaStreamSynchronize(in->stream);
      if (rc == collieSuccess) collieCommGetAsyncError(comms[r], &rc);
      const std::string why = collieGetLastError(comms[r]);
      if (k == kCalls - 1 && (r < 2 || copyEngine)) {
        if (rc != collieInvalidUsage || why.find("counts differ") == std::string::npos)
          bad = std::string(collieGetErrorString(rc)) + ", not collieInvalidUsage saying the counts differ: " + why;
        break;
      }
      if (rc != collieSuccess) {
        bad = "call " + std::to_string(k) + ": " + why;
        break;
      }
      cudaMemcpyAsync(got.data(), out->buf, most * sizeof(int32_t), cudaMemcpyDeviceToHost, in->stream);
      cudaStreamSynchronize(in->stream);
      std::vector<bool> inBlock(most, false);
      for (int j = 0; j < n && bad.empty(); ++j)
        for (size_t e = 0; e < s.rc[static_cast<size_t>(j)] && bad.empty(); ++e) {
          const size_t at = s.rd[static_cast<size_t>(j)] + e;
          inBlock[at] = true;
          if (got[at] != value(j, r, e, k))
            bad = "call " + std::to_string(k) + ": element " + std::to_string(e) + " from rank " + std::to_string(j) +
                  " is wrong";
        }
      for (size_t i = 0; i < most && bad.empty(); ++i)
        if (!inBlock[i] && got[i] != -1)
          bad = "call " + std::to_string(k) + ": element " + std::to_string(i) + " outside every block was written";
    }
    all.arrive();
    out.reset();
    in.reset();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(wrong[static_cast<size_t>(r)], "") << "rank " << r << " (seed " << seed << ")";
}

// All-to-all-v direct and direct_ce (named in COLLIE_ALGO: the tuner never picks them, since each rank's size is its
// own counts'): uneven splits with zeros, displacements shuffled with gaps (so off 16 bytes too), new splits at
// every call, each element where its receiver's displacement puts it and the gaps untouched. Then a pair whose
// counts differ (rank 0 sends rank 1 one element more than rank 1 receives): with the kernel both ranks of the pair
// fail the call with collieInvalidUsage saying the counts differ, and rank 2's blocks, whose pairs agree, all
// arrive; with the copy engine every rank sees every rank's counts as the call is queued, and all three refuse it.
TEST(CudaBackend, DirectAllToAllvRunsAndRefusesCountsThatDiffer) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  for (const char* name : {"direct", "direct_ce"}) {
    SCOPED_TRACE(name);
    runDirectAllToAllv(name);
  }
}

}  // namespace
