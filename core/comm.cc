#include "core/comm.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <unordered_set>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "algorithms/tuner.h"
#include "base/cuda_check.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/cpu_share.h"
#include "core/errors.h"
#include "executor/direct_sends.h"
#include "executor/emulated_executor.h"
#include "executor/host_executor.h"
#include "executor/reduce_ops.h"
#include "executor/remote_proxy.h"
#include "executor/staged_executor.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/socket.h"
#include "transport/cuda_ipc/device_windows.h"
#include "transport/remote_window.h"
#include "transport/shm/shm_window.h"
#include "transport/ucx/ucx_windows.h"

collieComm::~collieComm() {
  executor.reset();  // the CUDA executor waits for its kernels here
  const bool healthy = !aborted.load() && asyncError.load() == collieSuccess;
  // The proxy sends what the executor left in its outboxes, then lets go of the transport.
  if (proxy) proxy->stop(healthy ? 5 : 1);
  // Lets the peers on other hosts take in our last puts (bounded), then closes.
  if (remote) remote->shutdown(healthy);
  if (backend == collieBackendCuda) collie::teardownCudaBackend(this);
}

void collieComm::breakWith(const collie::Status& why) {
  int none = collieSuccess;
  if (why.ok() || !asyncError.compare_exchange_strong(none, why.code())) return;
  std::lock_guard<std::mutex> lock(errorMu);
  brokenBy = why.message();
}

namespace collie {

namespace {

std::mutex gLiveMu;
std::unordered_set<const collieComm*>& liveComms() {
  static std::unordered_set<const collieComm*> set;
  return set;
}

// Reads the int config field at `offset` only if the caller's struct is big enough to have it.
int configField(const collieConfig_t* config, size_t offset, int fallback) {
  if (config == nullptr || config->size < offset + sizeof(int)) return fallback;
  int v;
  memcpy(&v, reinterpret_cast<const char*>(config) + offset, sizeof(v));
  return v == COLLIE_CONFIG_UNDEF_INT ? fallback : v;
}

// The same for a string field: nullptr when the caller's struct ends before it.
const char* configString(const collieConfig_t* config, size_t offset) {
  if (config == nullptr || config->size < offset + sizeof(const char*)) return nullptr;
  const char* v;
  memcpy(&v, reinterpret_cast<const char*>(config) + offset, sizeof(v));
  return v;
}

}  // namespace

}  // namespace collie

const collie::AlgorithmInfo* collieComm::algorithmFor(collie::Collective c, uint64_t bytes, bool direct,
                                                      bool* byTuner) {
  if (byTuner != nullptr) *byTuner = false;
  auto it = algoOverrides.find(c);
  // A program file may serve only part of the sizes (min_bytes/max_bytes): the tuner picks for the rest.
  if (it != algoOverrides.end() &&
      (it->second->file == nullptr || collie::fileServes(*it->second->file, collie::fileCallBytes(c, bytes, nranks))))
    return it->second;
  // All-to-all-v's byte count differs between ranks, and every rank must pick
  // the same algorithm, so only collectives whose size all ranks share are tuned.
  if (c == collie::Collective::kAllToAllv) return collie::defaultAlgorithm(c);
  if (byTuner != nullptr) *byTuner = true;
  const bool weighDirect = direct && tuneDirect;
  const auto key = std::make_tuple(c, bytes, weighDirect);
  auto hit = tuned.find(key);
  if (hit != tuned.end()) return hit->second;
  if (tuned.size() >= 64) tuned.clear();  // bounded, like the program cache: the sizes of one sweep
  return tuned.emplace(key, collie::tunedAlgorithm(c, bytes, nranks, topology, weighDirect)).first->second;
}

const collie::AlgorithmInfo* collieComm::algorithmForCall(collie::Collective c, uint64_t count, collieDataType_t type,
                                                          collieRedOp_t op) {
  const uint64_t bytes = count * collie::typeSize(type);
  bool byTuner = false;
  const collie::AlgorithmInfo* a = algorithmFor(c, bytes, true, &byTuner);
  if (a == nullptr || !a->mapsPeers || !byTuner) return a;
  // A pre-multiplied sum is a sum over inputs each rank scales first (core/redop.h).
  collie::ReduceOp rop = collie::ReduceOp::kSum;
  if (op < collieNumOps) collie::toReduceOp(op, &rop);
  if (executor->directFits(c, a->name, count, type, rop)) return a;
  return algorithmFor(c, bytes, false);
}

