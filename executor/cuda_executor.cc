#include "executor/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/cuda_check.h"
#include "base/device_memory.h"
#include "base/env.h"
#include "base/log.h"
#include "executor/colocated_streams.h"
#include "executor/direct_sends.h"
#include "executor/launch_plan.h"
#include "executor/remote_proxy.h"
#include "kernels/scale.h"
#include "kernels/store.h"
#include "transport/cuda_ipc/device_windows.h"

namespace collie {

// Blocks whose graphs are gone, queued by user objects' destructors: those run
// on a CUDA thread, may make no CUDA call, and may outlive the executor (hence
// shared ownership), so they only append here.
struct GraphsGone {
  std::mutex mu;
  std::vector<void*> blocks;
};

namespace {

// What one user object stands for: one pin of `block` by the graph that owns it.
struct GraphHold {
  std::shared_ptr<GraphsGone> gone;
  void* block = nullptr;
  std::atomic<bool> keep{false};  // the graph never took it: the pin stays
  static void destroy(void* p) {
    std::unique_ptr<GraphHold> h(static_cast<GraphHold*>(p));
    if (h->keep.load()) return;
    std::lock_guard<std::mutex> lock(h->gone->mu);
    h->gone->blocks.push_back(h->block);
  }
};

}  // namespace

Status CudaExecutor::create(int rank, int device, const WindowLayout& layout, const DeviceWindows& windows,
                            std::shared_ptr<DevicePool> pool, double timeoutSec, std::unique_ptr<CudaExecutor>* out) {
  std::unique_ptr<CudaExecutor> e(new CudaExecutor());
  e->rank_ = rank;
  e->device_ = device;
  e->layout_ = layout;
  e->pool_ = std::move(pool);
  DeviceGuard guard(device);
  COLLIE_RETURN_IF_ERROR(cudaStatus(static_cast<cudaError_t>(preloadProgramKernels()), "loading the program kernels"));
  COLLIE_RETURN_IF_ERROR(cudaStatus(static_cast<cudaError_t>(preloadStoreKernel()), "loading the store kernel"));
  const size_t n = layout.nranks;
  e->windows_.resize(n);
  for (size_t r = 0; r < n; ++r) e->windows_[r] = windows.window(static_cast<int>(r));
  if (!windows.colocatedPeers().empty()) {
    std::vector<std::pair<int, const void*>> peers;
    for (int r : windows.colocatedPeers()) peers.emplace_back(r, windows.window(r));
    e->colocated_ = std::make_unique<ColocatedStreams>(rank, device, windows.window(rank), std::move(peers));
  }
  e->inboxes_.assign(n, e->windows_[static_cast<size_t>(rank)]);
  // Everything below comes from the communicator's pool and is written on its stream (base/device_memory.h).
  void* p = nullptr;
  COLLIE_RETURN_IF_ERROR(e->pool_->allocate(2 * n * sizeof(uint8_t*), &p, "allocating the window table"));
  e->deviceWindows_ = static_cast<uint8_t**>(p);
  COLLIE_RETURN_IF_ERROR(e->uploadWindowTable());
  // posted, consumed and clean (the LL slots' age) per channel per peer
  const size_t counterBytes = 3 * sizeof(uint64_t) * layout.nchannels * n;
  COLLIE_RETURN_IF_ERROR(e->pool_->allocate(counterBytes + 64, &p, "allocating the flag counters"));
  e->counters_ = static_cast<uint64_t*>(p);
  COLLIE_RETURN_IF_ERROR(e->pool_->zero(p, counterBytes + 64, "zeroing the flag counters"));
  e->failed_ = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(p) + counterBytes);
  e->extraBytes_ = 2 * n * sizeof(uint8_t*) + counterBytes + 64;
  KernelSwitches switches;
  COLLIE_RETURN_IF_ERROR(readKernelSwitches(&switches));
  if (switches.timing) {
    COLLIE_RETURN_IF_ERROR(e->pool_->allocate(kPhaseWords * sizeof(uint64_t), &p, "allocating kernel timing"));
    e->phaseNs_ = static_cast<uint64_t*>(p);
    COLLIE_RETURN_IF_ERROR(e->pool_->zero(p, kPhaseWords * sizeof(uint64_t), "zeroing kernel timing"));
  }
  static_assert(sizeof(DeviceStatus) <= kPinnedBlockBytes, "the status block must fit a pinned block");
  void* host = nullptr;
  COLLIE_RETURN_IF_ERROR(takePinnedBlock(&host, &p));
  e->status_ = static_cast<DeviceStatus*>(host);
  if (layout.directSlotLines > 0) {
    static_assert(sizeof(DirectError) <= kPinnedBlockBytes, "the direct kernels' record must fit a pinned block");
    void* dev = nullptr;
    COLLIE_RETURN_IF_ERROR(takePinnedBlock(&host, &dev));
    e->directError_ = static_cast<DirectError*>(host);
    e->directErrorDevice_ = static_cast<DirectError*>(dev);
    COLLIE_RETURN_IF_ERROR(
        cudaStatus(static_cast<cudaError_t>(preloadDirectKernels(static_cast<int>(n))), "loading the direct kernels"));
    // Every block of every rank's launch must be resident at once (direct_kernels.h, "Grids"), those of the
    // other ranks of this process on this GPU too: how many fit, per kernel and type, known before any call. Kinds
    // that launch another kind's kernel take its answer (directKernelKind numbers below theirs).
    const int sharing = static_cast<int>(windows.colocatedPeers().size()) + 1;
    for (int k = 0; k < kDirectKinds; ++k)
      for (int t = 0; t < collieNumTypes; ++t) {
        const int same = static_cast<int>(directKernelKind(static_cast<DirectKind>(k)));
        if (same != k) {
          e->directFit_[k][t] = e->directFit_[same][t];
          continue;
        }
        int fit = 0;
        COLLIE_RETURN_IF_ERROR(cudaStatus(
            static_cast<cudaError_t>(directResidentBlocks(static_cast<DirectKind>(k), static_cast<collieDataType_t>(t),
                                                          static_cast<int>(n), kDirectMaxThreads, sharing, &fit)),
            "sizing the direct kernels' grids"));
        e->directFit_[k][t] = std::clamp(fit, 1, kDirectMaxBlocks);
      }
    e->directGpuScope_ = sharing == static_cast<int>(n);
    void* counter = nullptr;  // (p still holds the status block's device address)
    COLLIE_RETURN_IF_ERROR(e->pool_->allocate(sizeof(DirectCounter), &counter, "allocating the direct call counter"));
    e->directCounter_ = static_cast<DirectCounter*>(counter);
    COLLIE_RETURN_IF_ERROR(e->pool_->zero(counter, sizeof(DirectCounter), "zeroing the direct call counter"));
    for (int r : windows.ipcRanks()) e->directRemotePeers_ |= 1u << r;
    if (e->directRemotePeers_ != 0) {
      // Peers in other processes: the table through which the kernels reach their windows (mapWindow).
      const size_t bytes = sizeof(DirectPeerMap) * kDirectMaxWindows * kDirectMaxRanks;
      void* maps = nullptr;
      COLLIE_RETURN_IF_ERROR(e->pool_->allocate(bytes, &maps, "allocating the table of peers' windows"));
      e->directMaps_ = static_cast<DirectPeerMap*>(maps);
      COLLIE_RETURN_IF_ERROR(e->pool_->zero(maps, bytes, "zeroing the table of peers' windows"));
      e->extraBytes_ += bytes;
    } else {
      COLLIE_RETURN_IF_ERROR(e->openPeerBoard(windows));
    }
    if (switches.timing) {
      const size_t bytes = kDirectTimingWords * sizeof(uint64_t);
      void* sums = nullptr;
      COLLIE_RETURN_IF_ERROR(e->pool_->allocate(bytes, &sums, "allocating the direct kernels' timing"));
      e->directTiming_ = static_cast<uint64_t*>(sums);
      COLLIE_RETURN_IF_ERROR(e->pool_->zero(sums, bytes, "zeroing the direct kernels' timing"));
    }
  }
  // What every launch points at (device addresses).
  LaunchTables& t = e->tables_;
  t.rank = rank;
  t.layout = layout;
  t.windows = e->deviceWindows_;
  t.inboxes = e->deviceWindows_ + n;
  t.counters = e->counters_;
  t.failed = e->failed_;
  t.status = static_cast<DeviceStatus*>(p);
  t.timeoutSec = timeoutSec;
  t.phaseNs = e->phaseNs_;
  t.systemFence = switches.systemFence;
  t.systemScope = switches.systemScope;
  t.separatePosts = switches.separatePosts;
  // Ranks that are threads of this process on this GPU load from our buffers as we do: their large sends are
  // read in place (executor/direct_sends.h). Not ranks on other GPUs of the process, though P2P reaches their
  // windows: a buffer from a memory pool or a VMM mapping (PyTorch's expandable segments) may not be open to
  // another GPU.
  int64_t directBytes = 0;
  COLLIE_RETURN_IF_ERROR(readDirectReadBytes(&directBytes));
  std::vector<bool> colocated(n, false);
  for (int r : windows.colocatedPeers()) colocated[static_cast<size_t>(r)] = true;
  setInPlacePeers(&t, colocated, directBytes);
  cudaEvent_t done;
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate"));
  e->lastDone_ = done;
  ProgramCache::Limits limits;
  bool bad = false;
  const int64_t entries = env::getInt("COLLIE_PROGRAM_CACHE", static_cast<int64_t>(limits.maxEntries), &bad);
  if (bad || entries < 1 || entries > (1 << 20))
    return Status::error(collieInvalidArgument, "COLLIE_PROGRAM_CACHE must be 1..1048576 programs");
  limits.maxEntries = static_cast<size_t>(entries);
  e->programs_ = std::make_unique<ProgramCache>(limits);
  e->graphsGone_ = std::make_shared<GraphsGone>();
  *out = std::move(e);
  return Status();
}

