// commInit: how a rank becomes a communicator, in named phases.
//
//   choosePlace      the backend (the GPU when one is usable, else the host) and the CUDA device
//   describeRank     what this rank tells its peers (PeerInfo): host, process, GPU, window size, settings
//   checkProgramFiles  program files named by COLLIE_ALGO fit this communicator (rank count, slots)
//   meetPeers        the bootstrap rendezvous: every rank's PeerInfo
//   checkPeersAgree  settings that must match on every rank (COLLIE_ALGO, COLLIE_CHECK, backend, window);
//                    which peers share this host
//   setTopology      what the tuner's cost model knows of the ranks' placement
//   then one of two backends: the CUDA backend over peers' device windows (core/comm_cuda.cc), or
//   openHostWindows + makeHostExecutor: shared-memory windows, UCX to other hosts, and the executor that runs
//   programs over them (host, staged copies of device buffers, emulated kernels)
//
// Every phase that can fail returns a Status naming what is wrong; a rank that fails leaves its peers to time
// out at their next rendezvous with a sentence naming it.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/program_file.h"
#include "algorithms/registry.h"
#include "base/cuda_check.h"
#include "base/env.h"
#include "base/hash.h"
#include "base/log.h"
#include "core/comm.h"
#include "core/cpu_share.h"
#include "executor/direct_sends.h"
#include "executor/emulated_executor.h"
#include "executor/host_executor.h"
#include "executor/launch_plan.h"
#include "executor/remote_proxy.h"
#include "executor/staged_executor.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda_ipc/device_windows.h"
#include "transport/remote_window.h"
#include "transport/shm/shm_window.h"
#include "transport/ucx/ucx_windows.h"

