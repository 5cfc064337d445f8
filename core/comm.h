// The communicator: one rank's membership of a clique, the transports it set
// up at init, and the executor that runs its collectives. Created by
// commInit(), reached from the C API through collieComm_t.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "algorithms/program.h"
#include "algorithms/topology.h"
#include "base/peer_info.h"
#include "base/status.h"
#include "collie.h"
#include "core/memory.h"
#include "core/redop.h"

namespace collie {
struct AlgorithmInfo;
class Bootstrap;
class ShmWindows;
class RemoteWindows;
class RemoteProxy;
class DevicePool;
class BufferWindows;
class DeviceWindows;
class Executor;
struct WindowLayout;
}  // namespace collie

namespace collie {
struct CommProgramKey {
  const void* algorithm;  // its AlgorithmInfo
  uint64_t count, stride;
  int root;
  bool operator<(const CommProgramKey& o) const {
    return std::tie(algorithm, count, stride, root) < std::tie(o.algorithm, o.count, o.stride, o.root);
  }
};
}  // namespace collie

struct collieComm {
  int rank = 0;
  int nranks = 1;
  collieBackend_t backend = collieBackendHost;
  int cudaDevice = -1;
  double timeoutSec = 300;
  double initTimeoutSec = 60;  // inherited by collieCommSplit's children

  std::unique_ptr<collie::Bootstrap> bootstrap;
  std::vector<collie::PeerInfo> peers;
  std::unique_ptr<collie::ShmWindows> windows;
  // Peers on other hosts through a proxy thread (COLLIE_GPU_REMOTE=proxy, COLLIE_TEST_PROXY_HOST), which forwards to
  // `remote`; declared before it, so freed after it (the transport writes into the proxy's inbox).
  std::unique_ptr<collie::RemoteProxy> proxy;
  std::unique_ptr<collie::RemoteWindows> remote;         // UCX to ranks on other hosts; null when all share ours
  std::shared_ptr<collie::DevicePool> devicePool;        // CUDA backend: its device memory (base/device_memory.h)
  std::unique_ptr<collie::DeviceWindows> deviceWindows;  // CUDA backend
  // CUDA backend with peer processes and the direct kernels: windows of buffers (collieCommWindowRegister)
  std::unique_ptr<collie::BufferWindows> bufferWindows;
  std::unique_ptr<collie::Executor> executor;
  size_t hostFootprint = 0;                // bytes of windows this rank owns
  size_t deviceFootprint = 0;              // CUDA backend: device bytes this rank holds at init
  void* deviceToken = nullptr;             // CUDA backend: collieBarrier's byte, in device memory
  collieStream_t streamChecked = nullptr;  // CUDA backend: the last stream found to be of our GPU
  uint64_t llMaxBytes = 0;                 // CUDA backend: calls up to this size use the LL protocol (COLLIE_PROTO)

  std::atomic<bool> aborted{false};
  std::atomic<bool> revoked{false};  // collieCommRevoke: aborted too, but split and shrink may follow
  std::atomic<int> users{0};         // API calls running on this comm now (pinComm): abort and destroy wait for them
  std::atomic<int> asyncError{collieSuccess};  // set when a collective fails mid-way: the comm is broken
  bool finalized = false;
  uint64_t seq = 0;           // collectives and send/receive groups issued so far
  uint64_t collectives = 0;   // collectives alone: every rank makes them in the same order
  bool checkCalls = false;    // COLLIE_CHECK: compare each collective's arguments across ranks first
  uint64_t checkedCalls = 0;  // collectives compared so far (core/call_check.h)
  uint8_t barrierToken = 0;   // collieBarrier's one byte, here because a grouped call runs later

