// One checked collective call on every rank of a thread clique: random inputs
// (from `seed`), poisoned outputs plus one poisoned byte past the end, the
// placement the API defines for in-place, an independent reference, and a
// check that out-of-place calls leave sendbuff alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "collie.h"
#include "common/rank_threads.h"
#include "common/test_util.h"

namespace collie {
namespace test {

/// Where the buffers of a case live. kDevice: each rank's buffers are copied
/// to the current GPU, the call goes on a stream of its own, and the results
/// come back for the same checks (the CUDA backend's tests).
enum class Memory { kHost, kDevice };

/// While one lives, RankBuffers::run fails a device call whose enqueue waited on the host, where the fake
/// CUDA runtime counts such waits (fakecudaHostWaitsOfThisThread, tests/fake_cuda/fake_cuda.h; nothing is
/// checked on real CUDA). On a GPU such a wait can deadlock: what it waits for may sit in a hardware queue
/// behind a peer's kernel that waits for this rank's launch. Not for calls that are allowed to block (the
/// staged path, docs/cuda-executor.md).
class ExpectNoHostWaits {
 public:
  ExpectNoHostWaits();
  ~ExpectNoHostWaits();
  ExpectNoHostWaits(const ExpectNoHostWaits&) = delete;
  ExpectNoHostWaits& operator=(const ExpectNoHostWaits&) = delete;
};

/// Where every rank's buffers of one call live, for calls with buffers of their own shape (all-to-all-v,
/// send/recv): kHost, the host vectors themselves; kDevice, a twin of each on the rank's GPU, a stream per
/// rank, and the twins copied back at the end, so the host checks apply unchanged.
class RankBuffers {
 public:
  RankBuffers(const Comms& comms, Memory memory);
  ~RankBuffers();
  RankBuffers(const RankBuffers&) = delete;
  RankBuffers& operator=(const RankBuffers&) = delete;

  /// What rank r's call names for `host` (null when it is empty): the vector's data, or its device twin,
  /// filled from it now. Call before run().
  void* at(int r, std::vector<char>& host);
  /// Makes every rank's call at once (a thread each) on its stream (null on the host), then waits for the
  /// streams of the ranks whose call succeeded. On a GPU, says on stderr when a call took over 0.1 s to return.
  void run(const std::function<collieResult_t(int, collieStream_t)>& call, std::vector<collieResult_t>* rc);
  /// Copies every twin back into its host vector; "" or what went wrong: a CUDA error, the ranks' async errors.
  std::string finish();

 private:
  // Keeps the first CUDA error (a cudaError_t) in err_ with what failed; whether `e` is success.
  bool check(int e, const char* what);

  struct Twin {
    int rank;
    std::vector<char>* host;
    void* device;
  };
  const Comms& comms_;
  Memory memory_;
  std::vector<void*> streams_;  // cudaStream_t per rank, kDevice only
  std::vector<Twin> twins_;
  std::string err_;  // the first CUDA error
};

/// Returns "" when every rank's result is exact, else a sentence saying which rank went wrong and how.
std::string runCollectiveCase(const Comms& comms, Coll coll, collieDataType_t type, collieRedOp_t op, size_t count,
                              bool inPlace, int root, uint64_t seed, Memory memory = Memory::kHost);

/// A sweep of one collective on `comms`: the types of sweepTypes(nranks, tinySlots), operators rotated
/// (sweepTakesOp), each of `counts` out of place and in place where the collective has it; `rootOf(index)`
/// gives each case's root, index counting every (type, op, count, placement) of the product from 1. Returns ""
/// or the first failing case, named with `label` and the seed; *cases counts the cases run.
std::string runSweep(const Comms& comms, Coll coll, bool tinySlots, const std::vector<size_t>& counts,
                     const std::function<int(int index)>& rootOf, uint64_t seed, const std::string& label, int* cases);

}  // namespace test
}  // namespace collie