namespace collie {

namespace {

// The inode of our pid namespace: containers on one machine may number processes apart.
uint64_t pidNamespace() {
  struct stat st;
  return stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// What init's phases hand each other.
struct InitPlan {
  PeerInfo me;
  std::string hostId;
  // COLLIE_TEST_EMULATE_KERNELS (a test mode of host communicators): the kernels' code on host threads.
  int emulated = 0;
  WindowLayout layout;
  std::vector<bool> sameHost, otherHost;  // per rank: on this host or not
  int farPeer = -1;                       // a rank on another host, if any: then UCX reaches those
};

// What the host path built, for the ready line.
struct HostPath {
  bool proxyHost = false;         // the host executor reaches other hosts through the proxy thread
  bool stageHost = false;         // COLLIE_TEST_STAGE_HOST: the host executor over staged copies
  size_t staging = 0;             // bytes for UCX: proxy inbox, outboxes, tables
  std::vector<uint8_t*> windows;  // per rank: its window as this rank maps it (null: reached over UCX)
  std::vector<bool> inProcess;    // per rank: a thread of this process, whose large sends are read in place
  int64_t directBytes = 0;        // COLLIE_DIRECT_READ_BYTES: the smallest send read in place
};

// COLLIE_TEST_EMULATE_KERNELS=N (a test mode): host threads per emulated block; 0 when off.
Status emulatedThreads(int* out) {
  bool bad = false;
  const int64_t n = env::getInt("COLLIE_TEST_EMULATE_KERNELS", 0, &bad);
  if (bad || n < 0 || n > 64)
    return Status::error(collieInvalidArgument,
                         "COLLIE_TEST_EMULATE_KERNELS must be 0..64 (host threads per emulated block; 0: off)");
  *out = static_cast<int>(n);
  return Status();
}

// The window geometry every rank derives from the same environment; checked
// against each peer's header at init, so a mismatch is an error, not garbage.
// `ll`: the window also holds LL slots (the emulated kernels run that protocol too).
Status windowLayout(int nranks, bool ll, WindowLayout* layout) {
  bool bad = false;
  const int64_t slots = env::getInt("COLLIE_SLOTS", 4, &bad);
  if (bad || slots < 2 || slots > 64) return Status::error(collieInvalidArgument, "COLLIE_SLOTS must be 2..64");
  const int64_t slotBytes = env::getInt("COLLIE_SLOT_BYTES", 1 << 18, &bad);
  if (bad || slotBytes < 4096 || slotBytes > (1 << 26))
    return Status::error(collieInvalidArgument, "COLLIE_SLOT_BYTES must be 4096..64 MiB");
  const int64_t bound = env::getInt("COLLIE_WINDOW_BYTES", 16 << 20, &bad);
  if (bad || bound < 4096) return Status::error(collieInvalidArgument, "COLLIE_WINDOW_BYTES must be >= 4096");
  // Shrink slots so that nranks * slots * slotBytes stays within the bound.
  // One channel by default; more only to test the GPU's channel split on the CPU.
  const int64_t channels = env::getInt("COLLIE_CHANNELS", 1, &bad);
  if (bad || channels < 1 || channels > 32)
    return Status::error(collieInvalidArgument, "COLLIE_CHANNELS must be 1..32");
  int64_t fit = bound / (static_cast<int64_t>(nranks) * slots * channels);
  fit = std::max<int64_t>(4096, fit & ~int64_t{4095});
  layout->nchannels = static_cast<uint32_t>(channels);
  layout->nranks = static_cast<uint32_t>(nranks);
  layout->nslots = static_cast<uint32_t>(slots);
  layout->slotBytes = static_cast<uint64_t>(std::min(slotBytes, fit)) & ~uint64_t{15};
  // LL slots follow the Simple ones, as in a device window.
  if (ll) COLLIE_RETURN_IF_ERROR(readLLLayout(layout));
  return Status();
}

Status choosePlace(const InitOptions& options, collieComm* comm) {
  int device = -1;
  const bool gpu = gpuUsable(&device);
  if (options.backend == collieBackendCuda && !gpu)
    return Status::error(collieInvalidUsage,
                         "the CUDA backend was asked for (COLLIE_DEVICE=cuda or config.backend) but no GPU is usable "
                         "(cudaGetDeviceCount finds none)");
  // The default is the GPU when there is one: the communicator then expects device buffers.
  comm->backend = options.backend == collieBackendHost || !gpu ? collieBackendHost : collieBackendCuda;
  if (comm->backend == collieBackendCuda) comm->cudaDevice = options.cudaDevice >= 0 ? options.cudaDevice : device;
  return Status();
}

Status describeRank(const collieComm& comm, const InitOptions& options, InitPlan* plan) {
  PeerInfo& me = plan->me;
  memset(&me, 0, sizeof(me));
  plan->hostId = hostIdentity(comm.rank, comm.nranks);
  strncpy(me.hostId, plan->hostId.c_str(), sizeof(me.hostId) - 1);
  me.pid = getpid();
  me.cudaDevice = comm.cudaDevice;
  if (comm.backend == collieBackendCuda) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, comm.cudaDevice) == cudaSuccess) {
      memcpy(me.gpuUuid, prop.uuid.bytes, sizeof(me.gpuUuid));
    } else {
      (void)cudaGetLastError();
    }
  }
  me.backend = comm.backend;
  me.checkCalls = options.checkCalls ? 1 : 0;
  me.directTune = options.directTune ? 1 : 0;
  me.directStaging = options.directStaging;
  me.oneLaunch = options.directOneLaunch ? 1 : 0;
  me.pidNamespace = pidNamespace();
  describeCpus(&me);

  COLLIE_RETURN_IF_ERROR(emulatedThreads(&plan->emulated));
  if (comm.backend == collieBackendCuda) plan->emulated = 0;
  COLLIE_RETURN_IF_ERROR(windowLayout(comm.nranks, plan->emulated > 0, &plan->layout));
  me.windowBytes = plan->layout.totalBytes();
  std::string canonical;  // order- and spelling-independent form of the overrides
  for (const auto& o : options.algoOverrides) {
    canonical += std::string(collectiveName(o.first)) + ":" + o.second->name + ";";
    // A program file by its text: ranks that load different files under one name, or one file by two
    // paths, must differ or agree accordingly.
    if (o.second->file != nullptr) canonical += std::to_string(o.second->file->hash) + ";";
  }
  me.algoHash = fnv1a(canonical.data(), canonical.size());
  return Status();
}

