// The direct kernels (executor/cuda_direct.cc) with ranks as processes sharing one GPU, started by collie-run:
// allreduce direct_oneshot and direct_twoshot, and reducescatter, allgather, alltoall(v) and broadcast direct, with
// every rank's buffers in windows (collieCommWindowRegister over collieMemAlloc or cudaMalloc memory, which the
// kernels reach in place), outside every window (copied through the communicator's staging buffer,
// COLLIE_DIRECT_STAGING), and mixed (rank 0's in a window, the others' not). Every rank makes every rank's input from
// the shared seed and computes its own reference; outputs are poisoned, results compared bit for bit, and the bytes
// after an output and an out-of-place input must come back untouched. Then the calls the direct path cannot take are
// refused on every rank, and the communicator takes the next call: a staged call larger than half the staging buffer, a
// one-shot call larger than its slots, windows no peer process can map, direct_ce (threads of one process only). The
// algorithms come from config.algo, the same on every rank by construction, so the program needs no COLLIE_ALGO.
// Last, the tuner with COLLIE_DIRECT_TUNE=1 on a communicator of its own, on calls that fit the staging buffer and
// calls that do not.
//   direct_gpu_mp --probe   exit 77 (skip), saying why, when no GPU is usable
//   direct_gpu_mp           the cases; exit 0 when all pass on this rank
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "collie.h"
#include "common/test_util.h"
#include "executor/reduce_ops.h"
#include "gpu/gpu_usable.h"
#include "kernels/direct_kernels.h"

namespace {

using collie::test::Coll;

// Allreduce's two-shot and every other collective's direct kernel; the one-shot is the first communicator's.
constexpr const char* kDirectAlgos =
    "allreduce:direct_twoshot;reducescatter:direct;allgather:direct;alltoall:direct;broadcast:direct;"
    "alltoallv:direct";
constexpr int kPoison = 0xA5;
// Bytes after each output that no call may write.
constexpr size_t kGuard = 64;
// The most bytes per rank a one-shot call holds: its slots' lines.
constexpr size_t kOneShotMostBytes = size_t{collie::kDirectSlotLines} * collie::kDirectLinePayload;

enum class Mode { kWindow, kStaged, kMixed };

const char* modeName(Mode m) { return m == Mode::kWindow ? "window" : m == Mode::kStaged ? "staged" : "mixed"; }

size_t roundUp(size_t x, size_t to) { return (x + to - 1) / to * to; }

// This rank, its stream and its tally.
struct Rank {
  int rank = 0, n = 1;
  uint64_t seed = 0;
  cudaStream_t stream = nullptr;
  int cases = 0, failures = 0;

  void fail(const std::string& what) {
    ++failures;
    // The first failures say what is wrong; a broken path would print one per case and rank.
    if (failures <= 20)
      fprintf(stderr, "FAIL rank %d/%d %s (seed %llu)\n", rank, n, what.c_str(), static_cast<unsigned long long>(seed));
  }
};

// A communicator, the allreduce algorithm config.algo names for it, and the other collectives'.
struct Comm {
  collieComm_t comm;
  const char* allreduce;
  const char* others = "direct";
};

// One call: which collective on which communicator, on which data, and where the buffers lie.
struct Case {
  Coll coll;
  const Comm* comm;
  collieDataType_t type;
  collieRedOp_t op;
  size_t count;
  bool inPlace;
  Mode mode;
  const char* placement;
  int root;

