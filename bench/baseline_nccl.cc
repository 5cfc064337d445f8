// NCCL as a baseline, loaded at run time with dlopen("libnccl.so.2"): no
// link-time dependency, so collie-bench builds and runs where NCCL is absent
// and says so. The few NCCL declarations needed are written here from NCCL's
// documented ABI (enums are ints with the values Collie shares; the unique id
// is 128 bytes passed by value). All-to-all(v), gather and scatter are grouped
// send/recv, as nccl-tests does. Ranks exchange NCCL's unique id through the
// Team, whose processes talk over a Collie communicator (or MPI).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "bench/impl.h"
#include "bench/launch.h"
#include "bench/options.h"

namespace collie {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

typedef int ncclResult_t;  // ncclSuccess = 0
typedef void* ncclComm_t;
struct ncclUniqueId {
  char internal[128];
};

struct NcclApi {
  void* lib = nullptr;
  std::string error;
  ncclResult_t (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(ncclResult_t) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId*) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t*, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
  ncclResult_t (*allReduce)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduce)(const void*, void*, size_t, int, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void*, void*, size_t, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void*, void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*send)(const void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*recv)(void*, size_t, int, int, ncclComm_t, cudaStream_t) = nullptr;

  template <typename F>
  void bind(F* fn, const char* name) {
    *fn = reinterpret_cast<F>(dlsym(lib, name));
    if (*fn == nullptr && error.empty()) error = std::string("libnccl.so.2 has no ") + name;
  }

  bool load() {
    lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      error = std::string("cannot load libnccl.so.2 (") + dlerror() + "); put NCCL's library on LD_LIBRARY_PATH";
      return false;
    }
    bind(&getVersion, "ncclGetVersion");
    bind(&getErrorString, "ncclGetErrorString");
    bind(&getUniqueId, "ncclGetUniqueId");
    bind(&commInitRank, "ncclCommInitRank");
    bind(&commDestroy, "ncclCommDestroy");
    bind(&groupStart, "ncclGroupStart");
    bind(&groupEnd, "ncclGroupEnd");
    bind(&allReduce, "ncclAllReduce");
    bind(&broadcast, "ncclBroadcast");
    bind(&reduce, "ncclReduce");
    bind(&allGather, "ncclAllGather");
    bind(&reduceScatter, "ncclReduceScatter");
    bind(&send, "ncclSend");
    bind(&recv, "ncclRecv");
    return error.empty();
  }
};

NcclApi& api() {
  static std::once_flag once;
  static NcclApi a;
  std::call_once(once, [] { a.load(); });
  return a;
}

int versionCode() {
  int v = 0;
  if (api().error.empty() && api().getVersion != nullptr) api().getVersion(&v);
  return v;
}

std::string ncclError(const char* what, ncclResult_t rc) {
  return std::string(what) + ": " + (api().getErrorString ? api().getErrorString(rc) : "error");
}

int deviceOf(const Team& team, int worker, int j) {
  int ndev = 1;
  gpuUsable(&ndev, nullptr);
  return team.deviceOf(worker, j, ndev);
}

// Creates one communicator per local rank of `worker` (a group when several).
std::string initComms(Team& team, int worker, std::vector<ncclComm_t>* comms) {
  struct IdMessage {
    int ok;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof(msg));
  std::string err;
  if (team.isRoot(worker)) {
    const ncclResult_t rc = api().getUniqueId(&msg.id);
    msg.ok = rc == 0;
    if (!msg.ok) err = ncclError("ncclGetUniqueId", rc);
  }
  team.broadcast(worker, &msg, sizeof(msg));
  if (!msg.ok && err.empty()) err = "ncclGetUniqueId failed on rank 0";
  const int g = team.perThread();
  comms->assign(static_cast<size_t>(g), nullptr);
  if (msg.ok) {
    api().groupStart();
    for (int j = 0; j < g && err.empty(); ++j) {
      cudaSetDevice(deviceOf(team, worker, j));
      const ncclResult_t rc =
          api().commInitRank(&(*comms)[static_cast<size_t>(j)], team.nranks(), msg.id, team.rankOf(worker, j));
      if (rc != 0) err = ncclError("ncclCommInitRank", rc);
    }
    const ncclResult_t rc = api().groupEnd();
    if (rc != 0 && err.empty()) err = ncclError("ncclCommInitRank (group)", rc);
  }
  return err;
}

