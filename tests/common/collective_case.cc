#include "common/collective_case.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/rank_threads.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"

namespace collie {
namespace test {

namespace {

// Mirrors every rank's host buffers on the GPU, runs the call there (one
// stream per rank), and copies the buffers back, so the host checks apply
// unchanged. send/recv point into in/out; their device twins keep the offsets.
std::string runOnDevice(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count, int root,
                        std::vector<std::vector<char>>& in, std::vector<std::vector<char>>& out,
                        const std::vector<char*>& send, const std::vector<char*>& recv,
                        std::vector<collieResult_t>* rc) {
  const int n = comms.size();
  std::vector<char*> din(n, nullptr), dout(n, nullptr);
  std::vector<cudaStream_t> streams(n, nullptr);
  std::string err;
  auto check = [&](cudaError_t e, const char* what) {
    if (e != cudaSuccess && err.empty()) err = std::string(what) + ": " + cudaGetErrorString(e);
    return e == cudaSuccess;
  };
  auto twin = [&](int r, char* p) -> void* {
    if (p >= in[r].data() && p <= in[r].data() + in[r].size()) return din[r] + (p - in[r].data());
    return dout[r] + (p - out[r].data());
  };
  for (int r = 0; r < n && err.empty(); ++r) {
    int device = 0;
    collieCommCuDevice(comms[r], &device);
    check(cudaSetDevice(device), "cudaSetDevice");
    check(cudaMalloc(&din[r], in[r].size()), "cudaMalloc") && check(cudaMalloc(&dout[r], out[r].size()), "cudaMalloc");
    check(cudaMemcpy(din[r], in[r].data(), in[r].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaMemcpy(dout[r], out[r].data(), out[r].size(), cudaMemcpyHostToDevice), "cudaMemcpy");
    check(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), "cudaStreamCreate");
    // From pageable memory cudaMemcpy may return before the copy lands, and the calls run on
    // non-blocking streams: wait for this device's legacy stream.
    check(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize");
  }
  if (err.empty()) {
    onRanks(n, [&](int r) {
      int device = 0;
      collieCommCuDevice(comms[r], &device);
      cudaSetDevice(device);
      void* s = count ? twin(r, send[r]) : nullptr;
      void* d = count ? twin(r, recv[r]) : nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      (*rc)[r] = collie::test::callCollective(coll, s, d, count, type, op, root, comms[r], streams[r]);
      // Peers' kernels wait for this rank's while it enqueues: a slow enqueue explains a timeout.
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (took > 0.1) fprintf(stderr, "rank %d: the call took %.3f s to return\n", r, took);
      if ((*rc)[r] == collieSuccess) cudaStreamSynchronize(streams[r]);
    });
  }
  std::string async;
  for (int r = 0; r < n; ++r) {
    if (err.empty()) {
      check(cudaMemcpy(in[r].data(), din[r], in[r].size(), cudaMemcpyDeviceToHost), "cudaMemcpy back");
      check(cudaMemcpy(out[r].data(), dout[r], out[r].size(), cudaMemcpyDeviceToHost), "cudaMemcpy back");
    }
    // Every rank's: where each one waited shows a cycle, or which rank never came.
    collieResult_t rcAsync = collieSuccess;
    collieCommGetAsyncError(comms[r], &rcAsync);
    if (rcAsync != collieSuccess)
      async +=
          (async.empty() ? "" : "; ") + ("rank " + std::to_string(r) + " async error: ") + collieGetLastError(comms[r]);
    if (streams[r]) cudaStreamDestroy(streams[r]);
    cudaFree(din[r]);
    cudaFree(dout[r]);
  }
  if (async.empty() || err.empty()) return err + async;
  return err + "; " + async;
}

}  // namespace

std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed, Memory memory) {
  const int n = comms.size();
  const size_t es = collie::typeSize(type), block = count * es;
  const size_t inCount = collie::test::collInputCount(coll, n, count);
  const size_t outCount = collie::test::collOutputCount(coll, n, count);
  std::vector<std::vector<char>> in(n, std::vector<char>(inCount * es + 1)),
      out(n, std::vector<char>(outCount * es + 1));
  std::vector<const void*> inputs;
  for (int r = 0; r < n; ++r) {
    collie::test::fillInput(type, op, r, seed, in[r].data(), inCount);
    inputs.push_back(in[r].data());
  }
  std::vector<std::vector<char>> want(n, std::vector<char>(outCount * es + 1));
  for (int r = 0; r < n; ++r) collie::test::referenceCollective(coll, type, op, inputs, count, root, r, want[r].data());
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
  if (memory == Memory::kDevice) {
    std::string err = runOnDevice(comms, coll, type, op, count, root, in, out, send, recv, &rc);
    if (!err.empty()) return err;
  } else {
    onRanks(n, [&](int r) {
      void* s = count ? send[r] : nullptr;
      void* d = count ? recv[r] : nullptr;
      rc[r] = collie::test::callCollective(coll, s, d, count, type, op, root, comms[r]);
    });
  }
  for (int r = 0; r < n; ++r) {
    if (rc[r] != collieSuccess) return "rank " + std::to_string(r) + ": " + collieGetLastError(comms[r]);
    // In place, the output holds the input (scatter/reduce-scatter) or the input
    // sits in the output; out of place both are checked separately.
    const bool aliased = inPlace && !((coll == Coll::kGather || coll == Coll::kScatter) && r != root);
    if (!aliased && out[r].back() != 0x7b) return "rank " + std::to_string(r) + " wrote past the end of recvbuff";
    if (!aliased && in[r] != inCopy[r]) return "rank " + std::to_string(r) + " modified sendbuff";
    if (collie::test::collRootOutputOnly(coll) && r != root) {
      // recvbuff is the root's only: it must come back untouched.
      if (out[r] != outBefore[r]) return "rank " + std::to_string(r) + " wrote recvbuff off the root";
      continue;
    }
    std::string first;
    const bool oneBlock = coll == Coll::kReduceScatter || coll == Coll::kScatter;
    const size_t wrong = collie::test::countWrong(type, recv[r], want[r].data(), oneBlock ? count : outCount, &first);
    if (wrong) return "rank " + std::to_string(r) + ": " + std::to_string(wrong) + " wrong, " + first;
  }
  return "";
}

}  // namespace test
}  // namespace collie