  std::string name() const {
    const char* algo = coll == Coll::kAllReduce ? comm->allreduce : comm->others;
    char s[256];
    snprintf(s, sizeof(s), "%s %s %s %s count %zu %s%s%s%s", collie::test::collName(coll), algo, collie::typeName(type),
             collie::opName(op), count, modeName(mode), placement, inPlace ? " in place" : "",
             coll == Coll::kBroadcast ? (" root " + std::to_string(root)).c_str() : "");
    return s;
  }
};

// Where this rank's buffers of a case lie: `in` for an out-of-place input, `out` for the output (in place, for
// both); each with room for any case's bytes and kGuard after them.
struct Place {
  char* in;
  char* out;
};

// Whether the call went wrong on the GPU (or a peer's did): then the communicator is broken, and the run stops.
bool brokenAfter(Rank& me, collieComm_t comm, cudaStream_t s, const std::string& what) {
  const cudaError_t e = cudaStreamSynchronize(s);
  collieResult_t async = collieSuccess;
  collieCommGetAsyncError(comm, &async);
  if (e == cudaSuccess && async == collieSuccess) return false;
  me.fail(what + ": failed on the GPU: " + (e != cudaSuccess ? cudaGetErrorString(e) : collieGetLastError(comm)));
  return true;
}

// Runs one case on this rank and checks it; false when the communicator can no longer be trusted.
bool runCase(Rank& me, const Case& c, const Place& at) {
  const int n = me.n;
  const size_t es = collie::typeSize(c.type), block = c.count * es;
  const size_t inCount = collie::test::collInputCount(c.coll, n, c.count);
  const size_t outCount = collie::test::collOutputCount(c.coll, n, c.count);
  std::vector<std::vector<char>> inputs(n, std::vector<char>(inCount * es + 1));
  std::vector<const void*> ptrs;
  for (int r = 0; r < n; ++r) {
    collie::test::fillInput(c.type, c.op, r, me.seed, inputs[r].data(), inCount);
    ptrs.push_back(inputs[r].data());
  }
  std::vector<char> want(outCount * es + 1);
  collie::test::referenceCollective(c.coll, c.type, c.op, ptrs, c.count, c.root, me.rank, want.data());
  // In place as NCCL lays it out: reduce-scatter's output is block `rank` of its input, allgather's input block
  // `rank` of its output, the others' input is their output.
  char* send = at.in;
  char* recv = at.out;
  size_t span = outCount * es;  // the output bytes poisoned before the call and read after
  if (c.inPlace) {
    send = at.out;
    if (c.coll == Coll::kReduceScatter) {
      recv = at.out + static_cast<size_t>(me.rank) * block;
      span = inCount * es;
    } else if (c.coll == Coll::kAllGather) {
      send = at.out + static_cast<size_t>(me.rank) * block;
    }
  }
  cudaMemset(at.out, kPoison, span + kGuard);
  cudaMemcpy(send, inputs[me.rank].data(), inCount * es, cudaMemcpyHostToDevice);
  ++me.cases;
  // bf16 calls go to the legacy default stream, as PyTorch's do, the others to ours. A staged call of nothing
  // passes no buffers, as callers of count 0 may.
  cudaStream_t s = c.type == collieBfloat16 ? nullptr : me.stream;
  const bool none = c.count == 0 && c.mode == Mode::kStaged;
  const collieResult_t rc = collie::test::callCollective(c.coll, none ? nullptr : send, none ? nullptr : recv, c.count,
                                                         c.type, c.op, c.root, c.comm->comm, s);
  if (rc != collieSuccess) {
    // Refused before anything was queued: the communicator is as it was.
    me.fail(c.name() + ": " + collieGetErrorString(rc) + ": " + collieGetLastError(c.comm->comm));
    return true;
  }
  if (brokenAfter(me, c.comm->comm, s, c.name())) return false;
  std::vector<char> got(span + kGuard);
  cudaMemcpy(got.data(), at.out, got.size(), cudaMemcpyDeviceToHost);
  std::string first;
  const size_t wrong = collie::test::countWrong(c.type, got.data() + (recv - at.out), want.data(), outCount, &first);
  if (wrong) me.fail(c.name() + ": " + std::to_string(wrong) + " wrong, " + first);
  for (size_t i = span; i < got.size(); ++i)
    if (static_cast<unsigned char>(got[i]) != kPoison) {
      me.fail(c.name() + ": wrote byte " + std::to_string(i - span) + " past the end of its output");
      break;
    }
  if (!c.inPlace) {
    std::vector<char> in(inCount * es);
    cudaMemcpy(in.data(), at.in, in.size(), cudaMemcpyDeviceToHost);
    if (memcmp(in.data(), inputs[me.rank].data(), in.size()) != 0) me.fail(c.name() + ": modified its input");
  }
  return true;
}

// An all-to-all-v on int32 with up to `count` elements from each rank to each, about a quarter of the pairs 0, each
// rank's blocks in peer order one element apart (off 16 bytes), made alike on every rank from the shared seed; the
// output's gaps and the bytes after it must come back untouched. False when the communicator can no longer be
// trusted.
bool runAllToAllv(Rank& me, const Comm& comm, size_t count, Mode mode, const Place& at, const char* placement) {
  const size_t n = static_cast<size_t>(me.n), r = static_cast<size_t>(me.rank);
  std::mt19937_64 rng(me.seed ^ (count * 0x9e3779b97f4a7c15ull) ^ static_cast<uint64_t>(mode));
  std::vector<std::vector<size_t>> m(n, std::vector<size_t>(n));
  for (auto& row : m)
    for (size_t& x : row) x = rng() % 4 == 0 ? 0 : rng() % (count + 1);
  auto lay = [&](const std::vector<size_t>& counts, std::vector<size_t>* displs) {
    size_t end = 0;
    for (size_t q = 0; q < n; ++q) {
      displs->push_back(end);
      if (counts[q] != 0) end += counts[q] + 1;
    }
    return end;
  };
  std::vector<size_t> sc = m[r], sd, rc, rd;
  for (size_t q = 0; q < n; ++q) rc.push_back(m[q][r]);
  const size_t inElems = lay(sc, &sd), outElems = lay(rc, &rd);
  // Element e of rank `from`'s block for rank `to`.
  auto value = [](size_t from, size_t to, size_t e) { return static_cast<int32_t>(from << 28 | to << 24 | e); };
  std::vector<int32_t> host(inElems, -2);
  for (size_t q = 0; q < n; ++q)
    for (size_t e = 0; e < sc[q]; ++e) host[sd[q] + e] = value(r, q, e);
  const size_t span = outElems * sizeof(int32_t);
  cudaMemset(at.out, kPoison, span + kGuard);
  cudaMemcpy(at.in, host.data(), inElems * sizeof(int32_t), cudaMemcpyHostToDevice);
  ++me.cases;
  char what[160];
  snprintf(what, sizeof(what), "alltoallv direct int32 counts up to %zu %s%s", count, modeName(mode), placement);
  const collieResult_t rcode =
      collieAllToAllv(at.in, sc.data(), sd.data(), at.out, rc.data(), rd.data(), collieInt32, comm.comm, me.stream);
  if (rcode != collieSuccess) {
    me.fail(std::string(what) + ": " + collieGetErrorString(rcode) + ": " + collieGetLastError(comm.comm));
    return true;
  }
  if (brokenAfter(me, comm.comm, me.stream, what)) return false;
  std::vector<char> got(span + kGuard);
  cudaMemcpy(got.data(), at.out, got.size(), cudaMemcpyDeviceToHost);
  std::vector<char> want(span + kGuard, static_cast<char>(kPoison));
  for (size_t q = 0; q < n; ++q)
    for (size_t e = 0; e < rc[q]; ++e) {
      const int32_t v = value(q, r, e);
      memcpy(want.data() + (rd[q] + e) * sizeof(int32_t), &v, sizeof(v));
    }
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) {
      me.fail(std::string(what) + ": output byte " + std::to_string(i) + " is wrong" +
              (i >= span ? " (past the end of its output)" : ""));
      break;
    }
  return true;
}