  // COLLIE_ALGO: the algorithm to use per collective, overriding the tuner.
  std::map<collie::Collective, const collie::AlgorithmInfo*> algoOverrides;
  // What the tuner predicts on: the built-in "host" topology sized to this communicator.
  collie::Topology topology;
  // COLLIE_DIRECT_TUNE=1 on every rank, and every peer's device window mapped (the CUDA executor's direct
  // kernels run here): the tuner weighs the direct algorithms too.
  bool tuneDirect = false;
  bool directTuneOption = false;  // COLLIE_DIRECT_TUNE as init found it, and COLLIE_DIRECT_STAGING: for splits
  uint64_t directStaging = 0;
  bool directOneLaunch = false;  // COLLIE_DIRECT_ONE_LAUNCH as init found it: for splits
  // The tuner's answers for this communicator, by (collective, bytes, direct ones weighed): a repeated
  // call neither rebuilds the tuner's key nor takes its process-wide lock.
  std::map<std::tuple<collie::Collective, uint64_t, bool>, const collie::AlgorithmInfo*> tuned;
  /// The algorithm for a call of `c` moving `bytes` per rank: the override, else the tuner's choice (among the
  /// direct algorithms too where tuneDirect and `direct`); nullptr when `c` has none. *byTuner, if given, says
  /// whether the tuner chose.
  const collie::AlgorithmInfo* algorithmFor(collie::Collective c, uint64_t bytes, bool direct = true,
                                            bool* byTuner = nullptr);
  /// The algorithm a call runs: algorithmFor's, except that a direct algorithm the tuner chose stands only where
  /// the executor runs this very call with it on every rank (Executor::directFits, which looks at nothing one
  /// rank could see differently); elsewhere the tuner's choice among the others.
  const collie::AlgorithmInfo* algorithmForCall(collie::Collective c, uint64_t count, collieDataType_t type,
                                                collieRedOp_t op);

  // Programs built so far, by (algorithm, count, stride, root).
  std::map<collie::CommProgramKey, collie::Program> programs;

  std::mutex errorMu;
  std::string lastError;
  std::string brokenBy;  // the sentence of the failure that broke the comm (asyncError), for every later refusal

  /// Marks the comm broken by `why` (a collective that failed mid-way, or a kernel's failure found later). The
  /// first failure is the one kept: later calls are refused naming it, since the rank it names is where to look.
  void breakWith(const collie::Status& why);

  // Guards redOps and registrations, which any thread may change while a group runs the comm's calls.
  std::mutex resourceMu;
  std::vector<collie::PreMulSum> redOps;          // core/redop.cc: entry i is operator collieNumOps + i
  std::list<collie::Registration> registrations;  // core/memory.cc: a handle is its entry's address
  std::list<collie::Window> bufferWindowList;     // core/memory.cc: a collieWindow_t is its entry's address

  ~collieComm();
};