namespace collie {

void registerComm(collieComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveComms().insert(comm);
}
void unregisterComm(collieComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  liveComms().erase(comm);
}
bool commIsLive(const collieComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  return liveComms().count(comm) != 0;
}
bool pinComm(collieComm* comm) {
  std::lock_guard<std::mutex> lock(gLiveMu);
  if (liveComms().count(comm) == 0) return false;
  comm->users.fetch_add(1, std::memory_order_relaxed);
  return true;
}
void unpinComm(collieComm* comm) { comm->users.fetch_sub(1, std::memory_order_release); }
void retireComm(collieComm* comm) {
  unregisterComm(comm);  // no call pins it from now on
  const auto start = std::chrono::steady_clock::now();
  bool said = false;
  while (comm->users.load(std::memory_order_acquire) > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    if (!said && std::chrono::steady_clock::now() - start > std::chrono::seconds(1)) {
      COLLIE_WARN("rank %d: destroying the communicator waits for %d call(s) still running on it in other threads",
                  comm->rank, comm->users.load());
      said = true;
    }
  }
}

// Without a driver cudaGetDeviceCount fails and leaves the count unwritten, hence the 0.
bool gpuUsable(int* device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
    (void)cudaGetLastError();
    return false;
  }
  return cudaGetDevice(device) == cudaSuccess;
}

int nodeRanks(const std::vector<PeerInfo>& peers) {
  const auto same = [&](size_t a, size_t b) {
    return strncmp(peers[a].hostId, peers[b].hostId, sizeof(peers[a].hostId)) == 0;
  };
  size_t l = 1;
  while (l < peers.size() && same(0, l)) ++l;
  if (peers.size() % l != 0) return 1;
  for (size_t r = 0; r < peers.size(); ++r)
    if (!same(r, r - r % l) || (r % l == 0 && r > 0 && same(r, r - l))) return 1;
  return static_cast<int>(l);
}

std::string hostIdentity(int rank, int nranks) {
  if (std::optional<std::string> id = env::get("COLLIE_HOSTID")) return *id;
  bool bad = false;
  const int64_t fake = env::getInt("COLLIE_FAKE_NODES", 0, &bad);
  if (!bad && fake > 0) {
    // A test feature: one machine split into nodes of consecutive ranks, with
    // no per-rank variable (mpirun -x cannot give each rank its own value).
    EnvInit world;
    if (readEnvInit(&world).ok()) {
      rank = world.rank;
      nranks = world.nranks;
    }
    return "fakenode" + std::to_string(static_cast<int64_t>(rank) * fake / nranks);
  }
  return machineIdentity();
}

