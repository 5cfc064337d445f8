// Collie as an implementation under test: the communicators of one worker's
// ranks, created with one algorithm (COLLIE_ALGO is read at comm init, so
// `--algo all` creates one communicator per algorithm in the same processes),
// on the host backend or, once it lands, the CUDA one.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "algorithms/memory_traffic.h"
#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "bench/impl.h"
#include "bench/launch.h"
#include "bench/options.h"
#include "collie.h"
#include "core/comm.h"
#include "executor/direct_sends.h"
#include "executor/executor.h"

namespace collie {
namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

Collective toCollective(Coll c) {
  switch (c) {
    case Coll::kAllReduce:
      return Collective::kAllReduce;
    case Coll::kAllGather:
      return Collective::kAllGather;
    case Coll::kReduceScatter:
      return Collective::kReduceScatter;
    case Coll::kBroadcast:
      return Collective::kBroadcast;
    case Coll::kReduce:
      return Collective::kReduce;
    case Coll::kAllToAll:
      return Collective::kAllToAll;
    case Coll::kAllToAllv:
      return Collective::kAllToAllv;
    case Coll::kGather:
      return Collective::kGather;
    case Coll::kScatter:
      return Collective::kScatter;
    case Coll::kSendRecv:
      return Collective::kSendRecv;
  }
  return Collective::kAllReduce;
}

std::vector<std::string> split(const std::string& s, const char* seps) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find_first_of(seps, start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// --algo's name for the tuner's choice with the direct algorithms weighed too (COLLIE_DIRECT_TUNE=1).
constexpr const char* kTunerDirect = "auto_direct";
// --algo's suffix for an algorithm run with one launch serving every rank (COLLIE_DIRECT_ONE_LAUNCH=1), so that
// both forms of a direct_oneshot are timed side by side in one run.
constexpr const char* kOneLaunch = "+one_launch";

// `name` without kOneLaunch; *oneLaunch whether it had it.
std::string withoutOneLaunch(const std::string& name, bool* oneLaunch) {
  const size_t n = strlen(kOneLaunch);
  *oneLaunch = name.size() > n && name.compare(name.size() - n, n, kOneLaunch) == 0;
  return *oneLaunch ? name.substr(0, name.size() - n) : name;
}

// The user's COLLIE_ALGO with this collective's entries replaced by `algo`
// ("auto" and "auto_direct": removed, so the tuner chooses). Other collectives keep their choice.
std::string algoSpec(const char* original, Collective c, const std::string& algo) {
  std::string out;
  for (const std::string& entry : split(original ? original : "", ";,")) {
    const size_t colon = entry.find(':');
    Collective ec;
    if (colon != std::string::npos && collectiveFromName(entry.substr(0, colon), &ec) && ec == c) continue;
    if (entry.find_first_not_of(" \t") == std::string::npos) continue;
    out += (out.empty() ? "" : ";") + entry;
  }
  if (algo != "auto" && algo != kTunerDirect)
    out += (out.empty() ? "" : ";") + std::string(collectiveName(c)) + ":" + algo;
  return out;
}

// A variable of the user's environment (COLLIE_ALGO, COLLIE_DIRECT_TUNE), saved before the first change,
// restored after each init.
struct SavedEnv {
  const char* name;
  bool saved = false, had = false;
  std::string value;
  explicit SavedEnv(const char* n) : name(n) {}
  void set(const std::string& v) {
    if (!saved) {
      const char* old = getenv(name);
      had = old != nullptr;
      value = old ? old : "";
      saved = true;
    }
    if (v.empty())
      unsetenv(name);
    else
      setenv(name, v.c_str(), 1);
  }
  void restore() {
    if (!saved) return;
    if (had)
      setenv(name, value.c_str(), 1);
    else
      unsetenv(name);
  }
};
SavedEnv gAlgoEnv("COLLIE_ALGO");
SavedEnv gTuneEnv("COLLIE_DIRECT_TUNE");
SavedEnv gOneLaunchEnv("COLLIE_DIRECT_ONE_LAUNCH");

// One stream per rank (worker thread, rank of the thread), shared by every Collie implementation of the run.
// Each stream takes one of the GPU's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS), and ranks whose streams share
// a queue may wait behind each other's next call until COLLIE_TIMEOUT: a stream per communicator made `--algo all`
// at 8 ranks 64 streams over 32 queues. The implementations run one after another, so one stream serves them all.
// Made once, kept until the process ends.
cudaStream_t rankStream(int worker, int j, std::string* err) {
  static std::mutex mu;
  static auto* streams = new std::map<std::pair<int, int>, cudaStream_t>();
  std::lock_guard<std::mutex> lock(mu);
  cudaStream_t& s = (*streams)[{worker, j}];
  if (s == nullptr && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
    s = nullptr;
    *err = "cudaStreamCreate failed for a CUDA-backend communicator";
  }
  return s;
}

class CollieImpl : public Impl {
 public:
  CollieImpl(const std::string& label, int nranks) : nranks_(nranks) { label_ = label; }
  ~CollieImpl() override {
    for (collieComm_t c : comms_) collieCommDestroy(c);
  }

  std::string unsupported(const Case& c, bool inPlace) const override {
    if (inPlace && !collInfo(c.coll).inPlace) return "no in-place form";
    // A program file runs counts its chunks divide (algorithms/program_file.h); the others are skipped.
    const AlgorithmInfo* algo = comms_.empty() ? nullptr : chosenAlgorithm(comms_[0], c);
    if (algo != nullptr && algo->file != nullptr && c.count % algo->file->chunks != 0)
      return "count not a multiple of the program file's " + std::to_string(algo->file->chunks) + " chunks";
    // A direct algorithm runs where the executor has a kernel for it (executor/cuda_executor.h, "Direct
    // algorithms"): elsewhere each call would fail.
    if (algo != nullptr && algo->mapsPeers && c.nranks > 1) {
      ReduceOp op = ReduceOp::kSum;
      toReduceOp(c.op, &op);
      const Status runs = comms_[0]->executor->runsDirect(algo->collective, algo->name, c.count, c.type, op);
      if (!runs.ok()) return runs.message();
    }
    // And only the sizes of its byte range: elsewhere the tuner's pick would run under the file's name.
    if (!comms_.empty() && c.coll != Coll::kSendRecv && c.nranks > 1) {
      auto named = comms_[0]->algoOverrides.find(toCollective(c.coll));
      if (named != comms_[0]->algoOverrides.end() && named->second->file != nullptr && named->second != algo)
        return "outside the program file's sizes (" + std::to_string(named->second->file->minBytes) + ".." +
               std::to_string(named->second->file->maxBytes) + " bytes)";
    }
    return "";
  }

  std::string issue(const Call& call) override {
    const bool group = comms_.size() > 1;
    if (group) collieGroupStart();
    collieResult_t rc = collieSuccess;
    for (size_t j = 0; j < comms_.size() && rc == collieSuccess; ++j)
      rc = one(j, *call.cases[j], call.send[j], call.recv[j]);
    if (group) {
      const collieResult_t end = collieGroupEnd();
      if (rc == collieSuccess) rc = end;
    }
    return rc == collieSuccess ? "" : failure(rc);
  }

  std::string sync() override {
    for (void* s : streams_) {
      const cudaError_t rc = cudaStreamSynchronize(static_cast<cudaStream_t>(s));
      if (rc != cudaSuccess) return std::string("cudaStreamSynchronize: ") + cudaGetErrorString(rc);
    }
    return "";
  }

  bool graphSeconds(const Call& call, int iters, int perGraph, double* sec, std::string* err) override {
    if (streams_.empty()) return false;
    *err = timeGraphs(
        streams_, [&] { return issue(call); }, iters, perGraph, sec);
    return true;
  }

  double bareSeconds(const Call& call, int iters, std::string* err) override {
    if (comms_.size() != 1) return -1;  // several ranks per thread need a group: not a bare loop
    const Case& c = *call.cases[0];
    const void* s = call.send[0];
    void* r = call.recv[0];
    collieComm_t comm = comms_[0];
    collieStream_t st = stream(0);
    int bad = 0;  // results OR'ed together: nothing but the call itself in the loop
    const Clock::time_point t0 = Clock::now();
    switch (c.coll) {
      case Coll::kAllReduce:
        for (int i = 0; i < iters; ++i) bad |= collieAllReduce(s, r, c.count, c.type, c.op, comm, st);
        break;
      case Coll::kAllGather:
        for (int i = 0; i < iters; ++i) bad |= collieAllGather(s, r, c.count, c.type, comm, st);
        break;
      case Coll::kReduceScatter:
        for (int i = 0; i < iters; ++i) bad |= collieReduceScatter(s, r, c.count, c.type, c.op, comm, st);
        break;
      case Coll::kBroadcast:
        for (int i = 0; i < iters; ++i) bad |= collieBroadcast(s, r, c.count, c.type, c.root, comm, st);
        break;
      case Coll::kReduce:
        for (int i = 0; i < iters; ++i) bad |= collieReduce(s, r, c.count, c.type, c.op, c.root, comm, st);
        break;
      case Coll::kAllToAll:
        for (int i = 0; i < iters; ++i) bad |= collieAllToAll(s, r, c.count, c.type, comm, st);
        break;
      case Coll::kAllToAllv:
        for (int i = 0; i < iters; ++i)
          bad |= collieAllToAllv(s, c.sendCounts.data(), c.sendDispls.data(), r, c.recvCounts.data(),
                                 c.recvDispls.data(), c.type, comm, st);
        break;
      case Coll::kGather:
        for (int i = 0; i < iters; ++i) bad |= collieGather(s, r, c.count, c.type, c.root, comm, st);
        break;
      case Coll::kScatter:
        for (int i = 0; i < iters; ++i) bad |= collieScatter(s, r, c.count, c.type, c.root, comm, st);
        break;
      case Coll::kSendRecv:
        for (int i = 0; i < iters; ++i) bad |= sendRecv(c, s, r, comm, st);
        break;
    }
    const std::string synced = sync();
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (bad != 0) *err = failure(static_cast<collieResult_t>(bad));
    if (!synced.empty()) *err = synced;
    return sec;
  }

  double trafficBytes(const Call& call) override {
    double most = -1;
    for (size_t j = 0; j < comms_.size(); ++j)
      most = std::max(most, rankTraffic(comms_[j], *call.cases[j], call.inPlace));
    return most;
  }

  std::string algorithmName(const Call& call) override {
    const Case& c = *call.cases[0];
    if (c.coll != Coll::kSendRecv && c.nranks == 1) return "copy";
    const AlgorithmInfo* algo = chosenAlgorithm(comms_[0], c);
    return algo == nullptr ? "" : algo->name;
  }

  std::vector<collieComm_t> comms_;
  std::vector<void*> streams_;  // cudaStream_t per rank (rankStream, shared), device backend only

 private:
  // The algorithm the communicator picks for the case (its override, else the tuner's choice); nullptr for
  // grouped send/recv, which has no registered program, and for one rank, which copies instead.
  static const AlgorithmInfo* chosenAlgorithm(collieComm_t comm, const Case& c) {
    if (c.coll == Coll::kSendRecv || c.nranks == 1) return nullptr;
    return comm->algorithmForCall(toCollective(c.coll), c.count, c.type, c.op);
  }

  // What core/collectives.cc runs for this case: one rank copies its data (nothing in place); more build the
  // program of chosenAlgorithm.
  static double rankTraffic(collieComm_t comm, const Case& c, bool inPlace) {
    if (c.coll == Coll::kSendRecv) return -1;  // grouped send/recv: no registered program to count
    const double es = static_cast<double>(c.typeBytes());
    const bool v = c.coll == Coll::kAllToAllv;
    if (c.nranks == 1) return inPlace ? 0 : 2 * es * static_cast<double>(v ? c.recvCounts[0] : c.count);
    const Collective coll = toCollective(c.coll);
    const AlgorithmInfo* algo = chosenAlgorithm(comm, c);
    if (algo == nullptr) return -1;
    ProgramArgs args;
    args.collective = coll;
    args.nranks = c.nranks;
    args.rank = c.rank;
    args.count = c.count;
    args.stride = c.count;
    args.root = c.root;
    args.ranksPerNode = comm->topology.ranksPerNode;
    if (v) {
      args.sendCounts.assign(c.sendCounts.begin(), c.sendCounts.end());
      args.sendDispls.assign(c.sendDispls.begin(), c.sendDispls.end());
      args.recvCounts.assign(c.recvCounts.begin(), c.recvCounts.end());
      args.recvDispls.assign(c.recvDispls.begin(), c.recvDispls.end());
    }
    const int64_t shift = static_cast<int64_t>(c.recvOff) - static_cast<int64_t>(c.sendOff);
    const Program program = buildProgram(*algo, args);
    // The sends the peers read in place, as the communicator's executor marks them for a call on buffers laid
    // out like the case's (as one channel; LL calls read none).
    std::vector<uint8_t> marks;  // stays empty (nothing read in place) unless the executor marks some
    if (comm->executor != nullptr && !takesLowLatency(*comm, *algo, coll, c.count, c.typeBytes())) {
      void* bufs[3];
      placeholderBuffers(inPlace, shift * static_cast<int64_t>(c.typeBytes()), bufs);
      comm->executor->directSends(program, bufs, c.typeBytes(), c.op == collieAvg ? c.nranks : 0, &marks);
    }
    return es * static_cast<double>(memoryTrafficElems(program, inPlace, shift, &marks));
  }

  collieStream_t stream(size_t j) const { return streams_.empty() ? nullptr : streams_[j]; }

  collieResult_t sendRecv(const Case& c, const void* s, void* r, collieComm_t comm, collieStream_t st) {
    const int next = (c.rank + 1) % nranks_, prev = (c.rank + nranks_ - 1) % nranks_;
    collieGroupStart();
    collieResult_t rc = collieSend(s, c.count, c.type, next, comm, st);
    const collieResult_t rc2 = collieRecv(r, c.count, c.type, prev, comm, st);
    const collieResult_t end = collieGroupEnd();
    if (rc == collieSuccess) rc = rc2;
    return rc == collieSuccess ? end : rc;
  }

  collieResult_t one(size_t j, const Case& c, const void* s, void* r) {
    collieComm_t comm = comms_[j];
    collieStream_t st = stream(j);
    switch (c.coll) {
      case Coll::kAllReduce:
        return collieAllReduce(s, r, c.count, c.type, c.op, comm, st);
      case Coll::kAllGather:
        return collieAllGather(s, r, c.count, c.type, comm, st);
      case Coll::kReduceScatter:
        return collieReduceScatter(s, r, c.count, c.type, c.op, comm, st);
      case Coll::kBroadcast:
        return collieBroadcast(s, r, c.count, c.type, c.root, comm, st);
      case Coll::kReduce:
        return collieReduce(s, r, c.count, c.type, c.op, c.root, comm, st);
      case Coll::kAllToAll:
        return collieAllToAll(s, r, c.count, c.type, comm, st);
      case Coll::kAllToAllv:
        return collieAllToAllv(s, c.sendCounts.data(), c.sendDispls.data(), r, c.recvCounts.data(), c.recvDispls.data(),
                               c.type, comm, st);
      case Coll::kGather:
        return collieGather(s, r, c.count, c.type, c.root, comm, st);
      case Coll::kScatter:
        return collieScatter(s, r, c.count, c.type, c.root, comm, st);
      case Coll::kSendRecv:
        return sendRecv(c, s, r, comm, st);
    }
    return collieInvalidArgument;
  }

  // The failing communicator's sentence (a group reports on each communicator).
  std::string failure(collieResult_t rc) const {
    std::string msg = std::string(label_) + ": " + collieGetErrorString(rc);
    for (collieComm_t c : comms_) {
      const char* why = collieGetLastError(c);
      if (why != nullptr && *why != '\0') return msg + ": " + why;
    }
    const char* why = collieGetLastError(nullptr);
    return why != nullptr && *why != '\0' ? msg + ": " + why : msg;
  }

  int nranks_;
};

}  // namespace

std::vector<std::string> collieAlgorithms(const Options& o, std::string* err) {
  if (o.algo.empty()) return {""};
  const Collective c = toCollective(o.coll);
  std::vector<std::string> out;
  if (o.algo == "all") {
    out.push_back("auto");
    for (const AlgorithmInfo& a : algorithms())
      if (a.collective == c && !a.mapsPeers) out.push_back(a.name);  // direct ones run where --algo names them
    return out;
  }
  for (const std::string& given : split(o.algo, ",")) {
    bool oneLaunch = false;
    const std::string name = withoutOneLaunch(given, &oneLaunch);
    if (oneLaunch) {
      // COLLIE_DIRECT_ONE_LAUNCH changes only the direct one-shot's launch (executor/cuda_one_launch.cc).
      if (c != Collective::kAllReduce || name != "direct_oneshot") {
        *err = "--algo: " + given + ": " + kOneLaunch + " applies to allreduce direct_oneshot only";
        return {};
      }
      out.push_back(given);
      continue;
    }
    if (name == "auto" || name == kTunerDirect || findAlgorithm(c, name.c_str()) != nullptr) {
      out.push_back(name);
      continue;
    }
    if (name.rfind("file:", 0) == 0) {  // a program file, loaded and proved now so that a bad one stops the run
      const AlgorithmInfo* file = nullptr;
      const Status st = fileAlgorithm(name.substr(5), c, &file);
      if (!st.ok()) {
        *err = "--algo: " + st.message();
        return {};
      }
      out.push_back(name);
      continue;
    }
    const std::string valid = algorithmNames(c);
    *err = "--algo: " + std::string(collInfo(o.coll).name) + " has no algorithm '" + name + "' (" +
           (valid.empty() ? std::string("it has none to choose from; use auto")
                          : "valid: auto, auto_direct, all, " + valid) +
           ")";
    return {};
  }
  return out;
}

std::unique_ptr<Impl> makeCollieImpl(Team& team, int worker, const Options& o, const std::string& algo,
                                     std::string* err) {
  const int g = team.perThread();
  auto impl = std::make_unique<CollieImpl>(algo.empty() ? "collie"
                                                        : (algo == "auto"         ? "collie:tuner"
                                                           : algo == kTunerDirect ? "collie:tuner+direct"
                                                                                  : "collie:" + algo),
                                           team.nranks());
  struct IdMessage {
    int ok;
    collieUniqueId id;
  } msg;
  memset(&msg, 0, sizeof(msg));
  team.barrier(worker);  // nobody is inside an init that reads COLLIE_ALGO
  if (worker == 0 && !algo.empty()) {
    bool oneLaunch = false;
    const std::string named = withoutOneLaunch(algo, &oneLaunch);
    gAlgoEnv.set(algoSpec(getenv("COLLIE_ALGO"), toCollective(o.coll), named));
    if (algo == kTunerDirect) gTuneEnv.set("1");
    if (oneLaunch) gOneLaunchEnv.set("1");
  }
  std::string rootError;
  if (team.isRoot(worker)) {
    msg.ok = collieGetUniqueId(&msg.id) == collieSuccess;
    if (!msg.ok) rootError = collieGetLastError(nullptr);
  }
  team.broadcast(worker, &msg, sizeof(msg));

  impl->comms_.assign(static_cast<size_t>(g), nullptr);
  std::vector<std::string> errors(static_cast<size_t>(g));
  int ndev = 0;
  const bool gpu = gpuUsable(&ndev, nullptr);
  auto initRank = [&](int j) {
    collieConfig_t cfg = COLLIE_CONFIG_INITIALIZER;
    if (o.backendSet) cfg.backend = o.backend;
    // The CUDA backend binds a communicator to the current device, as NCCL does.
    if (gpu) cudaSetDevice(team.deviceOf(worker, j, ndev));
    if (collieCommInitRankConfig(&impl->comms_[static_cast<size_t>(j)], team.nranks(), msg.id, team.rankOf(worker, j),
                                 &cfg) != collieSuccess)
      errors[static_cast<size_t>(j)] = std::string("collieCommInitRankConfig: ") + collieGetLastError(nullptr);
  };
  if (msg.ok) {
    // Every rank's init blocks until all ranks have joined: one thread per rank of this worker.
    std::vector<std::thread> threads;
    for (int j = 1; j < g; ++j) threads.emplace_back(initRank, j);
    initRank(0);
    for (std::thread& t : threads) t.join();
  }
  team.barrier(worker);
  if (worker == 0 && !algo.empty()) {
    gAlgoEnv.restore();
    gTuneEnv.restore();
    gOneLaunchEnv.restore();
  }

  std::string mine;
  if (!msg.ok) mine = "collieGetUniqueId failed on rank 0" + (rootError.empty() ? "" : ": " + rootError);
  for (const std::string& e : errors)
    if (mine.empty() && !e.empty()) mine = e;
  double failed = mine.empty() ? 0 : 1;
  team.allreduce(worker, &failed, 1, RedKind::kMax);
  if (failed > 0) {
    *err = mine.empty() ? "another rank could not create its communicator" : mine;
    return nullptr;
  }

  collieBackend_t backend = collieBackendHost;
  collieCommGetBackend(impl->comms_[0], &backend);
  if (backend == collieBackendCuda) {
    impl->setMemory(MemKind::kDevice);
    for (int j = 0; j < g; ++j) {
      int dev = 0;
      collieCommCuDevice(impl->comms_[static_cast<size_t>(j)], &dev);
      cudaSetDevice(dev);
      cudaStream_t s = rankStream(worker, j, err);
      if (s == nullptr) return nullptr;
      impl->streams_.push_back(s);
    }
  }
  return impl;
}

}  // namespace bench
}  // namespace collie