void CudaExecutor::setTimeout(double seconds) {
  tables_.timeoutSec = seconds;
  pool_->setTimeout(seconds);
}

void* CudaExecutor::devicePool() const { return pool_->handle(); }

Status CudaExecutor::deviceBlock(size_t bytes, void** out) {
  RelaxedCapture relaxed;  // while another thread captures in global mode
  cudaMemPool_t pool = static_cast<cudaMemPool_t>(pool_->handle());
  if (pool != nullptr && !capturing_) {
    // In the order of the launch's stream, before it; later launches on other streams are ordered after this
    // one (waitForPrevious), so after the allocation too.
    COLLIE_RETURN_IF_ERROR(cudaStatus(cudaMallocFromPoolAsync(out, bytes, pool, static_cast<cudaStream_t>(planStream_)),
                                      "cudaMallocFromPoolAsync"));
    planQueued_ = true;
    return Status();
  }
  // On the capture's stream the allocation would become the graph's, made and freed with each replay. So on the
  // pool's stream, which carries nothing else and is waited for (bounded). Without a pool, cudaMalloc.
  return pool_->allocate(bytes, out, "allocating device memory for a launch");
}

CudaExecutor::~CudaExecutor() {
  peerWatch_.reset();  // its thread writes the status block, given back below
  DeviceGuard guard(device_);
  // Kernels still running use everything below; each wait in them is bounded.
  if (launched_) (void)cudaEventSynchronize(static_cast<cudaEvent_t>(lastDone_));
  if (phaseNs_ != nullptr) {
    // On the pool's stream: a copy on the legacy stream would wait for peers' kernels too.
    uint64_t sums[kPhaseWords] = {};
    if (pool_->copy(sums, phaseNs_, sizeof(sums), "reading the kernel timing").ok()) reportKernelPhases(rank_, sums);
    if (enqueues_ > 0)
      COLLIE_WARN(
          "rank %d: host enqueue (COLLIE_KERNEL_TIMING=1), mean per launch over %llu launches: %.2f us, "
          "%.2f us of it planning (programs, scratch, the launch's arguments); the API's checks and the "
          "programs' building come before it",
          rank_, static_cast<unsigned long long>(enqueues_),
          static_cast<double>(enqueueNs_) / static_cast<double>(enqueues_) / 1e3,
          static_cast<double>(planNs_) / static_cast<double>(enqueues_) / 1e3);
  }
  if (directTiming_ != nullptr) {
    uint64_t sums[kDirectTimingWords] = {};
    if (pool_->copy(sums, directTiming_, sizeof(sums), "reading the direct kernels' timing").ok() && sums[0] > 0)
      COLLIE_WARN(
          "rank %d: direct kernels (COLLIE_KERNEL_TIMING=1), mean over %llu launches: %.2f us from start to end, "
          "%.2f us of it until every peer had come (the launch skew this rank saw, plus one hop)",
          rank_, static_cast<unsigned long long>(sums[0]), static_cast<double>(sums[1]) / sums[0] / 1e3,
          static_cast<double>(sums[2]) / sums[0] / 1e3);
  }
  // Back to the pool in the order of its stream (every launch that used them has finished); a cudaFree would wait
  // for the whole device (base/device_memory.h). The status block goes back to the process's pinned blocks.
  std::vector<void*> blocks = programs_ != nullptr ? programs_->blocks() : std::vector<void*>();
  blocks.insert(blocks.end(), scratch_.blocks.begin(), scratch_.blocks.end());
  blocks.insert(blocks.end(), scaled_.blocks.begin(), scaled_.blocks.end());
  blocks.push_back(counters_);
  blocks.push_back(deviceWindows_);
  blocks.push_back(phaseNs_);
  blocks.push_back(directTiming_);
  blocks.push_back(directCounter_);
  blocks.push_back(directMaps_);
  for (void* b : blocks) pool_->release(b);
  givePinnedBlockBack(status_);
  if (directError_ != nullptr) givePinnedBlockBack(directError_);
  for (auto& c : checkpoints_) spareEvents_.push_back(c.second);
  for (void* ev : spareEvents_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(ev));
  if (lastDone_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(lastDone_));
  (void)cudaGetLastError();
}