class NcclImpl : public Impl {
 public:
  NcclImpl() {
    label_ = "nccl";
    mem_ = MemKind::kDevice;
    baseline_ = true;
  }
  ~NcclImpl() override {
    for (void* s : streams_) cudaStreamDestroy(static_cast<cudaStream_t>(s));
    for (ncclComm_t c : comms_)
      if (c != nullptr) api().commDestroy(c);
  }

  std::string unsupported(const Case& c, bool inPlace) const override {
    if (inPlace && !collInfo(c.coll).inPlace) return "no in-place form";
    if ((c.type == collieFloat8e4m3 || c.type == collieFloat8e5m2) && versionCode() < 22400)
      return "fp8 needs NCCL 2.24 or later";
    return "";
  }

  std::string issue(const Call& call) override {
    api().groupStart();
    ncclResult_t rc = 0;
    for (size_t j = 0; j < comms_.size() && rc == 0; ++j)
      rc = one(comms_[j], static_cast<cudaStream_t>(streams_[j]), *call.cases[j], call.send[j], call.recv[j]);
    const ncclResult_t end = api().groupEnd();
    if (rc == 0) rc = end;
    return rc == 0 ? "" : ncclError("nccl call", rc);
  }

  std::string sync() override {
    for (void* s : streams_) {
      const cudaError_t rc = cudaStreamSynchronize(static_cast<cudaStream_t>(s));
      if (rc != cudaSuccess) return std::string("cudaStreamSynchronize: ") + cudaGetErrorString(rc);
    }
    return "";
  }

  bool graphSeconds(const Call& call, int iters, int perGraph, double* sec, std::string* err) override {
    *err = timeGraphs(
        streams_, [&] { return issue(call); }, iters, perGraph, sec);
    return true;
  }

  std::vector<ncclComm_t> comms_;
  std::vector<void*> streams_;

 private:
  ncclResult_t one(ncclComm_t comm, cudaStream_t st, const Case& c, const void* s, void* r) {
    const NcclApi& a = api();
    const int n = c.nranks, me = c.rank, t = static_cast<int>(c.type);
    const size_t es = c.typeBytes();
    const char* sb = static_cast<const char*>(s);
    char* rb = static_cast<char*>(r);
    ncclResult_t rc = 0;
    switch (c.coll) {
      case Coll::kAllReduce:
        return a.allReduce(s, r, c.count, t, c.op, comm, st);
      case Coll::kAllGather:
        return a.allGather(s, r, c.count, t, comm, st);
      case Coll::kReduceScatter:
        return a.reduceScatter(s, r, c.count, t, c.op, comm, st);
      case Coll::kBroadcast:
        return a.broadcast(s, r, c.count, t, c.root, comm, st);
      case Coll::kReduce:
        return a.reduce(s, r, c.count, t, c.op, c.root, comm, st);
      case Coll::kAllToAll:
        for (int p = 0; p < n && rc == 0; ++p) {
          rc = a.send(sb + p * c.count * es, c.count, t, p, comm, st);
          if (rc == 0) rc = a.recv(rb + p * c.count * es, c.count, t, p, comm, st);
        }
        return rc;
      case Coll::kAllToAllv:
        for (int p = 0; p < n && rc == 0; ++p) {
          const size_t q = static_cast<size_t>(p);
          rc = a.send(sb + c.sendDispls[q] * es, c.sendCounts[q], t, p, comm, st);
          if (rc == 0) rc = a.recv(rb + c.recvDispls[q] * es, c.recvCounts[q], t, p, comm, st);
        }
        return rc;
      case Coll::kGather:
        rc = a.send(s, c.count, t, c.root, comm, st);
        for (int p = 0; p < n && rc == 0 && me == c.root; ++p)
          rc = a.recv(rb + p * c.count * es, c.count, t, p, comm, st);
        return rc;
      case Coll::kScatter:
        for (int p = 0; p < n && rc == 0 && me == c.root; ++p)
          rc = a.send(sb + p * c.count * es, c.count, t, p, comm, st);
        if (rc == 0) rc = a.recv(r, c.count, t, c.root, comm, st);
        return rc;
      case Coll::kSendRecv:
        rc = a.send(s, c.count, t, (me + 1) % n, comm, st);
        if (rc == 0) rc = a.recv(r, c.count, t, (me + n - 1) % n, comm, st);
        return rc;
    }
    return 4;  // ncclInvalidArgument
  }
};

}  // namespace