// Device memory of the cases of one count: a block from collieMemAlloc (or, `plainBlock`, from cudaMalloc, whose
// start the driver tells), a window inside it, and plain cudaMalloc buffers outside every window; each buffer
// holds `cap` bytes and kGuard after them.
struct Memory {
  Memory(size_t cap, bool atOffset, bool plainBlock = false) : plain(plainBlock) {
    const size_t slot = roundUp(cap + kGuard, 256);
    blockBytes = 2 * slot + 3 * 4096;
    void* p = nullptr;
    if ((plain ? cudaMalloc(&p, blockBytes) != cudaSuccess : collieMemAlloc(&p, blockBytes) != collieSuccess)) return;
    block = static_cast<char*>(p);
    if (!atOffset) {
      // The window is the block; the buffers start at its start.
      window = block;
      windowBytes = blockBytes;
      in = window;
      out = window + slot;
    } else {
      // The window lies inside the block, bytes of it on either side; the buffers at odd (element-aligned) offsets
      // inside the window.
      window = block + 4096 + 256;
      windowBytes = 2 * slot + 128;
      in = window + 24;
      out = in + slot + 40;
    }
    cudaMalloc(&plainIn, slot);
    cudaMalloc(&plainOut, slot);
  }
  ~Memory() {
    if (plain)
      cudaFree(block);
    else
      collieMemFree(block);
    cudaFree(plainIn);
    cudaFree(plainOut);
  }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  bool ok() const { return block != nullptr && plainIn != nullptr && plainOut != nullptr; }
  Place place(Mode m, int rank) const {
    const bool inWindow = m == Mode::kWindow || (m == Mode::kMixed && rank == 0);
    return inWindow ? Place{in, out} : Place{plainIn, plainOut};
  }