Status CudaExecutor::uploadWindowTable() {
  const size_t n = windows_.size();
  std::vector<uint8_t*> table(windows_);
  table.insert(table.end(), inboxes_.begin(), inboxes_.end());
  return pool_->copy(deviceWindows_, table.data(), 2 * n * sizeof(uint8_t*), "uploading the window table");
}

Status CudaExecutor::attachProxy(const RemoteProxy& proxy) {
  DeviceGuard guard(device_);
  for (size_t r = 0; r < windows_.size(); ++r) {
    if (!proxy.remote(static_cast<int>(r))) continue;
    windows_[r] = proxy.outbox(static_cast<int>(r));
    inboxes_[r] = proxy.inbox();
  }
  tables_.sliceBytes = proxy.sliceBytes();
  tables_.lost = proxy.lost();
  proxy_ = &proxy;
  return uploadWindowTable();
}

Status CudaExecutor::initWindow() {
  DeviceGuard guard(device_);
  const WindowHeader h = windowHeader(layout_);
  // Waited for: peers read the header (checkPeers) right after the next barrier. (From pageable memory a
  // cudaMemcpy may return before the copy lands; without a wait, a peer process may read zeros.)
  return pool_->copy(windows_[static_cast<size_t>(rank_)], &h, sizeof(h), "writing the window header");
}

