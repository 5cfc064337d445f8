#include "common/collective_case.h"

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

// The fake CUDA runtime's count of this thread's host waits (tests/fake_cuda/fake_cuda.h); absent on real CUDA.
extern "C" unsigned long long fakecudaHostWaitsOfThisThread(void) __attribute__((weak));

namespace collie {
namespace test {

namespace {

// The rank's GPU current on this thread.
void useDeviceOf(collieComm_t comm) {
  int device = 0;
  collieCommCuDevice(comm, &device);
  cudaSetDevice(device);
}

std::atomic<int> gExpectNoHostWaits{0};

}  // namespace

ExpectNoHostWaits::ExpectNoHostWaits() { ++gExpectNoHostWaits; }
ExpectNoHostWaits::~ExpectNoHostWaits() { --gExpectNoHostWaits; }

// On a GPU every rank gets its stream here, also a rank with no buffer (a group of zero-length sends): a call of
// ranks sharing a GPU on the legacy default stream would be refused, or wait for its peers' kernels.
RankBuffers::RankBuffers(const Comms& comms, Memory memory)
    : comms_(comms), memory_(memory), streams_(static_cast<size_t>(comms.size()), nullptr) {
  if (memory_ != Memory::kDevice) return;
  for (int r = 0; r < comms_.size() && err_.empty(); ++r) {
    useDeviceOf(comms_[r]);
    cudaStream_t s = nullptr;
    if (check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"))
      streams_[static_cast<size_t>(r)] = s;
  }
}

RankBuffers::~RankBuffers() {
  for (const Twin& t : twins_) cudaFree(t.device);
  for (void* s : streams_)
    if (s != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(s));
}

bool RankBuffers::check(int e, const char* what) {
  if (e != cudaSuccess && err_.empty())
    err_ = std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(e));
  return e == cudaSuccess;
}

void* RankBuffers::at(int r, std::vector<char>& host) {
  if (host.empty()) return nullptr;
  if (memory_ == Memory::kHost) return host.data();
  useDeviceOf(comms_[r]);
  void* d = nullptr;
  if (!check(cudaMalloc(&d, host.size()), "cudaMalloc")) return nullptr;
  twins_.push_back({r, &host, d});
  check(cudaMemcpy(d, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  // From pageable memory cudaMemcpy may return before the copy lands, and the calls run on
  // non-blocking streams: wait for this device's legacy stream.
  check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  return d;
}

void RankBuffers::run(const std::function<collieResult_t(int, collieStream_t)>& call, std::vector<collieResult_t>* rc) {
  const bool device = memory_ == Memory::kDevice;
  if (device && !err_.empty()) {  // a twin is missing: no call
    rc->assign(static_cast<size_t>(comms_.size()), collieInternalError);
    return;
  }
  const bool countWaits = device && gExpectNoHostWaits > 0 && fakecudaHostWaitsOfThisThread != nullptr;
  std::vector<unsigned long long> waits(static_cast<size_t>(comms_.size()), 0);
  onRanks(comms_.size(), [&](int r) {
    if (device) useDeviceOf(comms_[r]);
    cudaStream_t stream = static_cast<cudaStream_t>(streams_[static_cast<size_t>(r)]);
    const auto t0 = std::chrono::steady_clock::now();
    const unsigned long long before = countWaits ? fakecudaHostWaitsOfThisThread() : 0;
    (*rc)[r] = call(r, stream);
    if (countWaits) waits[static_cast<size_t>(r)] = fakecudaHostWaitsOfThisThread() - before;
    // Peers' kernels wait for this rank's while it enqueues: a slow enqueue explains a timeout.
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (device && took > 0.1) fprintf(stderr, "rank %d: the call took %.3f s to return\n", r, took);
    if (device && (*rc)[r] == collieSuccess) cudaStreamSynchronize(stream);
  });
  for (int r = 0; r < comms_.size() && err_.empty(); ++r)
    if (waits[static_cast<size_t>(r)] != 0)
      err_ = "rank " + std::to_string(r) + "'s call waited on the host " +
             std::to_string(waits[static_cast<size_t>(r)]) + " time(s) before returning";
}

std::string RankBuffers::finish() {
  if (memory_ == Memory::kHost) return "";
  for (const Twin& t : twins_) {
    if (!err_.empty()) break;
    useDeviceOf(comms_[t.rank]);
    check(cudaMemcpy(t.host->data(), t.device, t.host->size(), cudaMemcpyDeviceToHost), "cudaMemcpy back");
  }
  // Every rank's: where each one waited shows a cycle, or which rank never came.
  std::string async;
  for (int r = 0; r < comms_.size(); ++r) {
    collieResult_t rcAsync = collieSuccess;
    collieCommGetAsyncError(comms_[r], &rcAsync);
    if (rcAsync != collieSuccess)
      async += (async.empty() ? "" : "; ") + ("rank " + std::to_string(r) + " async error: ") +
               collieGetLastError(comms_[r]);
  }
  if (async.empty() || err_.empty()) return err_ + async;
  return err_ + "; " + async;
}

std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed, Memory memory) {
  const int n = comms.size();
  const size_t es = collie::typeSize(type), block = count * es;
  const size_t inCount = collie::test::collInputCount(coll, n, count);
  const size_t outCount = collie::test::collOutputCount(coll, n, count);
  std::vector<std::vector<char>> in(n, std::vector<char>(inCount * es + 1)),
      out(n, std::vector<char>(outCount * es + 1));
  std::vector<const void*> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(in[r].data());
  // Inputs, references and checks of a case of 1 Mi elements take seconds on one core (8 ranks, the 8-bit
  // floats): one thread per rank, and an allreduce's reference, the same on every rank, reduced once.
  onRanks(n, [&](int r) { collie::test::fillInput(type, op, r, seed, in[r].data(), inCount); });
  std::vector<std::vector<char>> want(n, std::vector<char>(outCount * es + 1));
  const bool sameEverywhere = coll == Coll::kAllReduce || coll == Coll::kReduce;
  onRanks(sameEverywhere ? 1 : n,
          [&](int r) { collie::test::referenceCollective(coll, type, op, inputs, count, root, r, want[r].data()); });
  for (int r = 1; sameEverywhere && r < n; ++r) want[r] = want[0];
  // In place: the input lives inside the output where the API says so.
  std::vector<char*> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    collie::test::poison(out[r].data(), out[r].size());
    recv[r] = out[r].data();
    send[r] = in[r].data();
    if (!inPlace) continue;
    // Gather and scatter are in place on the root only; elsewhere they are as out of place.
    const bool rootOnly = coll == Coll::kGather || coll == Coll::kScatter;
    const int at = rootOnly ? root : r;  // the block the in-place rule names
    if (rootOnly && r != root) continue;
    if (coll == Coll::kReduceScatter || coll == Coll::kScatter) {
      out[r] = in[r];  // recvbuff = sendbuff + at * count
      recv[r] = out[r].data() + at * block;
      send[r] = out[r].data();
    } else if (coll == Coll::kAllGather || coll == Coll::kGather) {
      memcpy(out[r].data() + at * block, in[r].data(), block);  // sendbuff = recvbuff + at * count
      send[r] = out[r].data() + at * block;
    } else {
      memcpy(out[r].data(), in[r].data(), block);
      send[r] = out[r].data();
    }
  }
  const std::vector<std::vector<char>> inCopy = in;  // out-of-place must leave sendbuff alone
  const std::vector<std::vector<char>> outBefore = out;
  std::vector<collieResult_t> rc(n);
  {
    // send and recv point into in and out; their twins keep the offsets.
    RankBuffers bufs(comms, memory);
    std::vector<char*> inAt(n), outAt(n);
    for (int r = 0; r < n; ++r) {
      inAt[r] = static_cast<char*>(bufs.at(r, in[r]));
      outAt[r] = static_cast<char*>(bufs.at(r, out[r]));
    }
    auto twin = [&](int r, char* p) -> void* {
      // `<`: the end of in[r] may be where out[r] begins (an allocator that keeps no header between blocks, as
      // ThreadSanitizer's); with `<=` an in-place call's buffer there went to past the end of in's twin.
      if (p >= in[r].data() && p < in[r].data() + in[r].size()) return inAt[r] + (p - in[r].data());
      return outAt[r] + (p - out[r].data());
    };
    bufs.run(
        [&](int r, collieStream_t stream) {
          return collie::test::callCollective(coll, count ? twin(r, send[r]) : nullptr,
                                              count ? twin(r, recv[r]) : nullptr, count, type, op, root, comms[r],
                                              stream);
        },
        &rc);
    const std::string err = bufs.finish();
    if (!err.empty()) return err;
  }
  std::vector<std::string> wrong(n);
  onRanks(n, [&](int r) {
    if (rc[r] != collieSuccess) {
      wrong[r] = "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
      return;
    }
    // In place, the output holds the input (scatter/reduce-scatter) or the input
    // sits in the output; out of place both are checked separately.
    const bool aliased = inPlace && !((coll == Coll::kGather || coll == Coll::kScatter) && r != root);
    if (!aliased && out[r].back() != 0x7b) {
      wrong[r] = "rank " + std::to_string(r) + " wrote past the end of recvbuff";
    } else if (!aliased && in[r] != inCopy[r]) {
      wrong[r] = "rank " + std::to_string(r) + " modified sendbuff";
    } else if (collie::test::collRootOutputOnly(coll) && r != root) {
      // recvbuff is the root's only: it must come back untouched.
      if (out[r] != outBefore[r]) wrong[r] = "rank " + std::to_string(r) + " wrote recvbuff off the root";
    } else {
      std::string first;
      const bool oneBlock = coll == Coll::kReduceScatter || coll == Coll::kScatter;
      const size_t bad = collie::test::countWrong(type, recv[r], want[r].data(), oneBlock ? count : outCount, &first);
      if (bad) wrong[r] = "rank " + std::to_string(r) + ": " + std::to_string(bad) + " wrong, " + first;
    }
  });
  for (const std::string& w : wrong)
    if (!w.empty()) return w;
  return "";
}

std::string runSweep(const Comms& comms, Coll coll, bool tinySlots, const std::vector<size_t>& counts,
                     const std::function<int(int index)>& rootOf, uint64_t seed, const std::string& label, int* cases) {
  const int nranks = comms.size();
  int index = 0;
  *cases = 0;
  for (collieDataType_t type : sweepTypes(nranks, tinySlots)) {
    for (collieRedOp_t op : allOps()) {
      if (!collHasOp(coll) && op != collieSum) continue;
      for (size_t count : counts) {
        for (bool inPlace : {false, true}) {
          ++index;
          if (inPlace && !collHasInPlace(coll)) continue;
          // Off the full product: one operator per (type, count, placement) unless the type takes all.
          if (collHasOp(coll) && !sweepTakesOp(type, op, count + (inPlace ? 1 : 0))) continue;
          const int root = rootOf(index);
          const std::string err = runCollectiveCase(comms, coll, type, op, count, inPlace, root, seed);
          if (!err.empty())
            return label + " nranks " + std::to_string(nranks) + " " + typeName(type) + " " + opName(op) + " count " +
                   std::to_string(count) + " root " + std::to_string(root) + (inPlace ? " in-place" : " out-of-place") +
                   (tinySlots ? " tiny slots" : "") + " (seed " + std::to_string(seed) + "): " + err;
          ++*cases;
        }
      }
    }
  }
  return "";
}

}  // namespace test
}  // namespace collie