std::string ncclUnavailable() {
  int ndev = 0;
  std::string noGpu;
  const bool gpu = gpuUsable(&ndev, &noGpu);
  const std::string lib = api().error;
  if (gpu && lib.empty()) return "";
  if (!gpu && !lib.empty()) return noGpu + ", and " + lib;
  return gpu ? lib : noGpu + ": NCCL needs one";
}

std::string ncclVersion() {
  const int v = versionCode();
  if (v == 0) return "";
  // NCCL_VERSION(X,Y,Z) is X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? (v / 100) % 100 : (v / 100) % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

std::unique_ptr<Impl> makeNcclImpl(Team& team, int worker, const Options&, std::string* err) {
  auto impl = std::make_unique<NcclImpl>();
  std::string mine = initComms(team, worker, &impl->comms_);
  for (int j = 0; j < team.perThread() && mine.empty(); ++j) {
    cudaSetDevice(deviceOf(team, worker, j));
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) mine = "cudaStreamCreate failed";
    impl->streams_.push_back(s);
  }
  double failed = mine.empty() ? 0 : 1;
  team.allreduce(worker, &failed, 1, RedKind::kMax);
  if (failed > 0) {
    *err = mine.empty() ? "another rank could not create its NCCL communicator" : mine;
    int ndev = 0;
    gpuUsable(&ndev, nullptr);
    if (team.nranks() > ndev)
      *err += " (" + std::to_string(team.nranks()) + " ranks on " + std::to_string(ndev) +
              " GPUs: NCCL refuses two ranks of one communicator on the same GPU)";
    return nullptr;
  }
  return impl;
}

bool ncclInitOnce(Team& team, int worker, double* initSec, double* destroySec, double* deviceBytes, std::string* err) {
  size_t freeBefore = 0, freeAfter = 0, total = 0;
  cudaSetDevice(deviceOf(team, worker, 0));
  cudaMemGetInfo(&freeBefore, &total);
  team.barrier(worker);
  const Clock::time_point t0 = Clock::now();
  std::vector<ncclComm_t> comms;
  *err = initComms(team, worker, &comms);
  const Clock::time_point t1 = Clock::now();
  cudaSetDevice(deviceOf(team, worker, 0));
  cudaMemGetInfo(&freeAfter, &total);
  team.barrier(worker);
  const Clock::time_point t2 = Clock::now();
  for (ncclComm_t c : comms)
    if (c != nullptr) api().commDestroy(c);
  *initSec = std::chrono::duration<double>(t1 - t0).count();
  *destroySec = std::chrono::duration<double>(Clock::now() - t2).count();
  // Device-wide: ranks sharing a GPU (and other processes) are counted too.
  *deviceBytes = freeBefore > freeAfter ? static_cast<double>(freeBefore - freeAfter) : 0.0;
  return err->empty();
}

}  // namespace bench
}  // namespace collie