Status CudaExecutor::checkPeers(const WindowHeader* gathered) const {
  DeviceGuard guard(device_);
  for (size_t r = 0; r < windows_.size(); ++r) {
    WindowHeader h;
    if (windows_[r] == nullptr) {
      if (gathered == nullptr)
        return Status::error(collieInternalError, "rank %zu's device window is neither mapped nor gathered", r);
      h = gathered[r];
    } else {
      COLLIE_RETURN_IF_ERROR(pool_->copy(&h, windows_[r], sizeof(h), "reading a peer's window header"));
    }
    if (!sameLayout(h, layout_))
      return Status::error(collieInvalidUsage,
                           "rank %zu's device window has %u channels x %u slots of %llu bytes (LL: %u, flag period "
                           "%u), rank %d's %u x %u of %llu (LL: %u, %u): set COLLIE_CHANNELS / COLLIE_SLOTS / "
                           "COLLIE_SLOT_BYTES / COLLIE_LL_SLOT_BYTES / COLLIE_TEST_LL_FLAG_PERIOD alike on all ranks",
                           r, h.nchannels, h.nslots, static_cast<unsigned long long>(h.slotBytes), h.llSlotBytes,
                           h.llFlagPeriod, rank_, layout_.nchannels, layout_.nslots,
                           static_cast<unsigned long long>(layout_.slotBytes), layout_.llSlotBytes,
                           layout_.llFlagPeriod);
  }
  return Status();
}

Status CudaExecutor::program(const Program& program, const Step** out) {
  // Programs too long to travel in the launch parameters (many ranks, or
  // all-to-all-v) are copied to device memory and found again by content. A
  // block is overwritten only once no launch reads it (program_cache.h), so
  // changing counts do not make the copies grow without bound.
  const uint64_t launch = launchSeq_ + 1;
  if (void* found = programs_->find(program.steps, launch, capturing_)) {
    if (capturing_) holdForGraph(found);
    *out = static_cast<const Step*>(found);
    return Status();
  }
  const size_t n = program.steps.size();
  size_t bytes = 0;
  void* block = programs_->takeFree(n, &bytes);
  if (block == nullptr) {
    bytes = ProgramCache::blockBytes(n);
    COLLIE_RETURN_IF_ERROR(deviceBlock(bytes, &block).withContext("a program's device memory"));
    extraBytes_ += bytes;
  }
  // The steps travel in the parameters of store kernels on the launch's own stream, right before it, and are
  // never waited for here: with more streams than hardware queues, a copy on another stream can queue behind a
  // peer's kernel that waits for this rank's launch, and a host wait for it never ends (docs/cuda-executor.md,
  // "Launch state"); and a copy from host memory would need pinned memory, whose
  // allocation may wait for the device ("No allocation in an enqueue"). During a capture the stores become
  // nodes of the graph, run at each replay; the block is then the graph's own (ProgramCache::insert), since
  // before the first replay it holds nothing for another launch to find.
  Status st = orderPlannedLaunch();
  if (st.ok())
    st = cudaStatus(static_cast<cudaError_t>(launchStore(block, program.steps.data(), n * sizeof(Step), planStream_)),
                    "uploading a program");
  if (st.ok()) planQueued_ = true;
  if (!st.ok()) {
    programs_->release(block, bytes);
    return st;
  }
  programs_->insert(program.steps, block, bytes, launch, capturing_);
  if (capturing_) holdForGraph(block);
  *out = static_cast<const Step*>(block);
  return Status();
}

Status CudaExecutor::orderPlannedLaunch() {
  if (planOrdered_) return Status();
  planOrdered_ = true;
  return waitForPrevious(planStream_, capturing_);
}

void CudaExecutor::holdForGraph(void* block) {
  // Bookkeeping only: a failure here costs the block until the communicator goes, never the call.
  RelaxedCapture relaxed;
  auto* hold = new GraphHold;
  hold->gone = graphsGone_;
  hold->block = block;
  cudaUserObject_t object;
  if (captureGraph_ == nullptr ||
      cudaUserObjectCreate(&object, hold, &GraphHold::destroy, 1, cudaUserObjectNoDestructorSync) != cudaSuccess) {
    (void)cudaGetLastError();
    delete hold;
    return;
  }
  // The graph takes over our reference: the object lives as long as the graph, its executable graphs and their
  // queued replays (CUDA defers the destructor until those finish).
  if (cudaGraphRetainUserObject(static_cast<cudaGraph_t>(captureGraph_), object, 1, cudaGraphUserObjectMove) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    hold->keep.store(true);
    (void)cudaUserObjectRelease(object, 1);  // its destructor now only frees `hold`
    (void)cudaGetLastError();
  }
}

void CudaExecutor::unpinGone() {
  std::vector<void*> gone;
  {
    std::lock_guard<std::mutex> lock(graphsGone_->mu);
    gone.swap(graphsGone_->blocks);
  }
  for (void* b : gone) programs_->unpin(b);
}

void CudaExecutor::pollCheckpoints() {
  // Relaxed: a query is an unsafe call while this thread captures, or another thread captures in global mode.
  RelaxedCapture relaxed;
  while (!checkpoints_.empty()) {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(checkpoints_.front().second));
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      // Not ours to report (a failed launch is found through the status block): keep the blocks.
      (void)cudaGetLastError();
      break;
    }
    programs_->completed(checkpoints_.front().first);
    spareEvents_.push_back(checkpoints_.front().second);
    checkpoints_.pop_front();
  }
}