  bool plain = false;
  char* block = nullptr;
  size_t blockBytes = 0;
  char* window = nullptr;
  size_t windowBytes = 0;
  char *in = nullptr, *out = nullptr;
  char *plainIn = nullptr, *plainOut = nullptr;
};

// Every case of one count and mode on both communicators; false when a communicator broke.
bool runCount(Rank& me, const Comm& oneShot, const Comm& twoShot, size_t count, Mode mode, const Memory& mem,
              const char* placement) {
  const Place at = mem.place(mode, me.rank);
  int key = 0;
  for (const Comm* comm : {&oneShot, &twoShot}) {
    for (collieDataType_t type : {collieFloat32, collieBfloat16, collieInt32, collieInt8, collieFloat64}) {
      // The one-shot's largest call is the most its slots hold.
      const size_t most = kOneShotMostBytes / collie::typeSize(type);
      const size_t elems = comm == &oneShot && count > most ? most : count;
      for (collieRedOp_t op : {collieSum, collieMax})
        for (bool inPlace : {false, true})
          if (!runCase(me, Case{Coll::kAllReduce, comm, type, op, elems, inPlace, mode, placement, 0}, at))
            return false;
    }
  }
  for (Coll coll : {Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll, Coll::kBroadcast})
    for (collieDataType_t type : {collieFloat32, collieBfloat16, collieInt32}) {
      for (bool inPlace : {false, true}) {
        if (inPlace && !collie::test::collHasInPlace(coll)) continue;
        const int root = key++ % me.n;
        if (!runCase(me, Case{coll, &twoShot, type, collieSum, count, inPlace, mode, placement, root}, at))
          return false;
      }
    }
  return runAllToAllv(me, twoShot, count, mode, at, placement);
}

// Registers the window of `mem` on both communicators (collectively, in the same order on every rank).
bool registerWindows(Rank& me, const Comm* comms[2], const Memory& mem, collieWindow_t wins[2], size_t count) {
  bool ok = true;
  for (int i = 0; i < 2; ++i) {
    wins[i] = nullptr;
    const collieResult_t rc = collieCommWindowRegister(comms[i]->comm, mem.window, mem.windowBytes, &wins[i], 0);
    if (rc != collieSuccess) {
      me.fail("window register (count " + std::to_string(count) + "): " + collieGetErrorString(rc) + ": " +
              collieGetLastError(comms[i]->comm));
      ok = false;
    }
  }
  return ok;
}

void deregisterWindows(Rank& me, const Comm* comms[2], collieWindow_t wins[2]) {
  for (int i = 1; i >= 0; --i) {
    if (wins[i] == nullptr) continue;
    const collieResult_t rc = collieCommWindowDeregister(comms[i]->comm, wins[i]);
    if (rc != collieSuccess)
      me.fail(std::string("window deregister: ") + collieGetErrorString(rc) + ": " +
              collieGetLastError(comms[i]->comm));
  }
}

// A small staged allreduce, exact: the communicator works after what went before.
bool stillWorks(Rank& me, const Comm& comm, const char* after) {
  const size_t count = 1001, bytes = count * sizeof(float) + kGuard;
  char *in = nullptr, *out = nullptr;
  cudaMalloc(&in, bytes);
  cudaMalloc(&out, bytes);
  const int before = me.failures;
  const bool alive = runCase(
      me, Case{Coll::kAllReduce, &comm, collieFloat32, collieSum, count, false, Mode::kStaged, "", 0}, {in, out});
  cudaFree(in);
  cudaFree(out);
  if (me.failures != before) me.fail(std::string("the communicator does not work after ") + after);
  return alive;
}

// Whether comm is broken by an earlier failure (then it refuses every call, whatever the call).
bool broken(const Comm& comm) {
  collieResult_t async = collieSuccess;
  collieCommGetAsyncError(comm.comm, &async);
  return async != collieSuccess;
}

