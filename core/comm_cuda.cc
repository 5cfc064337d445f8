// The CUDA backend's part of communicator init and destroy: the device window
// geometry, the windows themselves (transport/cuda_ipc), the CUDA executor
// and the barrier byte. Kept apart from comm.cc so the host path reads alone.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "base/env.h"
#include "base/log.h"
#include "core/comm.h"
#include "executor/cuda_executor.h"
#include "executor/remote_proxy.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/cuda_ipc/buffer_windows.h"
#include "transport/cuda_ipc/device_windows.h"
#include "transport/remote_window.h"
#include "transport/ucx/ucx_windows.h"

namespace collie {

namespace {

// Whether two ranks use the same GPU: the same host and GPU UUID (ordinals
// depend on each process's CUDA_VISIBLE_DEVICES: under Slurm's per-task GPU
// binding every rank has device 0), or the same ordinal when a UUID is unknown.
bool sameGpu(const PeerInfo& a, const PeerInfo& b) {
  static const uint8_t kNone[sizeof(a.gpuUuid)] = {};
  if (strncmp(a.hostId, b.hostId, sizeof(a.hostId)) != 0) return false;
  if (memcmp(a.gpuUuid, kNone, sizeof(kNone)) != 0 && memcmp(b.gpuUuid, kNone, sizeof(kNone)) != 0)
    return memcmp(a.gpuUuid, b.gpuUuid, sizeof(a.gpuUuid)) == 0;
  return a.cudaDevice == b.cudaDevice;
}

// Ranks that share this rank's GPU (several ranks per GPU is supported: it is
// how one GPU tests everything). Every rank computes the same maximum.
int ranksPerDevice(const collieComm* comm) {
  int most = 1;
  for (const PeerInfo& a : comm->peers) {
    int same = 0;
    for (const PeerInfo& b : comm->peers) same += sameGpu(a, b);
    most = std::max(most, same);
  }
  return most;
}

// Ranks of this process on this rank's GPU (threads sharing one CUDA context),
// and the lowest of them in `*first`.
int ranksInProcessOnDevice(const collieComm* comm, int* first) {
  const PeerInfo& me = comm->peers[static_cast<size_t>(comm->rank)];
  int same = 0;
  *first = comm->rank;
  for (size_t r = 0; r < comm->peers.size(); ++r) {
    const PeerInfo& b = comm->peers[r];
    if (!sameGpu(me, b) || me.pid != b.pid || me.pidNamespace != b.pidNamespace) continue;
    if (same++ == 0) *first = static_cast<int>(r);
  }
  return same;
}

// Ranks that all share one GPU move every byte through its memory, which they
// share: the tuner's model for them (algorithms/topology.h, sharedGpuTopology)
// bounds a call by all ranks' memory traffic, so the algorithm that reads and
// writes the least wins at large sizes (ring over rhd at 2 ranks: 4.5 against
// 6.5 bytes per busbw byte), where the host model's links, one per rank, do
// not see that they share anything. The memory's peak comes from its clock and
// bus width; an H100's when the runtime gives neither.
void useSharedGpuModel(collieComm* comm) {
  int clockKhz = 0, busBits = 0;
  if (cudaDeviceGetAttribute(&clockKhz, cudaDevAttrMemoryClockRate, comm->cudaDevice) != cudaSuccess ||
      cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, comm->cudaDevice) != cudaSuccess) {
    (void)cudaGetLastError();
    clockKhz = busBits = 0;
  }
  // Two transfers per clock (DDR), bus width in bits.
  double peak = 2.0 * 1e3 * clockKhz * (busBits / 8.0);
  const bool known = peak > 0;
  if (!known) peak = 3.35e12;
  Topology t = sharedGpuTopology(peak);
  t.nranks = comm->nranks;
  t.ranksPerNode = comm->topology.ranksPerNode;  // algorithms that follow nodes see the host's, as before
  comm->topology = t;
  if (comm->rank == 0)
    COLLIE_INFO("tuning for %d ranks sharing GPU %d: memory peak %.2f TB/s (%s), %.2f TB/s of traffic among them",
                comm->nranks, comm->cudaDevice, peak / 1e12, known ? "its clock x bus width" : "unknown: an H100's",
                1.0 / t.sharedMemoryBeta / 1e12);
}

// Device window geometry from the environment, identical on every rank given
// the same environment and GPU model (checked against each peer's header).
// Channels: enough blocks in all to keep about half the GPU's SMs moving
// data, at most 16 per rank. Slots shrink so the window stays within
// COLLIE_DEVICE_WINDOW_BYTES (default 32 MiB per rank, whatever the rank count).
Status deviceLayout(const collieComm* comm, WindowLayout* layout) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, comm->cudaDevice) != cudaSuccess) {
    (void)cudaGetLastError();
    sms = 32;
  }
  bool bad = false;
  const int perGpu = ranksPerDevice(comm);  // O(ranks^2): once
  const int64_t fallback = std::clamp<int64_t>(sms / (2 * perGpu), 1, 16);
  const int64_t channels = env::getInt("COLLIE_CHANNELS", fallback, &bad);
  if (bad || channels < 1 || channels > kMaxChannels)
    return Status::error(collieInvalidArgument, "COLLIE_CHANNELS must be 1..%d", kMaxChannels);
  // Each rank's blocks spin until their peers' blocks answer, so the blocks of
  // all ranks sharing the GPU must be resident at once: one block per SM is
  // what a 512-thread block is sure to get.
  if (channels * perGpu > sms)
    return Status::error(collieInvalidUsage,
                         "COLLIE_CHANNELS=%lld x %d ranks on GPU %d is %lld blocks, more than its %d SMs can hold at "
                         "once; the ranks' kernels wait for each other, so all must run together: lower "
                         "COLLIE_CHANNELS",
                         static_cast<long long>(channels), perGpu, comm->cudaDevice,
                         static_cast<long long>(channels * perGpu), sms);
  // Streams share CUDA_DEVICE_MAX_CONNECTIONS hardware queues (default 8):
  // with fewer queues than ranks of this process on the GPU, work queued
  // behind one rank's waiting kernel can hold back the peer kernel it waits
  // for. Collie's own next call waits for that (executor/colocated_streams.h);
  // the application's work on the stream does not.
  // Said once per process and GPU, by the lowest rank there (not rank 0, which may be elsewhere).
  int first = 0;
  const int local = ranksInProcessOnDevice(comm, &first);
  const int64_t queues = env::getInt("CUDA_DEVICE_MAX_CONNECTIONS", 8, &bad);
  if (!bad && local > 1 && queues < local && comm->rank == first)
    COLLIE_WARN(
        "CUDA_DEVICE_MAX_CONNECTIONS=%lld is below the %d ranks this process runs on GPU %d: work queued on a "
        "rank's stream right after a collective, before its peers have queued theirs, may hold back a peer's "
        "kernel until COLLIE_TIMEOUT; unset it or raise it to %d",
        static_cast<long long>(queues), local, comm->cudaDevice, local);
  const int64_t slots = env::getInt("COLLIE_SLOTS", 4, &bad);
  if (bad || slots < 2 || slots > 64) return Status::error(collieInvalidArgument, "COLLIE_SLOTS must be 2..64");
  const int64_t slotBytes = env::getInt("COLLIE_SLOT_BYTES", 1 << 18, &bad);
  if (bad || slotBytes < 4096 || slotBytes > (1 << 26))
    return Status::error(collieInvalidArgument, "COLLIE_SLOT_BYTES must be 4096..64 MiB");
  const int64_t bound = env::getInt("COLLIE_DEVICE_WINDOW_BYTES", 32 << 20, &bad);
  if (bad || bound < 4096) return Status::error(collieInvalidArgument, "COLLIE_DEVICE_WINDOW_BYTES must be >= 4096");
  int64_t fit = bound / (static_cast<int64_t>(comm->nranks) * slots * channels);
  fit = std::max<int64_t>(4096, fit & ~int64_t{4095});
  layout->nranks = static_cast<uint32_t>(comm->nranks);
  layout->nslots = static_cast<uint32_t>(slots);
  layout->nchannels = static_cast<uint32_t>(channels);
  layout->slotBytes = static_cast<uint64_t>(std::min(slotBytes, fit)) & ~uint64_t{15};
  return readLLLayout(layout);
}