void CudaExecutor::recordCheckpoint(void* stream) {
  // Bookkeeping only: a failure here costs reuse, never the call.
  RelaxedCapture relaxed;
  void* ev = nullptr;
  if (checkpoints_.size() >= 4) {
    // Enough in flight: move the newest forward (a query answers for the latest record), so the
    // checkpoints do not stay on launches long past while the GPU catches up.
    ev = checkpoints_.back().second;
    checkpoints_.pop_back();
  } else if (!spareEvents_.empty()) {
    ev = spareEvents_.back();
    spareEvents_.pop_back();
  } else {
    cudaEvent_t created;
    if (cudaEventCreateWithFlags(&created, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      return;
    }
    ev = created;
  }
  if (cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(stream)) != cudaSuccess) {
    (void)cudaGetLastError();
    spareEvents_.push_back(ev);
    return;
  }
  checkpoints_.emplace_back(launchSeq_, ev);
}

size_t CudaExecutor::programBlocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return programs_->entries() + programs_->freeBlocks();
}

uint64_t CudaExecutor::launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launchSeq_;
}

uint64_t CudaExecutor::peerWaits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peerWaits_;
}

Status CudaExecutor::grow(GrownBuffer* buf, size_t bytes, const char* what, void** out) {
  if (bytes > buf->bytes) {
    // Grown, never shrunk or freed early: launches still queued (or a peer's kernel reading it in place) may use
    // the old buffer, so it lives until the communicator does.
    void* p = nullptr;
    COLLIE_RETURN_IF_ERROR(deviceBlock(bytes, &p).withContext(what));
    buf->blocks.push_back(p);
    buf->bytes = bytes;
    extraBytes_ += bytes;
  }
  *out = buf->blocks.empty() ? nullptr : buf->blocks.back();
  return Status();
}

Status CudaExecutor::scratch(size_t bytes, void** out) { return grow(&scratch_, bytes, "scratch", out); }

Status CudaExecutor::scaleInput(ExecArgs* args) {
  const uint64_t n = args->scale.count;
  if (n == 0) return Status();  // nothing to read: the program moves nothing either
  void* dst = nullptr;
  COLLIE_RETURN_IF_ERROR(grow(&scaled_, n * typeSize(args->type), "the pre-multiplied sum's scaled input", &dst));
  // The buffer's last reader was the communicator's previous launch (and the peers' kernels reading it in place,
  // which that launch's drain waited for): after it, on whatever stream it ran.
  COLLIE_RETURN_IF_ERROR(orderPlannedLaunch());
  const int rc = launchScale(args->type, dst, args->input, n,
                             args->scale.deviceScalar != nullptr ? nullptr : args->scale.hostScalar,
                             args->scale.deviceScalar, args->stream);
  if (rc != 0) return cudaStatus(static_cast<cudaError_t>(rc), "launching the scaling kernel");
  planQueued_ = true;
  args->input = dst;
  return Status();
}

Status CudaExecutor::run(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  RoundPlan plan;
  plan.last = work;
  return runRounds(plan, args);
}