Status resolveConfig(const collieConfig_t* config, InitOptions* out) {
  if (config != nullptr) {
    if (config->magic != COLLIE_CONFIG_MAGIC)
      return Status::error(collieInvalidArgument,
                           "config: magic is 0x%x, not COLLIE_CONFIG_MAGIC; start from COLLIE_CONFIG_INITIALIZER",
                           config->magic);
    if (config->size < offsetof(collieConfig_t, blocking))
      return Status::error(collieInvalidArgument, "config: size %zu is too small", config->size);
  }
  InitOptions o;
  // Environment first, config over it: the program's explicit choice wins.
  if (std::optional<std::string> dev = env::get("COLLIE_DEVICE")) {
    if (*dev == "host")
      o.backend = collieBackendHost;
    else if (*dev == "cuda")
      o.backend = collieBackendCuda;
    else if (*dev == "auto")
      o.backend = collieBackendAuto;
    else
      return Status::error(collieInvalidArgument, "COLLIE_DEVICE=%s: expected host, cuda or auto", dev->c_str());
  }
  o.timeoutSec = env::getDouble("COLLIE_TIMEOUT", 300);
  o.initTimeoutSec = env::getDouble("COLLIE_INIT_TIMEOUT", 60);

  // blocking = 0 is accepted: init completes before it returns, which a
  // non-blocking caller sees as an init that finished at once (NCCL allows it).
  const int blocking = configField(config, offsetof(collieConfig_t, blocking), 1);
  if (blocking != 0 && blocking != 1)
    return Status::error(collieInvalidArgument, "config.blocking %d must be 0 or 1", blocking);
  const int backend = configField(config, offsetof(collieConfig_t, backend), o.backend);
  if (backend < collieBackendAuto || backend > collieBackendCuda)
    return Status::error(collieInvalidArgument, "config.backend %d is not a collieBackend_t", backend);
  o.backend = static_cast<collieBackend_t>(backend);
  const int timeoutMs = configField(config, offsetof(collieConfig_t, timeoutMs), -1);
  if (timeoutMs == 0 || timeoutMs < -1)
    return Status::error(collieInvalidArgument, "config.timeoutMs %d must be positive", timeoutMs);
  if (timeoutMs > 0) o.timeoutSec = timeoutMs / 1000.0;
  const int initMs = configField(config, offsetof(collieConfig_t, initTimeoutMs), -1);
  if (initMs == 0 || initMs < -1)
    return Status::error(collieInvalidArgument, "config.initTimeoutMs %d must be positive", initMs);
  if (initMs > 0) o.initTimeoutSec = initMs / 1000.0;
  if (!(o.timeoutSec > 0) || !(o.initTimeoutSec > 0))
    return Status::error(collieInvalidArgument, "COLLIE_TIMEOUT and COLLIE_INIT_TIMEOUT must be positive");
  // Anything longer is "never" in practice (inf included). Beyond it a deadline in nanoseconds would wrap: the
  // kernels add the timeout to %globaltimer, which counts from 1970, and an infinite one has no integer at all.
  constexpr double kLongestTimeoutSec = 1e9;  // about 31 years
  o.timeoutSec = std::min(o.timeoutSec, kLongestTimeoutSec);
  o.initTimeoutSec = std::min(o.initTimeoutSec, kLongestTimeoutSec);
  bool badCheck = false;
  const int64_t check = env::getInt("COLLIE_CHECK", 0, &badCheck);
  if (badCheck || check < 0 || check > 1)
    return Status::error(collieInvalidArgument, "COLLIE_CHECK must be 0 or 1 (compare each call across ranks)");
  o.checkCalls = check == 1;
  bool badTune = false;
  const int64_t tune = env::getInt("COLLIE_DIRECT_TUNE", 0, &badTune);
  if (badTune || tune < 0 || tune > 1)
    return Status::error(collieInvalidArgument,
                         "COLLIE_DIRECT_TUNE must be 0 or 1 (let the tuner choose the direct kernels)");
  o.directTune = tune == 1;
  bool badStaging = false;
  const int64_t staging = env::getInt("COLLIE_DIRECT_STAGING", 8 << 20, &badStaging);
  if (badStaging || staging < 0)
    return Status::error(collieInvalidArgument, "COLLIE_DIRECT_STAGING must be a byte count >= 0");
  o.directStaging = static_cast<uint64_t>(staging);
  bool badOneLaunch = false;
  const int64_t oneLaunch = env::getInt("COLLIE_DIRECT_ONE_LAUNCH", 0, &badOneLaunch);
  if (badOneLaunch || oneLaunch < 0 || oneLaunch > 1)
    return Status::error(collieInvalidArgument,
                         "COLLIE_DIRECT_ONE_LAUNCH must be 0 or 1 (one launch serves every rank of a one-shot "
                         "allreduce on one GPU)");
  o.directOneLaunch = oneLaunch == 1;
  if (std::optional<std::string> algo = env::get("COLLIE_ALGO")) {
    COLLIE_RETURN_IF_ERROR(parseAlgorithmOverrides(*algo, &o.algoOverrides));
    o.algoSpec = *algo;
  }
  if (const char* algo = configString(config, offsetof(collieConfig_t, algo))) {
    std::map<Collective, const AlgorithmInfo*> chosen;
    COLLIE_RETURN_IF_ERROR(parseAlgorithmOverrides(algo, &chosen, "config.algo"));
    for (const auto& c : chosen) o.algoOverrides[c.first] = c.second;
    o.algoSpec += (o.algoSpec.empty() ? "" : ";") + std::string(algo);
  }
  *out = o;
  return Status();
}