// One rank's answer to agreeOnDirectPeers.
struct P2pVerdict {
  int32_t blocked;  // 0: reaches every GPU of its host; 1: COLLIE_P2P=0; 2: its GPU cannot reach `peer`'s
  int32_t peer;
  int32_t device, peerDevice;  // ordinals in the reporting rank's process
};

// This process's ordinal of the GPU with this UUID; -1 when it sees none (another process's
// CUDA_VISIBLE_DEVICES) or the UUID is unknown.
int localOrdinal(const uint8_t (&uuid)[16]) {
  static const uint8_t kNone[16] = {};
  int count = 0;
  if (memcmp(uuid, kNone, sizeof(kNone)) == 0 || cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (memcmp(prop.uuid.bytes, uuid, sizeof(uuid)) == 0) return d;
  }
  return -1;
}

}  // namespace

Status agreeOnDirectPeers(collieComm* comm, bool* direct) {
  bool bad = false;
  const int64_t p2p = env::getInt("COLLIE_P2P", 1, &bad);
  if (bad || (p2p != 0 && p2p != 1))
    return Status::error(collieInvalidArgument, "COLLIE_P2P must be 0 (stage through host memory) or 1");
  std::vector<P2pVerdict> verdicts(static_cast<size_t>(comm->nranks));
  P2pVerdict& mine = verdicts[static_cast<size_t>(comm->rank)];
  memset(&mine, 0, sizeof(mine));
  const PeerInfo& me = comm->peers[static_cast<size_t>(comm->rank)];
  if (p2p == 0) mine.blocked = 1;
  for (int r = 0; r < comm->nranks && mine.blocked == 0; ++r) {
    const PeerInfo& peer = comm->peers[static_cast<size_t>(r)];
    if (strncmp(peer.hostId, me.hostId, sizeof(me.hostId)) != 0 || sameGpu(me, peer)) continue;
    const bool oneProcess = peer.pid == me.pid && peer.pidNamespace == me.pidNamespace;
    const int peerDevice = oneProcess ? peer.cudaDevice : localOrdinal(peer.gpuUuid);
    if (peerDevice < 0) continue;  // not visible here: opening its cudaIpc handle decides
    int can = 0;
    COLLIE_RETURN_IF_ERROR(
        cudaStatus(cudaDeviceCanAccessPeer(&can, comm->cudaDevice, peerDevice), "cudaDeviceCanAccessPeer"));
    if (!can) mine = P2pVerdict{2, r, comm->cudaDevice, peerDevice};
  }
  // Every rank must take the same path (device windows, or host windows and staging), so all answers count.
  COLLIE_RETURN_IF_ERROR(comm->bootstrap->allGather(verdicts.data(), sizeof(P2pVerdict)));
  *direct = true;
  for (int r = 0; r < comm->nranks && *direct; ++r) {
    const P2pVerdict& v = verdicts[static_cast<size_t>(r)];
    if (v.blocked == 0) continue;
    *direct = false;
    if (comm->rank != 0) break;  // said once per communicator
    const char* staged =
        "device buffers go through pinned host memory (the staged path): every call returns once done, none can "
        "be captured into a CUDA graph, and it is far slower than P2P";
    if (v.blocked == 1)
      COLLIE_INFO("comm of %d ranks: rank %d set COLLIE_P2P=0: %s", comm->nranks, r, staged);
    else
      COLLIE_WARN("comm of %d ranks: rank %d's GPU %d cannot reach GPU %d of rank %d by P2P: %s", comm->nranks, r,
                  v.device, v.peerDevice, v.peer, staged);
  }
  return Status();
}