Status meetPeers(const collieUniqueId& id, const InitOptions& options, const InitPlan& plan, collieComm* comm) {
  PeerInfo me = plan.me;
  COLLIE_RETURN_IF_ERROR(
      Bootstrap::create(id, comm->rank, comm->nranks, &me, sizeof(me), options.initTimeoutSec, &comm->bootstrap));
  comm->bootstrap->setTimeout(options.timeoutSec);
  comm->peers.resize(static_cast<size_t>(comm->nranks));
  for (int r = 0; r < comm->nranks; ++r)
    memcpy(&comm->peers[static_cast<size_t>(r)], comm->bootstrap->info(r), sizeof(me));
  return Status();
}

Status checkPeersAgree(const collieComm& comm, const InitOptions& options, InitPlan* plan) {
  const PeerInfo& me = plan->me;
  const int nranks = comm.nranks, rank = comm.rank;
  plan->sameHost.assign(static_cast<size_t>(nranks), false);
  plan->otherHost.assign(static_cast<size_t>(nranks), false);
  for (int r = 0; r < nranks; ++r) {
    const PeerInfo& p = comm.peers[static_cast<size_t>(r)];
    const bool same = strncmp(p.hostId, me.hostId, sizeof(me.hostId)) == 0;
    plan->sameHost[static_cast<size_t>(r)] = same;
    plan->otherHost[static_cast<size_t>(r)] = !same;
    if (!same && plan->farPeer < 0) plan->farPeer = r;
    if (p.algoHash != me.algoHash)
      return Status::error(collieInvalidUsage,
                           "rank %d was started with a different COLLIE_ALGO than rank %d (\"%s\"): all ranks must "
                           "choose the same algorithms",
                           r, rank, options.algoSpec.c_str());
    if (p.checkCalls != me.checkCalls)
      return Status::error(collieInvalidUsage,
                           "rank %d runs with COLLIE_CHECK=%d, rank %d with COLLIE_CHECK=%d: set it alike on all ranks",
                           r, p.checkCalls, rank, me.checkCalls);
    if (p.directTune != me.directTune || p.directStaging != me.directStaging)
      return Status::error(collieInvalidUsage,
                           "rank %d runs with COLLIE_DIRECT_TUNE=%d COLLIE_DIRECT_STAGING=%llu, rank %d with "
                           "COLLIE_DIRECT_TUNE=%d COLLIE_DIRECT_STAGING=%llu: set them alike on all ranks",
                           r, p.directTune, static_cast<unsigned long long>(p.directStaging), rank, me.directTune,
                           static_cast<unsigned long long>(me.directStaging));
    if (p.oneLaunch != me.oneLaunch)
      return Status::error(collieInvalidUsage,
                           "rank %d runs with COLLIE_DIRECT_ONE_LAUNCH=%d, rank %d with COLLIE_DIRECT_ONE_LAUNCH=%d: "
                           "set it alike on all ranks",
                           r, p.oneLaunch, rank, me.oneLaunch);
    if (p.backend != me.backend)
      return Status::error(collieInvalidUsage,
                           "rank %d runs the %s backend, rank %d the %s one: set COLLIE_DEVICE (or config.backend) "
                           "alike on all ranks",
                           r, p.backend == collieBackendCuda ? "cuda" : "host", rank,
                           me.backend == collieBackendCuda ? "cuda" : "host");
    if (p.windowBytes != me.windowBytes)
      return Status::error(collieInvalidUsage,
                           "rank %d uses a %llu-byte window, rank %d a %llu-byte one: set COLLIE_SLOTS, "
                           "COLLIE_SLOT_BYTES and COLLIE_WINDOW_BYTES alike on all ranks",
                           r, static_cast<unsigned long long>(p.windowBytes), rank,
                           static_cast<unsigned long long>(me.windowBytes));
  }
  return Status();
}