Status CudaExecutor::runRounds(const RoundPlan& plan, ExecArgs args) {
  std::lock_guard<std::mutex> lock(mu_);
  // On every way out, after all this call put on the stream: co-located peers may then queue their next
  // work (ColocatedStreams::waitForPeers). Sends and receives are counted by core (p2pQueued).
  struct MarkQueued {
    ColocatedStreams* peers;
    uint64_t seq;
    ~MarkQueued() {
      if (peers != nullptr && seq != ExecArgs::kNotACollective) peers->queuedCollective(seq);
    }
  } markQueued{colocated_.get(), args.collectiveSeq};
  // A direct algorithm's call runs as a direct kernel (the file comment); any other program with direct steps is
  // refused.
  const bool direct = !plan.last.empty() && plan.last[0].program != nullptr && hasDirectSteps(*plan.last[0].program);
  DirectKind directKind = DirectKind::kOneShotAllReduce;
  bool copyEngine = false;  // direct_ce: copies instead of the kernel (cuda_copy_engine.cc)
  if (direct)
    COLLIE_RETURN_IF_ERROR(directKindOf(plan, args, &directKind, &copyEngine));
  else
    COLLIE_RETURN_IF_ERROR(refuseDirectSteps(plan, "cuda"));
  COLLIE_RETURN_IF_ERROR(asyncStatus());
  DeviceGuard guard(device_);
  // An enqueue should take microseconds. One that blocks (a CUDA call waiting for the device) while
  // peers' kernels already wait for this rank's ends in their timeout: say where the time went.
  using Clock = std::chrono::steady_clock;
  // The enqueue's parts, timed one after another, so that a slow enqueue names the part (and so the CUDA calls)
  // where the time went; a part that returned early ends at the destructor.
  struct SlowEnqueueLog {
    enum Part { kCapture, kPeers, kScale, kPlan, kOrder, kLaunch, kAfter, kParts };
    Clock::time_point start = Clock::now();
    double secs[kParts] = {};
    int reached = 0;  // parts done
    Clock::time_point last = start;
    int rank;
    uint64_t seq;
    CudaExecutor* e;
    void done(Part p) {  // the time since the last part done is p's (a part with nothing to do takes none)
      const Clock::time_point now = Clock::now();
      secs[p] = std::chrono::duration<double>(now - last).count();
      last = now;
      reached = p + 1;
    }
    ~SlowEnqueueLog() {
      done(static_cast<Part>(reached));  // the part where it returned, or kAfter
      const double total = std::chrono::duration<double>(last - start).count();
      if (e->phaseNs_ != nullptr) {
        // COLLIE_KERNEL_TIMING=1: the host's part of each launch, beside the kernels' parts.
        e->enqueueNs_ += static_cast<uint64_t>(total * 1e9);
        e->planNs_ += static_cast<uint64_t>(secs[kPlan] * 1e9);
        ++e->enqueues_;
      }
      // A wait for peers' enqueues is no CUDA call blocking: ranks a collective or more apart wait so by design.
      if (total - secs[kPeers] > 0.1)
        COLLIE_WARN(
            "rank %d: enqueueing call #%llu took %.3f s: %.3f s asking the stream's capture state, %.3f s waiting "
            "for the ranks sharing its GPU to queue their part of the work before, %.3f s scaling the input, %.3f s "
            "preparing programs and scratch, %.3f s ordering it after the communicator's previous work, %.3f s in "
            "the kernel's launch, %.3f s after it",
            rank, static_cast<unsigned long long>(seq), total, secs[kCapture], secs[kPeers], secs[kScale], secs[kPlan],
            secs[kOrder], secs[kLaunch], secs[kAfter]);
    }
  } slowLog{};
  slowLog.rank = rank_;
  slowLog.seq = args.seq;
  slowLog.e = this;
  cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
  COLLIE_RETURN_IF_ERROR(streamCaptured(stream, &capturing_));
  captureGraph_ = nullptr;
  if (capturing_) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    // Without the graph, programs of this launch stay pinned (holdForGraph).
    if (cudaStreamGetCaptureInfo(stream, &capture, nullptr, &graph) == cudaSuccess)
      captureGraph_ = graph;
    else
      (void)cudaGetLastError();
  }
  // direct_ce: checkDirect refused a capture before the call was numbered.
  if (copyEngine && capturing_) return Status::error(collieInternalError, "a direct_ce call came captured");
  // Programs whose graphs are gone count against the cache's limits again; learn which programs no launch reads
  // any more, so their blocks can be reused.
  unpinGone();
  if (programs_->overLimit()) pollCheckpoints();
  slowLog.done(SlowEnqueueLog::kCapture);
  // Before anything of this call enters a hardware queue (colocated_streams.h says why). A capture queues
  // nothing now; its replays are the caller's to order.
  // (A group of sends and receives waited before its first copy: queueAfterPeers.)
  if (!capturing_ && args.collectiveSeq != ExecArgs::kNotACollective) COLLIE_RETURN_IF_ERROR(waitForColocatedPeers());
  slowLog.done(SlowEnqueueLog::kPeers);
  KernelArgs a;
  bool empty = true;
  planStream_ = args.stream;
  planOrdered_ = false;
  planQueued_ = false;
  // Program copies or a scaling already queued for a launch that will not come are the communicator's work all
  // the same: a later launch elsewhere must not overtake them, nor a reused block be rewritten under them.
  auto withoutLaunch = [&](const Status& why) {
    if (!planQueued_) return why;
    enqueued(args.stream);
    const Status recorded = recordDone(args.stream, capturing_);
    return why.ok() ? recorded : why;
  };
  // The one-shot kernel multiplies its own input by the scalar itself (DirectArgs::premul); the others read
  // peers' inputs, so the scaled copy is what they publish.
  if (args.scale.active && !(direct && directKind == DirectKind::kOneShotAllReduce)) {
    Status scaled = scaleInput(&args);
    if (!scaled.ok()) return withoutLaunch(scaled);
  }
  slowLog.done(SlowEnqueueLog::kScale);
  DirectArgs d;
  int directBlocks = 1;
  StagedCopies staged;
  Status planned = copyEngine ? Status()
                   : direct   ? planDirect(*plan.last[0].program, directKind, args, &d, &directBlocks, &staged)
                              : planLaunch(plan, args, tables_, this, &a, &empty);
  if (direct) empty = false;
  slowLog.done(SlowEnqueueLog::kPlan);
  if (!planned.ok() || empty) return withoutLaunch(planned);
  const bool captured = capturing_;
  // A replay's stream is not known now: only launches made now are compared.
  if (colocated_ != nullptr && !captured && args.collectiveSeq != ExecArgs::kNotACollective) {
    Status st = colocated_->note(args.collectiveSeq, args.stream);
    if (!st.ok()) return withoutLaunch(st);
  }
  launches_.record(args.seq, *plan.last[0].program, args);
  COLLIE_RETURN_IF_ERROR(orderPlannedLaunch());
  slowLog.done(SlowEnqueueLog::kOrder);
  int rc = 0;
  // The staging buffer's copies go on the launch's stream, in its order: the peers read and write the buffer only
  // between the kernel's entry and exit barriers.
  if (staged.inBytes > 0)
    rc = cudaMemcpyAsync(staged.stagedIn, staged.in, staged.inBytes, cudaMemcpyDeviceToDevice, stream);
  Status moved;
  double met = 0;  // direct_ce and one launch for every rank: seconds meeting the peers, counted as waiting
  if (copyEngine)
    moved = copyEngineCall(*plan.last[0].program, args, &met);
  else if (rc == 0 && direct && directKind == DirectKind::kOneShotAllReduce && oneLaunch_)
    moved = oneLaunchCall(d, directBlocks, args, captured, &met);
  else if (rc == 0)
    rc = direct ? launchDirect(d, directKind, args.type, args.op, directBlocks, kDirectMaxThreads, args.stream)
                : launchProgram(a, args.type, args.op, args.stream);
  if (rc == 0 && staged.outBytes > 0 && staged.blocks == 0)
    rc = cudaMemcpyAsync(staged.out, staged.stagedOut, staged.outBytes, cudaMemcpyDeviceToDevice, stream);
  for (int b = 0; rc == 0 && staged.outBytes > 0 && b < staged.blocks; ++b)
    rc = cudaMemcpyAsync(static_cast<char*>(staged.out) + staged.blockAt[b],
                         static_cast<const char*>(staged.stagedOut) + staged.blockAt[b], staged.blockBytes[b],
                         cudaMemcpyDeviceToDevice, stream);
  slowLog.done(SlowEnqueueLog::kLaunch);
  slowLog.secs[SlowEnqueueLog::kLaunch] -= met;
  slowLog.secs[SlowEnqueueLog::kPeers] += met;
  // From here the kernel may be queued, even after an error: it counts as a launch (the programs it read stay
  // until a later checkpoint), and the next launch waits for the event whatever its stream.
  ++launchSeq_;
  enqueued(args.stream);
  if (!moved.ok()) return moved;
  if (rc != 0)
    return cudaStatus(static_cast<cudaError_t>(rc),
                      direct ? "launching the direct kernel or its staging copies" : "launching the program kernel");
  COLLIE_RETURN_IF_ERROR(recordDone(args.stream, captured));
  // Over the cache's limits: learn later when this launch (and every one before it) has finished.
  if (!captured && programs_->overLimit()) recordCheckpoint(args.stream);
  return Status();
}

