// Pre-multiplied sums on the CUDA backend, ranks as threads sharing the GPU: allreduce, reduce and
// reduce-scatter, every type, in place and out of place, counts 0, 1, odd and (float32) in several rounds with
// sends read in place, scalars host-immediate and in device memory. The executor scales each rank's input
// into a buffer of its own as part of the launch (executor/cuda_executor.cc, scaleInput), so these also check
// that buffer: grown from call to call, read in place by peers, ordered after the previous call on another
// stream, and rescaled at each replay of a captured call with the device scalar of that time.
// Every test skips, saying why, when no GPU is usable.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "collie.h"
#include "common/premulsum_case.h"
#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_skip.h"

namespace {

using collie::test::ScopedEnv;
using collie::test::timeoutSeconds;
using collie::test::premul::inputOf;
using collie::test::premul::Kind;
using collie::test::premul::kindName;
using collie::test::premul::referenceAt;
using collie::test::premul::scalarOf;

// Keeps the first CUDA failure in *err, as "what: error"; returns whether `e` is a success.
bool keepFirst(std::string* err, cudaError_t e, const char* what) {
  if (e != cudaSuccess && err->empty()) *err = std::string(what) + ": " + cudaGetErrorString(e);
  return e == cudaSuccess;
}

// One case: one thread queues every rank's call in one group, each on its rank's stream (`streams[r]`; odd
// cases on the second, so consecutive calls of a communicator change streams), destroying each operator right
// after its call. Device scalars are in device memory, written before the group.
template <typename T>
std::string runCase(const collie::test::Comms& comms, const std::vector<cudaStream_t>& streams, collieDataType_t type,
                    Kind kind, size_t count, bool inPlace, collieScalarResidence_t residence, uint64_t seed) {
  const int n = comms.size();
  const size_t inCount = kind == Kind::kReduceScatter ? count * static_cast<size_t>(n) : count;
  const size_t inBytes = inCount * sizeof(T), outBytes = count * sizeof(T);
  const int root = n - 1;
  std::vector<std::vector<T>> inputs(static_cast<size_t>(n));
  std::vector<T*> in(static_cast<size_t>(n), nullptr), out(static_cast<size_t>(n), nullptr),
      deviceScalar(static_cast<size_t>(n), nullptr);
  std::vector<T> scalars(static_cast<size_t>(n));
  std::string err;
  auto check = [&](cudaError_t e, const char* what) { return keepFirst(&err, e, what); };
  for (int r = 0; r < n && err.empty(); ++r) {
    inputs[r] = inputOf<T>(type, r, seed, inCount);
    scalars[r] = scalarOf<T>(r);
    // One byte at least, so that count 0 still has buffers to name.
    check(cudaMalloc(&in[r], inBytes + 1), "cudaMalloc");
    check(cudaMalloc(&out[r], outBytes + 1), "cudaMalloc");
    check(cudaMalloc(&deviceScalar[r], sizeof(T)), "cudaMalloc");
    if (!err.empty()) break;
    check(cudaMemcpy(in[r], inputs[r].data(), inBytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemset(out[r], 0xff, outBytes + 1), "cudaMemset");  // poison
    check(cudaMemcpy(deviceScalar[r], &scalars[r], sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  // A cudaMemcpy from pageable memory may return before the device has it, and the calls go on non-blocking
  // streams, which do not wait for it: wait here.
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (err.empty()) {
    std::vector<collieRedOp_t> ops(static_cast<size_t>(n));
    for (int r = 0; r < n && err.empty(); ++r) {
      void* scalar = residence == collieScalarDevice ? static_cast<void*>(deviceScalar[r]) : &scalars[r];
      if (collieRedOpCreatePreMulSum(&ops[r], scalar, type, residence, comms[r]) != collieSuccess)
        err = std::string("create: ") + collieGetLastError(comms[r]);
    }
    if (err.empty() && collieGroupStart() != collieSuccess) err = "group start";
    for (int r = 0; r < n && err.empty(); ++r) {
      T* recv = inPlace ? (kind == Kind::kReduceScatter ? in[r] + static_cast<size_t>(r) * count : in[r]) : out[r];
      collieResult_t rc = collieSuccess;
      if (kind == Kind::kAllReduce) rc = collieAllReduce(in[r], recv, count, type, ops[r], comms[r], streams[r]);
      if (kind == Kind::kReduce) rc = collieReduce(in[r], recv, count, type, ops[r], root, comms[r], streams[r]);
      if (kind == Kind::kReduceScatter)
        rc = collieReduceScatter(in[r], recv, count, type, ops[r], comms[r], streams[r]);
      if (rc != collieSuccess) err = std::string("enqueue: ") + collieGetLastError(comms[r]);
      if (err.empty() && collieRedOpDestroy(ops[r], comms[r]) != collieSuccess)
        err = std::string("destroy: ") + collieGetLastError(comms[r]);
    }
    if (err.empty() && collieGroupEnd() != collieSuccess)
      err = std::string("group end: ") + collieGetLastError(nullptr);
    for (int r = 0; r < n; ++r) check(cudaStreamSynchronize(streams[r]), "cudaStreamSynchronize");
  }
  for (int r = 0; r < n && err.empty(); ++r) {
    if (kind == Kind::kReduce && r != root) continue;
    const size_t base = kind == Kind::kReduceScatter ? static_cast<size_t>(r) * count : 0;
    std::vector<T> got(count), want(count), sent(inCount);
    const T* from = inPlace ? in[r] + base : out[r];
    if (!check(cudaMemcpy(got.data(), from, outBytes, cudaMemcpyDeviceToHost), "cudaMemcpy")) break;
    for (size_t i = 0; i < count; ++i) want[i] = referenceAt<T>(type, inputs, base + i);
    std::string first;
    const size_t wrong = collie::test::countWrong(type, got.data(), want.data(), count, &first);
    if (wrong != 0) err = "rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong, first " + first;
    // The scaling goes to a buffer of the executor's: the caller's input stays as it was.
    if (err.empty() && !inPlace && inCount > 0 &&
        check(cudaMemcpy(sent.data(), in[r], inBytes, cudaMemcpyDeviceToHost), "cudaMemcpy") &&
        memcmp(sent.data(), inputs[r].data(), inBytes) != 0)
      err = "rank " + std::to_string(r) + ": sendbuff changed";
  }
  for (int r = 0; r < n; ++r) {
    cudaFree(in[r]);
    cudaFree(out[r]);
    cudaFree(deviceScalar[r]);
  }
  return err;
}

// runCase for the C++ type of `type`.
std::string runTypeCase(const collie::test::Comms& comms, const std::vector<cudaStream_t>& streams,
                        collieDataType_t type, Kind kind, size_t count, bool inPlace, collieScalarResidence_t residence,
                        uint64_t seed) {
  std::string err;
  collie::visitType(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    err = runCase<T>(comms, streams, type, kind, count, inPlace, residence, seed);
  });
  return err;
}

TEST(PreMulSumGpu, EveryTypeCollectiveAndPlacement) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  const int n = 3;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  std::vector<cudaStream_t> first(n), second(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&first[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&second[r], cudaStreamNonBlocking), cudaSuccess);
  }
  int cases = 0;
  for (collieDataType_t type : collie::test::allTypes()) {
    // Several rounds and sends read in place (from 128 KiB) for one type of each width class: the buffer grows.
    std::vector<size_t> counts = {0, 1, 1013};
    if (type == collieFloat32 || type == collieBfloat16) counts.push_back(300007);
    for (Kind kind : {Kind::kAllReduce, Kind::kReduce, Kind::kReduceScatter}) {
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          const collieScalarResidence_t residence =
              (count + (inPlace ? 1 : 0)) % 2 == 0 ? collieScalarHostImmediate : collieScalarDevice;
          const std::string err =
              runTypeCase(comms, cases % 2 == 0 ? first : second, type, kind, count, inPlace, residence, seed);
          ++cases;
          ASSERT_EQ(err, "") << kindName(kind) << " " << collie::typeName(type) << " n " << n << " count " << count
                             << (inPlace ? " in-place" : "")
                             << (residence == collieScalarDevice ? " device scalar" : " host scalar") << " (seed "
                             << seed << ")";
        }
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    cudaStreamDestroy(first[r]);
    cudaStreamDestroy(second[r]);
  }
}

// The same on the direct kernels (COLLIE_ALGO; executor/cuda_executor.h, "Direct algorithms"): the one-shot scales
// each rank's input inside its kernel (DirectArgs::premul), the two-shot allreduce and the reduce-scatter read the
// executor's scaled copies of their peers' inputs, whose addresses the peers publish at the entry barrier.
TEST(PreMulSumGpu, OnTheDirectKernels) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const uint64_t seed = collie::test::testSeed();
  const int n = 3;
  int cases = 0;
  for (const char* spec : {"allreduce:direct_oneshot;reducescatter:direct", "allreduce:direct_twoshot"}) {
    ScopedEnv algo("COLLIE_ALGO", spec);
    collie::test::Comms comms(n);
    ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
    std::vector<cudaStream_t> streams(n);
    for (int r = 0; r < n; ++r) ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    for (collieDataType_t type : collie::test::sweepTypes())
      for (Kind kind : {Kind::kAllReduce, Kind::kReduceScatter})
        for (size_t count : {size_t{0}, size_t{1013}})
          for (bool inPlace : {false, true}) {
            const collieScalarResidence_t residence = ++cases % 2 == 0 ? collieScalarHostImmediate : collieScalarDevice;
            const std::string err = runTypeCase(comms, streams, type, kind, count, inPlace, residence, seed);
            ASSERT_EQ(err, "") << spec << ": " << kindName(kind) << " " << collie::typeName(type) << " count " << count
                               << (inPlace ? " in-place" : "")
                               << (residence == collieScalarDevice ? " device scalar" : " host scalar") << " (seed "
                               << seed << ")";
          }
    for (int r = 0; r < n; ++r) cudaStreamDestroy(streams[r]);
  }
}

// A captured pre-multiplied sum with a device scalar: each replay scales with the scalar's value at that
// replay, and an eager call on another stream after the replays still scales its own input.
TEST(PreMulSumGpu, ADeviceScalarIsReadAtEachGraphReplay) {
  SKIP_WITHOUT_GPU();
  ScopedEnv device("COLLIE_DEVICE", "cuda");
  ScopedEnv timeout("COLLIE_TIMEOUT", timeoutSeconds().c_str());
  const int n = 2;
  const size_t count = 50000;
  collie::test::Comms comms(n);
  ASSERT_EQ(comms.result, collieSuccess) << collieGetLastError(nullptr);
  // Buffers, streams and inputs made here: once a rank captures, another rank's device-wide calls would fail
  // (its cudaDeviceSynchronize, or a cudaMemcpy on the legacy stream, would take in the capturing stream).
  struct Rank {
    float *in = nullptr, *out = nullptr, *scalar = nullptr;
    cudaStream_t s = nullptr, other = nullptr;
  };
  std::vector<Rank> ranks(n);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cudaMalloc(&ranks[r].in, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ranks[r].out, count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ranks[r].scalar, sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&ranks[r].s, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&ranks[r].other, cudaStreamNonBlocking), cudaSuccess);
    const std::vector<float> input(count, static_cast<float>(r + 1));  // rank r's input: r + 1 everywhere
    ASSERT_EQ(cudaMemcpy(ranks[r].in, input.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::string> errors(n);
  collie::test::onRanks(n, [&](int r) {
    cudaSetDevice(0);
    float *in = ranks[r].in, *out = ranks[r].out, *scalar = ranks[r].scalar;
    cudaStream_t s = ranks[r].s, other = ranks[r].other;
    std::string& err = errors[r];
    auto check = [&](cudaError_t e, const char* what) { return keepFirst(&err, e, what); };
    collieRedOp_t op = collieSum;
    if (err.empty() &&
        collieRedOpCreatePreMulSum(&op, scalar, collieFloat32, collieScalarDevice, comms[r]) != collieSuccess)
      err = std::string("create: ") + collieGetLastError(comms[r]);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (err.empty()) {
      check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
      const collieResult_t rc = collieAllReduce(in, out, count, collieFloat32, op, comms[r], s);
      const bool ended = check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
      if (rc != collieSuccess && err.empty()) err = std::string("captured call: ") + collieGetLastError(comms[r]);
      if (ended && err.empty()) check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    }
    std::vector<float> got(count);
    // Both ranks' scalars are k at replay k: the result is k * (1 + 2) = 3k. Only work on this rank's streams.
    for (int replay = 1; replay <= 3 && err.empty(); ++replay) {
      const float k = static_cast<float>(replay);
      check(cudaMemcpyAsync(scalar, &k, sizeof(float), cudaMemcpyHostToDevice, s), "cudaMemcpyAsync");
      check(cudaMemsetAsync(out, 0xff, count * sizeof(float), s), "cudaMemsetAsync");
      check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
      // Waited for before the copy back is queued, as in AllReduceInCudaGraph: queued right behind the call, it
      // could hold back a peer's call in a hardware queue both share (docs/cuda-executor.md, "Ranks sharing
      // hardware queues").
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      check(cudaMemcpyAsync(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      for (size_t i = 0; i < count && err.empty(); i += 997)
        if (got[i] != 3 * k)
          err = "replay " + std::to_string(replay) + ": element " + std::to_string(i) + " is " +
                std::to_string(got[i]) + ", expected " + std::to_string(3 * k);
    }
    // Eager, on another stream, in place: 5 * (1 + 2) = 15. Its scaling must come after the last replay's.
    if (err.empty()) {
      const float k = 5;
      check(cudaMemcpyAsync(scalar, &k, sizeof(float), cudaMemcpyHostToDevice, other), "cudaMemcpyAsync");
      if (collieAllReduce(in, in, count, collieFloat32, op, comms[r], other) != collieSuccess)
        err = std::string("eager call: ") + collieGetLastError(comms[r]);
      check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
      check(cudaMemcpyAsync(got.data(), in, count * sizeof(float), cudaMemcpyDeviceToHost, other), "cudaMemcpyAsync");
      check(cudaStreamSynchronize(other), "cudaStreamSynchronize");
      if (err.empty() && (got[0] != 15.0f || got[count - 1] != 15.0f))
        err = "eager call after replays: " + std::to_string(got[0]) + ", expected 15";
    }
    if (op != collieSum) collieRedOpDestroy(op, comms[r]);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    cudaStreamSynchronize(ranks[r].s);
    cudaStreamSynchronize(ranks[r].other);
    cudaStreamDestroy(ranks[r].s);
    cudaStreamDestroy(ranks[r].other);
    cudaFree(ranks[r].in);
    cudaFree(ranks[r].out);
    cudaFree(ranks[r].scalar);
  }
}

}  // namespace