Status readLLLayout(WindowLayout* layout) {
  bool bad = false;
  const int64_t llSlot = env::getInt("COLLIE_LL_SLOT_BYTES", 16 << 10, &bad);
  // An LL launch stages two slices' payload (half a slot each) in shared
  // memory, beside 32 bytes per rank: 64 KiB slots need 64 KiB + 32 x ranks,
  // within what every GPU we build for lets a block opt in to (A100: 163 KiB).
  if (bad || llSlot < 1024 || llSlot > (64 << 10))
    return Status::error(collieInvalidArgument, "COLLIE_LL_SLOT_BYTES must be 1024..65536");
  // A test setting: a short period makes the flags wrap within seconds, to show that stale lines are rewritten
  // in time (kernels/device_prims_ll.cuh). Every rank must use the same; the window header says which.
  const int64_t period = env::getInt("COLLIE_TEST_LL_FLAG_PERIOD", kLLFlagPeriod, &bad);
  const uint32_t least = llFlagPeriodMin(layout->nslots);
  if (bad || period < least || period > kLLFlagPeriod || (period & (period - 1)) != 0)
    return Status::error(
        collieInvalidArgument,
        "COLLIE_TEST_LL_FLAG_PERIOD must be a power of two from %u (4 x COLLIE_SLOTS, and 16 at least) "
        "to %u",
        least, kLLFlagPeriod);
  layout->llSlotBytes = static_cast<uint32_t>(llSlot) & ~uint32_t{15};
  layout->llFlagPeriod = static_cast<uint32_t>(period);
  return Status();
}

Status readProtocol(bool spansHosts, uint64_t* llMaxBytes) {
  // LL for calls up to 64 KiB (auto), never (simple) or as far as the LL slots
  // allow (ll); all ranks must agree, like COLLIE_ALGO.
  const std::string proto = env::get("COLLIE_PROTO").value_or("auto");
  if (proto == "auto") {
    *llMaxBytes = 64 << 10;
  } else if (proto == "ll") {
    *llMaxBytes = UINT64_MAX;
  } else if (proto == "simple") {
    *llMaxBytes = 0;
  } else {
    return Status::error(collieInvalidArgument, "COLLIE_PROTO=%s: expected simple, ll or auto", proto.c_str());
  }
  // Across hosts the proxy forwards Simple slices only: an LL slice carries no byte count it could read.
  if (spansHosts) *llMaxBytes = 0;
  return Status();
}

bool takesLowLatency(const collieComm& comm, const AlgorithmInfo& algo, Collective collective, uint64_t count,
                     size_t elemSize) {
  const uint64_t llElems = comm.executor->roundElemsLL(elemSize);
  // A program file may ask for a protocol (MSCCL's proto): Simple never takes LL, LL takes it at any size that
  // fits one round of LL slots. LL never where the communicator has none (llMaxBytes 0: across hosts,
  // COLLIE_PROTO=simple).
  const FileProtocol asked = algo.file != nullptr ? algo.file->protocol : FileProtocol::kAuto;
  const uint64_t most = asked == FileProtocol::kSimple
                            ? 0
                            : (asked == FileProtocol::kLL && comm.llMaxBytes > 0 ? UINT64_MAX : comm.llMaxBytes);
  return llElems > 0 && count * elemSize <= most && collective != Collective::kAllToAllv &&
         count <= roundCount(algo, comm.nranks, llElems, comm.topology.ranksPerNode);
}