Status CudaExecutor::waitForPrevious(void* streamHandle, bool captured) {
  // Two kernels of a communicator must never overlap (they share the flag
  // counters). Another stream than last time waits for the previous launch.
  // A captured launch runs at each replay of the graph, after or between
  // launches made now: it waits for, and records, the event as external
  // nodes of the graph, so each replay is ordered like a launch made then.
  // (A plain record during a capture would leave the event unusable outside
  // it: CUDA's cudaErrorCapturedEvent.)
  // (Waiting on an event never recorded waits for nothing: a graph captured
  // before any launch is still ordered between its own replays.) One handle,
  // cudaStreamPerThread, is another stream in each thread. Once a launch
  // has been captured, a replay may run between any two launches made now,
  // on any stream, without Collie seeing it: every later launch waits.
  cudaStream_t stream = static_cast<cudaStream_t>(streamHandle);
  if (captured) everCaptured_ = true;
  if (!captured && !(launched_ && (everCaptured_ || !lastStreamKnown_ || streamHandle != lastStream_ ||
                                   stream == cudaStreamPerThread)))
    return Status();
  return cudaStatus(
      cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(lastDone_), captured ? cudaEventWaitExternal : 0),
      "cudaStreamWaitEvent on the communicator's previous launch or copy");
}

void CudaExecutor::enqueued(void* stream) {
  launched_ = true;
  lastStream_ = stream;
  lastStreamKnown_ = false;  // until recordDone has recorded the event there
}

Status CudaExecutor::recordDone(void* stream, bool captured) {
  COLLIE_RETURN_IF_ERROR(
      cudaStatus(cudaEventRecordWithFlags(static_cast<cudaEvent_t>(lastDone_), static_cast<cudaStream_t>(stream),
                                          captured ? cudaEventRecordExternal : 0),
                 "cudaEventRecord after the launch or copy"));
  // After a capture the stream of the next launch is unknown (a graph may be
  // replayed on any stream): the next launch made now waits in any case.
  lastStreamKnown_ = !captured;
  return Status();
}

Status CudaExecutor::waitForColocatedPeers() {
  if (colocated_ == nullptr) return Status();
  bool waited = false;
  COLLIE_RETURN_IF_ERROR(colocated_->waitForPeers(
      tables_.timeoutSec, [this] { return whyStopWaiting(); }, &waited));
  if (waited) ++peerWaits_;
  return Status();
}

Status CudaExecutor::whyStopWaiting() {
  if (status_ != nullptr && __atomic_load_n(&status_->abort, __ATOMIC_RELAXED) != 0)
    return Status::error(collieRemoteError, "rank %d: the communicator was aborted", rank_);
  return asyncStatus();
}

void CudaExecutor::p2pQueued(int peer, uint64_t sends, uint64_t recvs) {
  if (colocated_ != nullptr) colocated_->queuedP2p(peer, sends, recvs);
}

Status CudaExecutor::queueAfterPeers(collieStream_t streamHandle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (colocated_ == nullptr) return Status();
  COLLIE_RETURN_IF_ERROR(asyncStatus());
  DeviceGuard guard(device_);
  bool captured = false;
  COLLIE_RETURN_IF_ERROR(streamCaptured(static_cast<cudaStream_t>(streamHandle), &captured));
  if (captured) return Status();  // queues nothing now
  return waitForColocatedPeers();
}