// Program files named by COLLIE_ALGO (algorithms/program_file.h) were proved when they were loaded; here, where
// the rank count and the slots are known, each must be for this many ranks and must not deadlock on the
// window's slots as the executor cuts it into rounds. Every rank reaches the same verdict from the same file.
Status checkProgramFiles(const collieComm& comm, const InitOptions& options, const InitPlan& plan) {
  for (const auto& o : options.algoOverrides) {
    const ProgramFile* file = o.second->file;
    if (file == nullptr) continue;
    const char* path = o.second->description;
    if (file->nranks != comm.nranks)
      return Status::error(collieInvalidUsage, "COLLIE_ALGO: %s is for %d ranks; this communicator has %d", path,
                           file->nranks, comm.nranks);
    COLLIE_RETURN_IF_ERROR(verifyFileSlots(*file, path, plan.layout.nslots).withContext("COLLIE_ALGO"));
  }
  return Status();
}

void setTopology(const InitOptions& options, const InitPlan& plan, collieComm* comm) {
  comm->algoOverrides = options.algoOverrides;
  comm->checkCalls = options.checkCalls;
  comm->directTuneOption = options.directTune;
  comm->directStaging = options.directStaging;
  comm->directOneLaunch = options.directOneLaunch;
  comm->topology = *findTopology("host");
  comm->topology.nranks = comm->nranks;
  comm->topology.ranksPerNode = nodeRanks(comm->peers);
  if (plan.farPeer >= 0) {
    // Between hosts every slice is one UCX active message (a large one by rendezvous), and it lands only when the
    // peer calls into UCX. The latency lies between what collie-bench measures across fake nodes over UCX shared
    // memory (about 0.3 us more than on one host for 2 ranks, 5-12 us per 8 B call for 4 ranks) and a real
    // network's few microseconds.
    comm->topology.inter = LinkClass::kNetwork;
    comm->topology.link(LinkClass::kNetwork) = LinkCost{20e-6, 1.0 / 1.5e9};
  }
}

// Peers of our host map our window; the others write into it over UCX. All on one host (the common case)
// creates no UCX object at all. Returns the host executor over the windows, its peers told apart.
Status openHostWindows(const InitOptions& options, const InitPlan& plan, collieComm* comm, HostPath* path,
                       std::unique_ptr<HostExecutor>* out) {
  const int nranks = comm->nranks, rank = comm->rank;
  const PeerInfo& me = plan.me;
  const WindowLayout& layout = plan.layout;
  COLLIE_RETURN_IF_ERROR(ShmWindows::create(comm->bootstrap.get(), layout.totalBytes(), &comm->windows, plan.sameHost));
  // COLLIE_TEST_PROXY_HOST (a test mode): the host executor reaches other hosts the
  // way the GPU kernels would, through a proxy thread (executor/remote_proxy.h).
  bool badProxy = false;
  // The emulated kernels, like the real ones, reach other hosts only through the proxy.
  path->proxyHost = plan.farPeer >= 0 && comm->backend != collieBackendCuda &&
                    ((env::getInt("COLLIE_TEST_PROXY_HOST", 0, &badProxy) != 0 && !badProxy) || plan.emulated > 0);
  if (path->proxyHost)
    COLLIE_RETURN_IF_ERROR(RemoteProxy::create(rank, layout, plan.otherHost, RemoteProxy::hostMemory(), &comm->proxy));
  if (plan.farPeer >= 0)
    COLLIE_RETURN_IF_ERROR(createUcxWindows(comm->bootstrap.get(), plan.otherHost,
                                            path->proxyHost ? comm->proxy->inboxHost() : comm->windows->window(rank),
                                            layout.totalBytes(), &comm->remote));
  std::vector<uint8_t*>& windows = path->windows;
  windows.resize(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) windows[static_cast<size_t>(r)] = comm->windows->window(r);
  const int spins = spinPolls(comm->peers, rank);
  auto host = std::make_unique<HostExecutor>(rank, layout, windows, &comm->aborted, options.timeoutSec, spins);
  path->staging = path->proxyHost ? comm->proxy->footprint() : host->setRemote(comm->remote.get());
  // Peers that are other processes of this very machine (never faked, unlike hostId) and whose window we map: a
  // dead one is noticed. Not those reached over UCX (fake nodes of this machine): a peer that finished and exited
  // may have left messages in our transport that only our next progress calls take in, so its exit proves nothing.
  std::vector<int> pids(static_cast<size_t>(nranks), 0);
  // Ranks that are threads of this process (mapped windows, no proxy between us) reach our memory with plain
  // loads: large sends are read in place from our buffers instead of through their slots
  // (executor/direct_sends.h). COLLIE_DIRECT_READ_BYTES sets the smallest such send; negative: none.
  std::vector<bool>& inProcess = path->inProcess;
  inProcess.assign(static_cast<size_t>(nranks), false);
  for (int r = 0; r < nranks; ++r) {
    const PeerInfo& p = comm->peers[static_cast<size_t>(r)];
    if (!plan.sameHost[static_cast<size_t>(r)] || p.machine != me.machine || p.pidNamespace != me.pidNamespace)
      continue;
    if (me.pidNamespace != 0 && p.pid != me.pid) pids[static_cast<size_t>(r)] = p.pid;
    inProcess[static_cast<size_t>(r)] =
        r != rank && p.pid == me.pid && !path->proxyHost && windows[static_cast<size_t>(r)] != nullptr;
  }
  host->setPeerProcesses(std::move(pids));
  COLLIE_RETURN_IF_ERROR(readDirectReadBytes(&path->directBytes));
  host->setInProcessPeers(inProcess, path->directBytes);
  host->initWindow();
  std::vector<WindowHeader> headers(static_cast<size_t>(nranks));  // of the windows we cannot map
  memcpy(&headers[static_cast<size_t>(rank)], windows[static_cast<size_t>(rank)], sizeof(WindowHeader));
  COLLIE_RETURN_IF_ERROR(plan.farPeer >= 0 ? comm->bootstrap->allGather(headers.data(), sizeof(WindowHeader))
                                           : comm->bootstrap->barrier());
  COLLIE_RETURN_IF_ERROR(host->checkPeers(headers.data()));
  if (path->proxyHost) {
    if (plan.emulated == 0) host->attachProxy(comm->proxy.get());
    comm->proxy->start(comm->remote.get(), spins);
  }
  *out = std::move(host);
  return Status();
}