Status readEnvInit(EnvInit* out) {
  EnvInit e;
  const char* rankVar = nullptr;
  const char* sizeVar = nullptr;
  if (env::get("COLLIE_RANK") || env::get("COLLIE_WORLD_SIZE")) {
    rankVar = "COLLIE_RANK";
    sizeVar = "COLLIE_WORLD_SIZE";
  } else if (env::get("OMPI_COMM_WORLD_RANK")) {
    rankVar = "OMPI_COMM_WORLD_RANK";
    sizeVar = "OMPI_COMM_WORLD_SIZE";
  } else if (env::get("SLURM_PROCID")) {
    rankVar = "SLURM_PROCID";
    sizeVar = "SLURM_NTASKS";
  } else {
    return Status::error(collieInvalidUsage,
                         "environment init: none of COLLIE_RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID is set; start "
                         "the program with collie-run, mpirun or srun");
  }
  bool badRank = false, badSize = false;
  // Range-checked as 64-bit values before the narrowing: COLLIE_WORLD_SIZE=4294967298 must not pass as 2.
  const int64_t rank = env::getInt(rankVar, -1, &badRank);
  const int64_t nranks = env::getInt(sizeVar, -1, &badSize);
  if (badSize || nranks < 1 || nranks > (1 << 20))
    return Status::error(collieInvalidArgument, "environment init: %s must be a positive integer", sizeVar);
  e.nranks = static_cast<int>(nranks);
  if (badRank || rank < 0 || rank >= nranks)
    return Status::error(collieInvalidArgument, "environment init: %s must be in [0, %d)", rankVar, e.nranks);
  e.rank = static_cast<int>(rank);
  if (std::optional<std::string> root = env::get("COLLIE_ROOT")) {
    if (!parseHostPort(*root, &e.rootHost, &e.rootPort))
      return Status::error(collieInvalidArgument, "COLLIE_ROOT=%s: expected host:port", root->c_str());
    e.haveRoot = true;
  }
  *out = e;
  return Status();
}

Status commInitFromEnv(const InitOptions& options, collieComm** out) {
  EnvInit e;
  COLLIE_RETURN_IF_ERROR(readEnvInit(&e));
  UniqueIdInfo info;
  collieUniqueId id;
  if (!e.haveRoot) {
    if (e.nranks != 1)
      return Status::error(collieInvalidUsage,
                           "environment init of %d ranks needs COLLIE_ROOT=host:port (an address of rank 0's host and "
                           "a free port; collie-run sets it)",
                           e.nranks);
    // A single rank needs no rendezvous partner: serve our own.
    Secret secret;
    COLLIE_RETURN_IF_ERROR(randomSecret(&secret));
    COLLIE_RETURN_IF_ERROR(startRendezvousRoot("127.0.0.1", 0, secret, options.initTimeoutSec, &id));
    return commInit(id, 1, 0, options, out);
  }
  if (std::optional<std::string> hex = env::get("COLLIE_SECRET")) {
    if (!parseSecretHex(*hex, &info.secret))
      return Status::error(collieInvalidArgument, "COLLIE_SECRET must be 32 hexadecimal digits");
  } else {
    // Without a shared secret every rank derives the same one from the root
    // address: the job still works, but anyone who can reach the port can join.
    const std::string seed = e.rootHost + ":" + std::to_string(e.rootPort);
    const uint64_t h1 = fnv1a(seed.data(), seed.size());
    const uint64_t h2 = fnv1a(seed.data(), seed.size(), 7809847782465536322ull);
    memcpy(info.secret.bytes, &h1, 8);
    memcpy(info.secret.bytes + 8, &h2, 8);
    if (e.rank == 0)
      COLLIE_INFO(
          "COLLIE_SECRET is not set: the rendezvous secret is derived from COLLIE_ROOT (weaker); "
          "collie-run sets a random one");
  }
  // The unique id carries a numeric address: resolve a host name once, here.
  SockAddr root;
  COLLIE_RETURN_IF_ERROR(resolveAddress(e.rootHost, e.rootPort, &root).withContext("COLLIE_ROOT"));
  info.host = root.host();
  info.port = e.rootPort;
  if (e.rank == 0) {
    COLLIE_RETURN_IF_ERROR(startRendezvousRoot(info.host, info.port, info.secret, options.initTimeoutSec, &id));
  } else {
    encodeUniqueId(info, &id);
  }
  return commInit(id, e.nranks, e.rank, options, out);
}

}  // namespace collie