// Makes a call (`call`) that must be refused with collieInvalidUsage on every rank, before anything is queued,
// with a sentence that says why (`says`), leaving the communicator as it was; false when comm is broken after.
template <typename Call>
bool refused(Rank& me, const Comm& comm, const std::string& what, const char* says, Call&& call) {
  if (broken(comm)) {
    me.fail(what + ": not tried: the communicator is broken: " + collieGetLastError(comm.comm));
    return false;
  }
  const collieResult_t rc = call();
  ++me.cases;
  const std::string why = collieGetLastError(comm.comm);
  if (rc == collieSuccess) cudaStreamSynchronize(me.stream);  // queued, on every rank if on this one
  if (rc != collieInvalidUsage || why.find(says) == std::string::npos)
    me.fail(what + ": " + collieGetErrorString(rc) + ", not collieInvalidUsage saying \"" + says + "\": " + why);
  else if (me.rank == 0)
    printf("refused as it must be: %s: %s\n", what.c_str(), why.c_str());
  if (!broken(comm)) return true;
  me.fail(what + ": the refusal broke the communicator: " + collieGetLastError(comm.comm));
  return false;
}

// Bytes of each half of the communicator's staging buffer (COLLIE_DIRECT_STAGING), each on a 256-byte boundary.
size_t stagingHalf() {
  const char* env = getenv("COLLIE_DIRECT_STAGING");
  return (env != nullptr ? strtoull(env, nullptr, 0) : size_t{8} << 20) / 2 & ~size_t{255};
}

// The calls the direct path refuses, each followed by one that works: every collective on plain buffers larger
// than half the staging buffer (per-rank input and output; exactly half is taken), a pre-multiplied sum as large
// in a window, and a one-shot allreduce larger than its slots. A call the tuner's algorithm ran would be taken:
// this also shows config.algo took.
bool refusals(Rank& me, const Comm& oneShot, const Comm& twoShot) {
  const size_t half = stagingHalf();
  const size_t most = half / sizeof(float);
  const size_t bytes = (most + 1) * sizeof(float) * static_cast<size_t>(me.n) + kGuard;
  char *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) {
    me.fail("cudaMalloc of the refusals' buffers");
    return true;
  }
  bool alive = true, intact = true;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll, Coll::kBroadcast}) {
    const std::string what =
        std::string(collie::test::collName(coll)) + " staged, " + std::to_string((most + 1) * 4) + " bytes per rank";
    intact = refused(me, twoShot, what, "COLLIE_DIRECT_STAGING", [&] {
      return collie::test::callCollective(coll, in, out, most + 1, collieFloat32, collieSum, 0, twoShot.comm,
                                          me.stream);
    });
    if (!intact) break;
  }
  if (intact) alive = stillWorks(me, twoShot, "staged calls too large");
  // Exactly half the staging buffer fits.
  if (intact && alive)
    alive = runCase(me, Case{Coll::kAllReduce, &twoShot, collieFloat32, collieSum, most, false, Mode::kStaged, "", 0},
                    {in, out});
  // A pre-multiplied sum's input is the executor's scaled copy, always staged: with the buffers in a window, one
  // over half the staging buffer is refused all the same, before it is numbered.
  if (intact && alive) {
    Memory mem((most + 1) * sizeof(float), false);
    collieWindow_t win = nullptr;
    collieRedOp_t premul;
    float scalar = 0.5f;
    if (!mem.ok() || collieCommWindowRegister(twoShot.comm, mem.window, mem.windowBytes, &win, 0) != collieSuccess ||
        collieRedOpCreatePreMulSum(&premul, &scalar, collieFloat32, collieScalarHostImmediate, twoShot.comm) !=
            collieSuccess) {
      me.fail(std::string("a window and an operator for the scaled refusal: ") + collieGetLastError(twoShot.comm));
    } else {
      intact = refused(me, twoShot, "allreduce direct_twoshot, pre-multiplied, in a window", "scaled input", [&] {
        return collieAllReduce(mem.in, mem.out, most + 1, collieFloat32, premul, twoShot.comm, me.stream);
      });
      collieRedOpDestroy(premul, twoShot.comm);
    }
    if (win != nullptr) collieCommWindowDeregister(twoShot.comm, win);
    if (intact) alive = stillWorks(me, twoShot, "a pre-multiplied call too large to stage");
  }
  const size_t over = kOneShotMostBytes / sizeof(float) + 1;
  if (refused(me, oneShot, "allreduce direct_oneshot, " + std::to_string(over * 4) + " bytes per rank", "slots",
              [&] { return collieAllReduce(in, out, over, collieFloat32, collieSum, oneShot.comm, me.stream); }))
    alive = stillWorks(me, oneShot, "a one-shot call too large") && alive;
  cudaFree(in);
  cudaFree(out);
  return alive;
}