// The executor over the host windows: staged copies of device buffers for a CUDA communicator that cannot map
// its peers, the kernels' code on host threads (COLLIE_TEST_EMULATE_KERNELS), staged host copies
// (COLLIE_TEST_STAGE_HOST), or the host executor itself.
Status makeHostExecutor(const InitOptions& options, const InitPlan& plan, std::unique_ptr<HostExecutor> host,
                        collieComm* comm, HostPath* path) {
  const int rank = comm->rank;
  bool badStage = false;
  path->stageHost = env::getInt("COLLIE_TEST_STAGE_HOST", 0, &badStage) != 0 && !badStage;
  if (comm->backend == collieBackendCuda) {
    DeviceGuard guard(comm->cudaDevice);
    COLLIE_RETURN_IF_ERROR(guard.status());
    COLLIE_RETURN_IF_ERROR(allocateDeviceToken(comm, options.timeoutSec));
    comm->executor = std::make_unique<StagedExecutor>(std::move(host), cudaMover(comm->cudaDevice));
    if (comm->remote)
      COLLIE_INFO(
          "rank %d: UCX %s CUDA memory; device buffers go through pinned host staging either way "
          "(COLLIE_GPU_REMOTE=proxy: through the proxy thread instead)",
          rank, comm->remote->cudaMemory() ? "can move" : "cannot move");
  } else if (plan.emulated > 0) {
    // The host executor only wrote and checked the window headers.
    COLLIE_RETURN_IF_ERROR(readProtocol(plan.farPeer >= 0, &comm->llMaxBytes));
    KernelSwitches switches;
    COLLIE_RETURN_IF_ERROR(readKernelSwitches(&switches));
    auto e = std::make_unique<EmulatedExecutor>(rank, plan.layout, path->windows, options.timeoutSec, plan.emulated,
                                                switches);
    if (path->proxyHost) e->attachProxy(*comm->proxy);
    e->setInProcessPeers(path->inProcess, path->directBytes);
    comm->executor = std::move(e);
  } else if (path->stageHost) {
    comm->executor = std::make_unique<StagedExecutor>(std::move(host), hostMover());
  } else {
    comm->executor = std::move(host);
  }
  comm->hostFootprint = plan.layout.totalBytes() + path->staging;
  comm->topology.slotBytes = plan.layout.slotBytes;
  comm->topology.slots = plan.layout.nslots;
  return Status();
}

}  // namespace