Status CudaExecutor::localCopy(void* dst, const void* src, size_t bytes, collieStream_t streamHandle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dst == src || bytes == 0) return Status();
  COLLIE_RETURN_IF_ERROR(asyncStatus());
  DeviceGuard guard(device_);
  // Ordered like a launch: after the communicator's previous work, and before its next launch on any stream,
  // collieCommFinalize and destroy (which wait for the event), so calls on two streams still run in call order.
  cudaStream_t stream = static_cast<cudaStream_t>(streamHandle);
  bool captured = false;
  COLLIE_RETURN_IF_ERROR(streamCaptured(stream, &captured));
  COLLIE_RETURN_IF_ERROR(waitForPrevious(streamHandle, captured));
  // Default: the buffers may be managed or mapped pinned memory, which the API accepts too.
  COLLIE_RETURN_IF_ERROR(
      cudaStatus(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream), "cudaMemcpyAsync of a rank's own data"));
  enqueued(streamHandle);
  return recordDone(streamHandle, captured);
}

void CudaExecutor::abort() {
  // The kernels poll it while the host writes it (mapped pinned memory).
  if (status_ != nullptr) __atomic_store_n(&status_->abort, 1u, __ATOMIC_RELAXED);
}

void CudaExecutor::watchPeerProcesses(std::vector<int> pids) {
  peerWatch_ = std::make_unique<PeerWatch>(std::move(pids), [this](int r) {
    if (status_ == nullptr) return;
    // The kernels' waits on r give up (DeviceStatus::exited); a rank past the mask's 64 stops them all, as an
    // abort does.
    if (r < 64) {
      __atomic_fetch_or(&status_->exited, uint64_t{1} << r, __ATOMIC_RELAXED);
    } else {
      abort();
    }
  });
}

Status CudaExecutor::asyncStatus() const {
  if (directError_ != nullptr) {
    // Written before the code (the kernel's system fence), and not again.
    const uint32_t code = __atomic_load_n(&directError_->code, __ATOMIC_ACQUIRE);
    if (code != 0) {
      const unsigned long long call = directError_->call;
      if (code == collieInvalidUsage && directError_->reason == kDirectCallsDiffer)
        return Status::error(collieInvalidUsage,
                             "rank %d: in direct call #%llu rank %d's call differs from this rank's: the collective, "
                             "data type, operator, count, root or algorithm is not the same (COLLIE_CHECK=1 compares "
                             "them before each call and names what differs); found on the GPU, before any move",
                             directError_->rank, call, directError_->peer);
      if (code == collieInvalidUsage && directError_->reason == kDirectCountsDiffer)
        return Status::error(collieInvalidUsage,
                             "rank %d: in direct all-to-all-v call #%llu rank %d's counts differ from this rank's: "
                             "what one sends the other must receive (sendcounts[peer] here against the peer's "
                             "recvcounts[this rank], and the other way round; COLLIE_CHECK=1 compares them before "
                             "each call); nothing moved between the two, the other ranks' blocks did",
                             directError_->rank, call, directError_->peer);
      if (code == collieInvalidUsage && directError_->reason == kDirectUnmappedWindow)
        return Status::error(collieInvalidUsage,
                             "rank %d: in direct call #%llu rank %d announced a buffer in a window this rank has not "
                             "mapped: register and deregister windows (collieCommWindowRegister) on every rank "
                             "alike",
                             directError_->rank, call, directError_->peer);
      if (code == collieInvalidUsage)  // a one-shot numbered past its flags (direct_kernels.h)
        return Status::error(collieInvalidUsage,
                             "rank %d: direct call #%llu is a one-shot allreduce past the %llu calls its flags tell "
                             "apart: make a new communicator",
                             directError_->rank, call, static_cast<unsigned long long>(kDirectMaxOneShotCalls));
      return Status::error(static_cast<collieResult_t>(code),
                           "rank %d waiting on rank %d in direct call #%llu (block %d) on the GPU: %s",
                           directError_->rank, directError_->peer, call, directError_->block,
                           code == collieTimeout ? "the wait timed out (COLLIE_TIMEOUT)"
                                                 : "the communicator was aborted, or another of the call's waits gave "
                                                   "up first");
    }
  }
  if (status_ == nullptr || __atomic_load_n(&status_->code, __ATOMIC_ACQUIRE) == 0) return Status();
  // Said only where the rank waited on is the one gone; waits on the others failed for reasons of their own.
  // Written before the code (acquired above), and not again.
  const int peer = status_->peer;
  return launchFailure(*status_, rank_, "on the GPU", launches_, proxy_,
                       peerWatch_ != nullptr ? peerWatch_->reason(peer) : std::string());
}

Status CudaExecutor::synchronize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!launched_) return Status();
  DeviceGuard guard(device_);
  COLLIE_RETURN_IF_ERROR(cudaStatus(cudaEventSynchronize(static_cast<cudaEvent_t>(lastDone_)), "cudaEventSynchronize"));
  // Every launch made so far has finished (those captured since may replay, but their programs are pinned).
  programs_->completed(launchSeq_);
  return asyncStatus();
}

}  // namespace collie