// direct_ce takes its peers' buffers on the host, where only threads of one process know them: between processes
// every rank refuses it before numbering, and the communicator takes the next call.
bool copyEngineRefused(Rank& me, const Comm& parent) {
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.backend = collieBackendCuda;
  config.algo = "alltoall:direct_ce";
  Comm ce{nullptr, "tuned", "direct_ce"};
  if (collieCommSplit(parent.comm, 0, me.rank, &ce.comm, &config) != collieSuccess) {
    me.fail(std::string("split with alltoall:direct_ce: ") + collieGetLastError(parent.comm));
    return true;
  }
  const size_t count = 1001, bytes = count * sizeof(float) * static_cast<size_t>(me.n);
  char* buf = nullptr;
  bool alive = true;
  if (cudaMalloc(&buf, 2 * bytes) != cudaSuccess) {
    me.fail("cudaMalloc of the direct_ce refusal's buffers");
  } else if (refused(me, ce, "alltoall direct_ce between processes", "a thread of this process",
                     [&] { return collieAllToAll(buf, buf + bytes, count, collieFloat32, ce.comm, me.stream); })) {
    alive = stillWorks(me, ce, "a direct_ce call between processes");
  } else {
    alive = false;
  }
  cudaFree(buf);
  collieCommDestroy(ce.comm);
  return alive;
}

// COLLIE_DIRECT_TUNE=1 across processes: the tuner's direct picks stand only for calls that fit the staging
// buffer, so that every rank could stage them. Every collective on plain buffers (staged), at a count whose
// buffers fit half the staging buffer and one just past it, runs on every rank and gives the right bits: a rank
// never refuses a call its peers have queued.
bool tunedPicks(Rank& me, const Comm& tuned) {
  const size_t half = stagingHalf();
  const size_t fit = half / sizeof(float) / static_cast<size_t>(me.n), over = half / sizeof(float) + 1;
  const size_t bytes = over * sizeof(float) * static_cast<size_t>(me.n) + kGuard;
  char *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) {
    me.fail("cudaMalloc of the tuned calls' buffers");
    return true;
  }
  bool alive = true;
  for (Coll coll : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kAllToAll, Coll::kBroadcast})
    for (size_t count : {fit, over})
      if (alive)
        alive =
            runCase(me, Case{coll, &tuned, collieFloat32, collieSum, count, false, Mode::kStaged, "", 1}, {in, out});
  cudaFree(in);
  cudaFree(out);
  return alive;
}

// Windows no peer process can map fail on every rank, and the communicator goes on: one over memory of a
// stream-ordered pool (cudaMallocAsync), which cudaIpc cannot hand over, and one that runs past the end of its
// cudaMalloc allocation (a handle stands for one allocation).
bool unmappableWindowsRefused(Rank& me, const Comm& comm) {
  const size_t bytes = size_t{2} << 20;
  char* pooled = nullptr;
  char* plain = nullptr;
  if (cudaMallocAsync(&pooled, bytes, me.stream) != cudaSuccess || cudaStreamSynchronize(me.stream) != cudaSuccess ||
      cudaMalloc(&plain, bytes) != cudaSuccess) {
    me.fail("allocating the refused windows' memory");
    return true;
  }
  struct Refusal {
    const char* what;
    char* base;
    size_t bytes;
    const char* says;
  };
  const Refusal refusals[] = {{"a window over cudaMallocAsync memory", pooled, bytes, "cudaIpc cannot hand"},
                              {"a window past the end of its cudaMalloc allocation", plain + 4096, bytes,
                               "does not lie inside one device allocation"}};
  bool alive = true;
  for (const Refusal& r : refusals) {
    collieWindow_t win = nullptr;
    const collieResult_t rc = collieCommWindowRegister(comm.comm, r.base, r.bytes, &win, 0);
    ++me.cases;
    const std::string why = collieGetLastError(comm.comm);
    if (rc == collieSuccess) {
      me.fail(std::string(r.what) + " was registered");
      collieCommWindowDeregister(comm.comm, win);
    } else if (rc != collieInvalidArgument || why.find(r.says) == std::string::npos) {
      me.fail(std::string(r.what) + ": " + collieGetErrorString(rc) + ", not collieInvalidArgument saying \"" + r.says +
              "\": " + why);
    } else if (me.rank == 0) {
      printf("refused as it must be: %s: %s: %s\n", r.what, collieGetErrorString(rc), why.c_str());
    }
    alive = alive && stillWorks(me, comm, r.what);
  }
  cudaFreeAsync(pooled, me.stream);
  cudaStreamSynchronize(me.stream);
  cudaFree(plain);
  return alive;
}