namespace collie {

/// Options of a new communicator after config and environment are merged.
struct InitOptions {
  collieBackend_t backend = collieBackendAuto;
  int cudaDevice = -1;  // CUDA backend: -1 = the calling thread's current device
  double timeoutSec = 300;
  double initTimeoutSec = 60;
  std::map<Collective, const AlgorithmInfo*> algoOverrides;  // COLLIE_ALGO
  std::string algoSpec;                                      // the same, as text for messages
  bool checkCalls = false;                                   // COLLIE_CHECK (core/call_check.h)
  bool directTune = false;                                   // COLLIE_DIRECT_TUNE (collieComm::tuneDirect)
  uint64_t directStaging = 8 << 20;                          // COLLIE_DIRECT_STAGING: bytes of the staging buffer
  bool directOneLaunch = false;                              // COLLIE_DIRECT_ONE_LAUNCH (executor/cuda_one_launch.cc)
};

/// Merges a caller's config (may be NULL) with COLLIE_DEVICE / COLLIE_TIMEOUT /
/// COLLIE_INIT_TIMEOUT / COLLIE_ALGO.
Status resolveConfig(const collieConfig_t* config, InitOptions* out);
/// COLLIE_LL_SLOT_BYTES and COLLIE_TEST_LL_FLAG_PERIOD, checked, into layout->llSlotBytes (a multiple of 16) and
/// layout->llFlagPeriod; layout->nslots must be set (the least period depends on it).
Status readLLLayout(WindowLayout* layout);
/// COLLIE_PROTO, checked: calls up to *llMaxBytes take the LL protocol (0 across hosts).
Status readProtocol(bool spansHosts, uint64_t* llMaxBytes);
/// Whether `comm` runs a call of `count` elements of `elemSize` bytes with `algo` on the LL protocol: calls up to
/// comm.llMaxBytes that fit one LL slice per chunk on every channel (one round), never all-to-all-v; a program
/// file's protocol (ProgramFile::protocol) replaces the size limit.
bool takesLowLatency(const collieComm& comm, const AlgorithmInfo& algo, Collective collective, uint64_t count,
                     size_t elemSize);

/// The CUDA half of commInit (core/comm_cuda.cc): device windows, the CUDA
/// executor, the barrier byte; for peers on other hosts (otherHost[r]) the
/// proxy and UCX, its thread polling `spins` times before it yields.
/// Collective over the bootstrap.
Status setupCudaBackend(collieComm* comm, const InitOptions& options, const std::vector<bool>& otherHost, int spins);
/// Whether the CUDA backend can reach every peer's device window on this host directly (the same GPU, P2P, or a
/// cudaIpc handle), agreed by every rank: false when any rank's GPU cannot reach a GPU of its host by P2P or any
/// rank set COLLIE_P2P=0. Then device buffers go through pinned host memory (the staged path), said in the log.
/// Collective over the bootstrap.
Status agreeOnDirectPeers(collieComm* comm, bool* direct);
/// collieBarrier's byte in device memory (CUDA backend, also on the staged path), from comm->devicePool (made
/// here if setupCudaBackend has not).
Status allocateDeviceToken(collieComm* comm, double timeoutSec);
/// Frees what setupCudaBackend made, after the peers stopped using it.
void teardownCudaBackend(collieComm* comm);

/// Creates rank `rank` of `nranks` of the communicator named by `id`.
Status commInit(const collieUniqueId& id, int nranks, int rank, const InitOptions& options, collieComm** out);

/// The options a child of `comm` (collieCommSplit, collieCommShrink) inherits when no config is given.
InitOptions inheritedOptions(collieComm* comm);
/// Where a child's rendezvous root listens: loopback when every rank of `comm` is on this host (no interface
/// choice needed), else "" (the default interface).
std::string splitRendezvousHost(collieComm* comm);

/// Reads rank, size, rendezvous and secret from a launcher's environment.
struct EnvInit {
  int rank = 0;
  int nranks = 1;
  std::string rootHost;
  int rootPort = 0;
  bool haveRoot = false;
};
Status readEnvInit(EnvInit* out);
Status commInitFromEnv(const InitOptions& options, collieComm** out);

/// Live-handle registry: lets every call tell a real communicator from a
/// destroyed or made-up pointer without touching freed memory.
void registerComm(collieComm* comm);
void unregisterComm(collieComm* comm);
bool commIsLive(const collieComm* comm);
/// Marks a call running on `comm` when it is live (false when not), so that
/// collieCommAbort or collieCommDestroy on another thread waits for the call
/// to return before freeing it. unpinComm ends the mark.
bool pinComm(collieComm* comm);
void unpinComm(collieComm* comm);
/// Unregisters `comm`, then waits until no call of another thread runs on it.
/// Such a call ends promptly once the comm is aborted, else within COLLIE_TIMEOUT.
void retireComm(collieComm* comm);

/// Whether the CUDA runtime finds a device; then *device is the calling thread's current one.
bool gpuUsable(int* device);

/// How many consecutive ranks share a host when every host holds the same
/// number of consecutive ranks (all ranks when they share one); else 1, so
/// node-aware algorithms treat every rank as its own node.
int nodeRanks(const std::vector<PeerInfo>& peers);

/// The host identity of `rank` of `nranks` in this process: COLLIE_HOSTID, else
/// with COLLIE_FAKE_NODES=K fake node floor(r*K/N) of the launcher's world rank
/// r of N (the communicator's rank without a launcher), else hostname + boot id.
std::string hostIdentity(int rank, int nranks);

}  // namespace collie