Status setupCudaBackend(collieComm* comm, const InitOptions& options, const std::vector<bool>& otherHost, int spins) {
  DeviceGuard guard(comm->cudaDevice);
  COLLIE_RETURN_IF_ERROR(guard.status());
  WindowLayout layout;
  COLLIE_RETURN_IF_ERROR(deviceLayout(comm, &layout));
  const bool spans = std::find(otherHost.begin(), otherHost.end(), true) != otherHost.end();
  COLLIE_RETURN_IF_ERROR(readProtocol(spans, &comm->llMaxBytes));
  // Every window mapped (one host, P2P) and a rank count the direct kernels take: the windows end with their
  // region (kernels/direct_kernels.h), which the direct algorithms' launches address in every peer's window.
  if (!spans && comm->nranks >= 2 && comm->nranks <= kDirectMaxRanks) layout.directSlotLines = kDirectSlotLines;
  // All device memory of the communicator comes from here, and no call of init or destroy waits for the device
  // (base/device_memory.h). Init's own waits (for the pool's stream) all come before its last barrier, at the
  // end: a peer that is through may launch a kernel of another communicator that waits for us, and work of any
  // stream may sit in a hardware queue behind that peer's next launch.
  COLLIE_RETURN_IF_ERROR(DevicePool::create(comm->cudaDevice, comm->rank, options.timeoutSec, &comm->devicePool));
  // The direct kernels' staging buffer, for peer processes (whose buffers outside every window they cannot reach):
  // in the window's allocation, so the peers map it with the window.
  const size_t staging = layout.directSlotLines > 0 ? static_cast<size_t>(options.directStaging) : 0;
  // The tuner weighs the direct algorithms where they run; collieComm::algorithmForCall keeps its direct picks to
  // the calls the executor runs on every rank.
  comm->tuneDirect = options.directTune && layout.directSlotLines > 0;
  COLLIE_RETURN_IF_ERROR(DeviceWindows::create(comm->bootstrap.get(), comm->peers, comm->cudaDevice,
                                               layout.totalBytes(), staging, comm->devicePool, &comm->deviceWindows));
  std::unique_ptr<CudaExecutor> exec;
  COLLIE_RETURN_IF_ERROR(CudaExecutor::create(comm->rank, comm->cudaDevice, layout, *comm->deviceWindows,
                                              comm->devicePool, options.timeoutSec, &exec));
  if (layout.directSlotLines > 0 && !comm->deviceWindows->ipcRanks().empty()) {
    // Peer processes: windows (collieCommWindowRegister) are mapped for the direct kernels; number 0, the staging
    // buffer, maps with each peer's device window.
    comm->bufferWindows =
        std::make_unique<BufferWindows>(comm->bootstrap.get(), comm->peers, comm->cudaDevice, kDirectMaxWindows);
    const DeviceWindows& dw = *comm->deviceWindows;
    if (dw.stagingBytes() > 0) {
      std::vector<PeerRange> ranges(static_cast<size_t>(comm->nranks));
      for (int r : dw.ipcRanks())
        ranges[static_cast<size_t>(r)] = PeerRange{dw.ownerAddress(r), reinterpret_cast<uint64_t>(dw.window(r))};
      COLLIE_RETURN_IF_ERROR(exec->mapWindow(0, dw.staging(), dw.stagingBytes(), ranges));
    }
  }
  COLLIE_RETURN_IF_ERROR(allocateDeviceToken(comm, options.timeoutSec));
  if (spans) {
    COLLIE_RETURN_IF_ERROR(
        RemoteProxy::create(comm->rank, layout, otherHost, RemoteProxy::pinnedMemory(comm->cudaDevice), &comm->proxy));
    COLLIE_RETURN_IF_ERROR(createUcxWindows(comm->bootstrap.get(), otherHost, comm->proxy->inboxHost(),
                                            layout.totalBytes(), &comm->remote));
  }
  exec->setOneLaunch(options.directOneLaunch);
  COLLIE_RETURN_IF_ERROR(exec->initWindow());
  if (spans) {
    // Windows on other hosts cannot be read: every rank's header travels over the bootstrap (GPUs of different
    // models would pick different channel counts, which the protocol cannot bridge).
    std::vector<WindowHeader> headers(static_cast<size_t>(comm->nranks));
    headers[static_cast<size_t>(comm->rank)] = windowHeader(layout);
    COLLIE_RETURN_IF_ERROR(comm->bootstrap->allGather(headers.data(), sizeof(WindowHeader)));
    COLLIE_RETURN_IF_ERROR(exec->checkPeers(headers.data()));
    COLLIE_RETURN_IF_ERROR(exec->attachProxy(*comm->proxy));
    comm->proxy->start(comm->remote.get(), spins);
    comm->hostFootprint = comm->proxy->footprint();
  } else {
    COLLIE_RETURN_IF_ERROR(comm->bootstrap->barrier());
    COLLIE_RETURN_IF_ERROR(exec->checkPeers());
  }
  // Init's last barrier (see DevicePool::create above): no rank leaves before every rank's CUDA work is done.
  COLLIE_RETURN_IF_ERROR(comm->bootstrap->barrier());
  comm->deviceFootprint = layout.totalBytes() + exec->deviceExtraBytes() + 16;
  if (!spans && ranksPerDevice(comm) == comm->nranks) useSharedGpuModel(comm);
  // A round spans every channel, each a complete collective on its part (core/collectives.cc): to the simulator
  // that is one connection whose slots are the channels' slots side by side.
  comm->topology.slotBytes = layout.slotBytes * layout.nchannels;
  comm->topology.slots = layout.nslots;
  COLLIE_INFO(
      "comm rank %d/%d ready: cuda backend on device %d, %u channels x %u slots x %llu bytes per peer, device "
      "footprint %zu bytes (%d peer windows through cudaIpc)%s",
      comm->rank, comm->nranks, comm->cudaDevice, layout.nchannels, layout.nslots,
      static_cast<unsigned long long>(layout.slotBytes), comm->deviceFootprint, comm->deviceWindows->ipcPeers(),
      spans ? "; peers on other hosts through the proxy thread (COLLIE_GPU_REMOTE=proxy), pinned host memory "
              "held for it in the host footprint, no LL protocol"
            : "");
  // Peers that are other processes of this very machine (never faked, unlike hostId; those on other hosts are
  // the proxy's to watch): a kernel waiting on one that died stops within milliseconds, not after COLLIE_TIMEOUT.
  const PeerInfo& me = comm->peers[static_cast<size_t>(comm->rank)];
  std::vector<int> pids(static_cast<size_t>(comm->nranks), 0);
  for (int r = 0; r < comm->nranks; ++r) {
    const PeerInfo& p = comm->peers[static_cast<size_t>(r)];
    if (!otherHost[static_cast<size_t>(r)] && p.machine == me.machine && me.pidNamespace != 0 &&
        p.pidNamespace == me.pidNamespace && p.pid != me.pid)
      pids[static_cast<size_t>(r)] = p.pid;
  }
  exec->watchPeerProcesses(std::move(pids));
  comm->executor = std::move(exec);
  return Status();
}

Status allocateDeviceToken(collieComm* comm, double timeoutSec) {
  if (!comm->devicePool)
    COLLIE_RETURN_IF_ERROR(DevicePool::create(comm->cudaDevice, comm->rank, timeoutSec, &comm->devicePool));
  COLLIE_RETURN_IF_ERROR(comm->devicePool->allocate(16, &comm->deviceToken, "allocating the barrier byte"));
  return comm->devicePool->zero(comm->deviceToken, 16, "zeroing the barrier byte");
}

void teardownCudaBackend(collieComm* comm) {
  // No barrier with the peers: every launch ends only when its slices have all
  // been consumed (DevicePrims::drain), so after our last launch (the executor
  // waited for it) no peer writes into our window any more.
  if (comm->deviceToken != nullptr) comm->devicePool->release(comm->deviceToken);
  comm->deviceToken = nullptr;
  comm->bufferWindows.reset();
  comm->deviceWindows.reset();
  comm->devicePool.reset();
}

}  // namespace collie