// A two-shot allreduce captured into a CUDA graph, replayed three times on new inputs: each replay is a new call
// (the call number comes from the device), and a staged call replays its copies in and out with it. Buffers
// outside every window (staged), then inside one.
bool capturedReplays(Rank& me, const Comm& comm) {
  const size_t count = 1001, bytes = count * sizeof(float);
  bool alive = true;
  for (bool inWindow : {false, true}) {
    void* block = nullptr;
    if (inWindow ? collieMemAlloc(&block, 2 * bytes) != collieSuccess : cudaMalloc(&block, 2 * bytes) != cudaSuccess) {
      me.fail("allocating the captured call's buffers");
      return false;
    }
    float* in = static_cast<float*>(block);
    float* out = in + count;
    collieWindow_t win = nullptr;
    const std::string what =
        std::string("allreduce direct_twoshot captured into a graph, ") + (inWindow ? "buffers in a window" : "staged");
    if (inWindow && collieCommWindowRegister(comm.comm, block, 2 * bytes, &win, COLLIE_WIN_DEFAULT) != collieSuccess) {
      me.fail(what + ": registering: " + collieGetLastError(comm.comm));
      collieMemFree(block);
      return false;
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(me.stream, cudaStreamCaptureModeThreadLocal);
    const collieResult_t rc = collieAllReduce(in, out, count, collieFloat32, collieSum, comm.comm, me.stream);
    const cudaError_t ended = cudaStreamEndCapture(me.stream, &graph);
    if (rc != collieSuccess || ended != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
      me.fail(what + ": capturing: " + collieGetLastError(comm.comm) + " / " + cudaGetErrorString(ended));
      alive = false;
    }
    std::vector<float> host(count), got(count);
    for (int k = 0; k < 3 && alive; ++k) {
      ++me.cases;
      // Small integers: every sum is exact in any order.
      for (size_t i = 0; i < count; ++i) host[i] = static_cast<float>(i % 7 + static_cast<size_t>(me.rank + k));
      cudaMemcpy(in, host.data(), bytes, cudaMemcpyHostToDevice);
      cudaMemset(out, kPoison, bytes);
      cudaDeviceSynchronize();
      if (cudaGraphLaunch(exec, me.stream) != cudaSuccess ||
          brokenAfter(me, comm.comm, me.stream, what + ", replay " + std::to_string(k))) {
        alive = false;
        break;
      }
      cudaMemcpy(got.data(), out, bytes, cudaMemcpyDeviceToHost);
      const size_t n = static_cast<size_t>(me.n);
      for (size_t i = 0; i < count; ++i) {
        const float want = static_cast<float>(n * (i % 7) + n * (n - 1) / 2 + n * static_cast<size_t>(k));
        if (got[i] != want) {
          me.fail(what + ", replay " + std::to_string(k) + ": element " + std::to_string(i) + " is " +
                  std::to_string(got[i]) + ", not " + std::to_string(want));
          break;
        }
      }
    }
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (win != nullptr) collieCommWindowDeregister(comm.comm, win);
    if (inWindow)
      collieMemFree(block);
    else
      cudaFree(block);
    if (!alive) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const int probe = collie::test::gpuProbeAndPickLocal(argc, argv);
  if (probe >= 0) return probe;
  // The first communicator's allreduce is the one-shot, its other collectives the tuner's (the seed's broadcast);
  // the second, split from it, names every other direct algorithm.
  collieConfig_t config = COLLIE_CONFIG_INITIALIZER;
  config.backend = collieBackendCuda;
  config.algo = "allreduce:direct_oneshot";
  Comm oneShot{nullptr, "direct_oneshot"}, twoShot{nullptr, "direct_twoshot"};
  if (collieCommInitFromEnv(&oneShot.comm, &config) != collieSuccess) {
    fprintf(stderr, "FAIL init: %s\n", collieGetLastError(nullptr));
    return 1;
  }
  Rank me;
  collieCommUserRank(oneShot.comm, &me.rank);
  collieCommCount(oneShot.comm, &me.n);
  if (me.n < 2 || me.n > collie::kDirectMaxRanks) {
    printf("skipped: the direct kernels take 2 to %d ranks, not %d\n", collie::kDirectMaxRanks, me.n);
    collieCommDestroy(oneShot.comm);
    return 77;
  }
  cudaStreamCreate(&me.stream);
  // Rank 0's seed reaches everyone through a broadcast (itself on the GPU).
  me.seed = me.rank == 0 ? collie::test::testSeed() : 0;
  uint64_t* dSeed = nullptr;
  cudaMalloc(&dSeed, sizeof(me.seed));
  cudaMemcpy(dSeed, &me.seed, sizeof(me.seed), cudaMemcpyHostToDevice);
  if (collieBroadcast(dSeed, dSeed, 1, collieUint64, 0, oneShot.comm, me.stream) != collieSuccess ||
      cudaStreamSynchronize(me.stream) != cudaSuccess) {
    fprintf(stderr, "FAIL seed broadcast: %s\n", collieGetLastError(oneShot.comm));
    return 1;
  }
  cudaMemcpy(&me.seed, dSeed, sizeof(me.seed), cudaMemcpyDeviceToHost);
  cudaFree(dSeed);
  collieConfig_t directConfig = COLLIE_CONFIG_INITIALIZER;
  directConfig.backend = collieBackendCuda;
  directConfig.algo = kDirectAlgos;
  if (collieCommSplit(oneShot.comm, 0, me.rank, &twoShot.comm, &directConfig) != collieSuccess) {
    fprintf(stderr, "FAIL split: %s\n", collieGetLastError(oneShot.comm));
    return 1;
  }
  const Comm* comms[2] = {&oneShot, &twoShot};
  bool alive = true;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{70001}}) {
    // A window that is the whole block with the buffers at its start, then a window inside the block with the
    // buffers inside it, then the same inside a block from cudaMalloc.
    for (int layout = 0; layout < 3; ++layout) {
      if (!alive) break;
      const bool atOffset = layout > 0, plainBlock = layout == 2;
      const size_t cap = count * 8 * static_cast<size_t>(me.n);  // any case's input or output
      Memory mem(cap, atOffset, plainBlock);
      if (!mem.ok()) {
        me.fail("allocating " + std::to_string(mem.blockBytes) + " bytes for count " + std::to_string(count));
        alive = false;
        break;
      }
      // Staged first, with no window on either communicator; then window and mixed, in the same windows.
      if (!atOffset) alive = runCount(me, oneShot, twoShot, count, Mode::kStaged, mem, "");
      collieWindow_t wins[2] = {nullptr, nullptr};
      if (alive && registerWindows(me, comms, mem, wins, count)) {
        for (Mode mode : {Mode::kWindow, Mode::kMixed})
          if (alive)
            alive = runCount(me, oneShot, twoShot, count, mode, mem,
                             plainBlock ? " at offsets of cudaMalloc memory"
                             : atOffset ? " at offsets"
                                        : "");
      }
      if (alive) deregisterWindows(me, comms, wins);
    }
  }
  // What must be refused comes last: a refusal that broke a communicator would fail every case after it.
  alive = alive && capturedReplays(me, twoShot);
  alive = alive && unmappableWindowsRefused(me, twoShot) && refusals(me, oneShot, twoShot);
  alive = alive && copyEngineRefused(me, oneShot);
  // The tuner with the direct algorithms weighed, on a communicator of its own (every rank sets the variable).
  setenv("COLLIE_DIRECT_TUNE", "1", 1);
  collieConfig_t tunedConfig = COLLIE_CONFIG_INITIALIZER;
  tunedConfig.backend = collieBackendCuda;
  Comm tuned{nullptr, "tuned", "tuned"};
  if (collieCommSplit(oneShot.comm, 0, me.rank, &tuned.comm, &tunedConfig) != collieSuccess) {
    me.fail(std::string("split with COLLIE_DIRECT_TUNE=1: ") + collieGetLastError(oneShot.comm));
  } else {
    alive = tunedPicks(me, tuned) && alive;
    collieCommDestroy(tuned.comm);
  }
  cudaStreamDestroy(me.stream);
  collieCommDestroy(twoShot.comm);
  collieCommDestroy(oneShot.comm);
  printf("rank %d/%d: %d direct GPU cases across processes, %d failed (seed %llu)\n", me.rank, me.n, me.cases,
         me.failures, static_cast<unsigned long long>(me.seed));
  return me.failures == 0 && alive ? 0 : 1;
}