Status commInit(const collieUniqueId& id, int nranks, int rank, const InitOptions& options, collieComm** out) {
  env::warnUnknownOnce();
  ScopedLogRank logRank(rank);
  const auto start = std::chrono::steady_clock::now();

  auto comm = std::make_unique<collieComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->timeoutSec = options.timeoutSec;
  comm->initTimeoutSec = options.initTimeoutSec;

  InitPlan plan;
  COLLIE_RETURN_IF_ERROR(choosePlace(options, comm.get()));
  COLLIE_RETURN_IF_ERROR(describeRank(*comm, options, &plan));
  COLLIE_RETURN_IF_ERROR(checkProgramFiles(*comm, options, plan));
  COLLIE_RETURN_IF_ERROR(meetPeers(id, options, plan, comm.get()));
  COLLIE_RETURN_IF_ERROR(checkPeersAgree(*comm, options, &plan));
  setTopology(options, plan, comm.get());

  const int farPeer = plan.farPeer;
  if (farPeer >= 0 && !ucxBuilt()) {  // the stub's error says how to get UCX
    const PeerInfo& far = comm->peers[static_cast<size_t>(farPeer)];
    const std::string spanning = "rank " + std::to_string(farPeer) + " is on host '" +
                                 std::string(far.hostId, strnlen(far.hostId, 64)) + "', rank " + std::to_string(rank) +
                                 " on '" + plan.hostId + "'";
    return createUcxWindows(nullptr, {}, nullptr, 0, nullptr).withContext(spanning);
  }
  // A CUDA communicator spanning hosts takes the host path below (staged copies of its device buffers) unless
  // COLLIE_GPU_REMOTE=proxy asks for the kernels to reach the other hosts through the proxy thread; so does one
  // whose GPUs on a host cannot all reach each other by P2P.
  const std::string gpuRemote = env::get("COLLIE_GPU_REMOTE").value_or("staged");
  if (gpuRemote != "staged" && gpuRemote != "proxy")
    return Status::error(collieInvalidArgument, "COLLIE_GPU_REMOTE=%s: expected staged or proxy", gpuRemote.c_str());
  bool direct = false;
  if (comm->backend == collieBackendCuda && (farPeer < 0 || gpuRemote == "proxy"))
    COLLIE_RETURN_IF_ERROR(agreeOnDirectPeers(comm.get(), &direct));
  if (direct) {
    COLLIE_RETURN_IF_ERROR(setupCudaBackend(comm.get(), options, plan.otherHost, spinPolls(comm->peers, rank)));
    *out = comm.release();
    registerComm(*out);
    return Status();
  }

  HostPath path;
  std::unique_ptr<HostExecutor> host;
  COLLIE_RETURN_IF_ERROR(openHostWindows(options, plan, comm.get(), &path, &host));
  COLLIE_RETURN_IF_ERROR(makeHostExecutor(options, plan, std::move(host), comm.get(), &path));

  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const WindowLayout& layout = plan.layout;
  COLLIE_INFO(
      "comm rank %d/%d ready in %.1f ms: host %s, window %zu bytes (%u slots x %llu bytes per peer), %zu staging "
      "bytes for UCX (proxy: inbox, outboxes, tables)",
      rank, nranks, ms,
      comm->backend == collieBackendCuda
          ? (farPeer >= 0 ? "executor over staged copies of device buffers (ranks span hosts)"
                          : "executor over staged copies of device buffers (no P2P between its GPUs, or COLLIE_P2P=0)")
      : plan.emulated > 0 ? "backend running the CUDA kernels' code on host threads (COLLIE_TEST_EMULATE_KERNELS)"
      : path.proxyHost    ? "executor through the proxy thread (COLLIE_TEST_PROXY_HOST)"
      : path.stageHost    ? "executor over staged copies (COLLIE_TEST_STAGE_HOST)"
                          : "backend",
      static_cast<size_t>(layout.totalBytes()), layout.nslots, static_cast<unsigned long long>(layout.slotBytes),
      path.staging);
  *out = comm.release();
  registerComm(*out);
  return Status();
}

}  // namespace collie
