// The CUDA executor: enqueues a rank's Program on the caller's stream as one
// kernel launch (one block per channel) over the device windows of
// transport/cuda_ipc. The step sequencing is the host executor's
// (executor/step_runner.h); only the primitives differ (kernels/).
//
// Ordering: a communicator's launches must run one after another, because
// each continues the flag counters the previous one left in device memory.
// Launches on one stream are ordered by the stream; when a call comes on
// another stream, that stream first waits for the previous launch. A launch
// captured into a CUDA graph waits for and records the same event through
// external event nodes, so every replay of the graph is ordered the same way
// with the launches around it, and synchronize() waits for replays too.
//
// Direct algorithms (AlgorithmInfo::mapsPeers, whose programs load and store peers' memory) run as the direct
// kernels written for them (kernels/direct_kernels.h), where every rank's window is mapped and so holds the
// kernels' region (WindowLayout::directSlotLines). Peers' buffers are reached as they are from threads of this
// process, and through windows or the staging buffer from other processes (placeDirectBuffers). Their launches
// are ordered like the program kernel's; they number their calls apart, on the device (DirectCounter), so a
// captured one replays as a fresh call. Their copy-engine forms (direct_ce) run as cudaMemcpyAsync per peer
// instead, where every rank is a thread of this process (cuda_copy_engine.cc).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "executor/executor.h"
#include "executor/launch_plan.h"
#include "executor/peer_board.h"
#include "executor/peer_watch.h"
#include "executor/program_cache.h"
#include "executor/protocol.h"
#include "kernels/direct_kernels.h"
#include "kernels/launch.h"

namespace collie {

struct GraphsGone;  // cuda_executor.cc

class ColocatedStreams;
class DevicePool;
class DeviceWindows;
class RemoteProxy;

class CudaExecutor : public Executor, private LaunchStorage {
 public:
  /// `windows` must outlive the executor; `device` is the communicator's GPU, `pool` the communicator's device
  /// memory (base/device_memory.h), from which the executor takes all of its own.
  static Status create(int rank, int device, const WindowLayout& layout, const DeviceWindows& windows,
                       std::shared_ptr<DevicePool> pool, double timeoutSec, std::unique_ptr<CudaExecutor>* out);
  ~CudaExecutor() override;

  /// Writes our window header (device memory); peers check it with checkPeers().
  Status initWindow();
  /// Checks every peer's window header against our layout: the mapped ones in
  /// place, the others (peers on other hosts) in `gathered`, every rank's
  /// header as the bootstrap gathered them (may be null when all are mapped).
  Status checkPeers(const WindowHeader* gathered = nullptr) const;
  /// Peers on other hosts are reached through `proxy` (executor/remote_proxy.h,
  /// in mapped pinned memory): their windows become its outboxes, and their
  /// slices are read from its inbox. The LL protocol is then off: an LL slice
  /// carries no byte count the proxy could read. `proxy` must outlive this executor.
  Status attachProxy(const RemoteProxy& proxy);

  Status run(const std::vector<ChannelWork>& work, const ExecArgs& args) override;
  /// Every round of the call in one launch (Executor::runRounds says why).
  Status runRounds(const RoundPlan& plan, ExecArgs args) override;
  int channels() const override { return static_cast<int>(layout_.nchannels); }
  uint64_t roundElemsLL(size_t typeSize) const override {
    return tables_.lost != nullptr ? 0 : layout_.nchannels * (llPayloadBytes(layout_.llSlotBytes) / typeSize);
  }
  uint64_t roundElems(size_t typeSize) const override { return layout_.nchannels * (layout_.slotBytes / typeSize); }
  void setTimeout(double seconds) override;

  /// A copy engine's copy in place of a launch, ordered like one (one rank's collectives, a send to self).
  Status localCopy(void* dst, const void* src, size_t bytes, collieStream_t stream) override;
  Status queueAfterPeers(collieStream_t stream) override;
  void p2pQueued(int peer, uint64_t sends, uint64_t recvs) override;
  /// Makes every wait of running and future launches give up.
  void abort() override;
  /// pids[r] > 0: rank r is another process of this machine, whose windows we opened through cudaIpc. Once one of
  /// them is gone (killed, or exited), the communicator's kernels stop as on abort, within about 20 ms instead of
  /// after COLLIE_TIMEOUT, and the error names it (executor/peer_watch.h).
  void watchPeerProcesses(std::vector<int> pids);
  /// The first failure a kernel recorded (rank, peer, step), or OK.
  Status asyncStatus() const override;
  /// Waits for the communicator's last launch (or graph replay) enqueued so far.
  Status synchronize() override;
  void* devicePool() const override;
  /// A pre-multiplied sum's scaling is a kernel of the launch, into a buffer of the executor's own: no
  /// allocation before the call and no free after it on the caller's stream (see scaleInput).
  bool scalesInput() const override { return true; }
  Status checkDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type, ReduceOp op,
                     const void* input, const void* output, bool scaled, collieStream_t stream, VExtents v) override;
  Status mapWindow(int number, const void* base, uint64_t bytes, const std::vector<PeerRange>& ranges) override;
  Status unmapWindow(int number) override;
  Status runsDirect(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                    ReduceOp op) const override;
  /// runsDirect, and with peer processes a call whose buffers fit the staging buffer: a rank stages what lies
  /// outside its windows, and the staging buffer is the same size on every rank (core/comm_init.cc checks).
  bool directFits(Collective c, const std::string& algorithm, uint64_t count, collieDataType_t type,
                  ReduceOp op) const override;
  bool directSends(const Program& p, void* const* bufs, size_t elemSize, int divisor,
                   std::vector<uint8_t>* marks) const override {
    return directSendsOf(tables_, p, bufs, elemSize, divisor, marks);
  }
  /// Device bytes this rank holds beyond its window (counters, programs, scratch).
  size_t deviceExtraBytes() const { return extraBytes_; }
  /// Device blocks holding uploaded programs, cached or free for reuse (bounded; see program_cache.h).
  size_t programBlocks() const;
  /// Kernels launched so far (captured ones counted once, at capture).
  uint64_t launches() const;
  /// COLLIE_DIRECT_ONE_LAUNCH=1: one launch serves every rank of a direct_oneshot call (cuda_one_launch.cc) where
  /// every rank is a thread of this process on this GPU; elsewhere it changes nothing. Set before the first call.
  void setOneLaunch(bool on);
  /// This rank's direct_oneshot calls that one launch served with its peers' (cuda_one_launch.cc).
  uint64_t oneLaunchCalls() const;
  /// Collectives and groups of sends and receives whose enqueue waited for a co-located peer to queue its part
  /// of the work before (colocated_streams.h).
  uint64_t peerWaits() const;
  const WindowLayout& layout() const { return layout_; }

 private:
  CudaExecutor() = default;
  // LaunchStorage: long programs uploaded and found again by content; scratch grown, never shrunk.
  Status program(const Program& program, const Step** out) override;
  Status scratch(size_t bytes, void** out) override;
  Status uploadWindowTable();
  // A direct algorithm's call (the file comment): which kernel runs `plan` (one program of the whole call), and
  // whether the copy engine moves it instead (direct_ce), or why none does here.
  Status directKindOf(const RoundPlan& plan, const ExecArgs& args, DirectKind* kind, bool* copyEngine) const;
  // The direct kernel's arguments for `program` on args' buffers (the next direct call's number taken), and its grid.
  // A direct call's copies through the staging buffer (window 0), where a peer process cannot reach its buffers
  // in place: the input in before the launch, the output out after it (bytes 0: none).
  struct StagedCopies {
    const void* in = nullptr;
    void* stagedIn = nullptr;
    uint64_t inBytes = 0;
    void* out = nullptr;
    const void* stagedOut = nullptr;
    uint64_t outBytes = 0;
    // All-to-all-v: the output comes back block by block (blocks > 0: [at, at + bytes) of each), since the gaps
    // between its blocks are the caller's and keep what they held.
    int blocks = 0;
    uint64_t blockAt[kDirectMaxRanks] = {};
    uint64_t blockBytes[kDirectMaxRanks] = {};
  };
  // A direct_ce call of `program` (cuda_copy_engine.cc): its moves queued as copies on args' stream, ordered
  // after and before the peers' parts by events. *waitSecs: the time spent meeting the peers on the host.
  Status copyEngineCall(const Program& program, const ExecArgs& args, double* waitSecs);
  // A direct_oneshot call with arguments d and `blocks` blocks, where one launch serves every rank
  // (cuda_one_launch.cc): rank 0 launches every rank's grid on its stream, after its peers' streams reached the
  // call and before they go on, both by events. *waitSecs: the time spent meeting the peers on the host.
  Status oneLaunchCall(const DirectArgs& d, int blocks, const ExecArgs& args, bool captured, double* waitSecs);
  // Where every rank is a thread of this process: board_, with this rank's events.
  Status openPeerBoard(const DeviceWindows& windows);
  // A meeting of the ranks' enqueues on board_ for args' call (`what`: its algorithm, for the sentences): records
  // `event` on args' stream (none: null) and posts *mine with it; posts_ then holds every rank's post. *waitSecs
  // gains the time the meeting took.
  Status meetPeers(PeerBoard::Meeting m, void* event, const ExecArgs& args, const char* what, PeerBoard::Post* mine,
                   double* waitSecs);
  // args' stream waits for the event of peer's post.
  Status waitForPeer(const PeerBoard::Post& peer, const ExecArgs& args, const char* what);
  // OK where every post of the first meeting carries args' call signature, else the first that differs, as
  // every rank finds it: copies or a grid sized by this rank's call would overrun buffers sized by another's.
  Status postsAgree(const ExecArgs& args, const char* what) const;
  Status planDirect(const Program& program, DirectKind kind, const ExecArgs& args, DirectArgs* d, int* blocks,
                    StagedCopies* staged);
  // With peers in other processes: which window holds d's input and output for a call of `kind`, or their copies
  // through the staging buffer (StagedCopies). `ownInput`: the input is the executor's own (a scaled copy), in
  // no window. `v`: all-to-all-v's extents.
  Status placeDirectBuffers(DirectKind kind, Collective c, uint64_t count, VExtents v, collieDataType_t type,
                            const void* input, const void* output, bool ownInput, DirectArgs* d,
                            StagedCopies* staged) const;
  // The bytes of its input and output a rank of a direct call of `kind` announces to its peers (a broadcast's
  // non-root, `readsInput` false, none of its input; all-to-all-v its extents `v`).
  void directFootprint(DirectKind kind, uint64_t count, VExtents v, collieDataType_t type, bool readsInput,
                       uint64_t* inBytes, uint64_t* outBytes) const;
  // The staging buffer (window 0) among ownWindows_, or null; and the bytes of each of its halves (0 without
  // one). Under mu_.
  struct OwnWindow;
  const OwnWindow* stagingWindow() const;
  uint64_t stagingHalf() const;
  // Device memory for the launch being planned, without waiting for the device: from pool_, in the order of the
  // launch's stream (during a capture, of the pool's stream); with no pool, cudaMalloc. Freed at destroy.
  Status deviceBlock(size_t bytes, void** out);
  // ExecArgs::scale: queues the scaling kernel into scaled_ on the launch's stream, after the communicator's
  // previous work (which the last user of that buffer was), and points args->input at it.
  Status scaleInput(ExecArgs* args);
  // A buffer grown for the launch being planned (grow), with every smaller one before it: the last is the largest.
  struct GrownBuffer {
    std::vector<void*> blocks;
    size_t bytes = 0;
  };
  // *out = buf's last block, first grown (by deviceBlock) to `bytes` if smaller; `what` names it in errors.
  Status grow(GrownBuffer* buf, size_t bytes, const char* what, void** out);
  // Learns, without waiting, which launches have finished, so the program cache can reuse their programs' blocks.
  void pollCheckpoints();
  void recordCheckpoint(void* stream);
  // Around each launch or copy on `stream` (a cudaStream_t; `captured`: into a graph), in this order:
  // waitForPrevious makes it wait for the communicator's previous work when that ran elsewhere (the file comment
  // says why); enqueued notes the work (also a launch that failed, which may still be queued), so the next call
  // on any other stream waits; recordDone records lastDone_ after it.
  Status waitForPrevious(void* stream, bool captured);
  // waitForPrevious for the launch being planned, once: before its first program copy, or before the launch.
  Status orderPlannedLaunch();
  void enqueued(void* stream);
  Status recordDone(void* stream, bool captured);
  // With mu_ held: until every co-located peer has queued its part of what this rank queued before
  // (ColocatedStreams::waitForPeers); ends early on an abort or a failed kernel of ours.
  Status waitForColocatedPeers();
  // Between the polls of a wait on the host for peers: the abort, or a failed kernel of ours; else OK.
  Status whyStopWaiting();
  // The graph being captured owns a CUDA user object for the program in `block`, whose destructor queues the
  // block in graphsGone_ once the graph, its executable graphs and their replays are all gone; unpinGone() then
  // unpins it in the cache. Without one (an error), the program stays pinned until the communicator goes.
  void holdForGraph(void* block);
  void unpinGone();

  int rank_ = 0;
  int device_ = -1;
  WindowLayout layout_;
  std::unique_ptr<ColocatedStreams> colocated_;  // with peers that are threads of this process on this GPU
  // direct_ce and one launch serving every rank: where the ranks meet, with this rank's events, when every rank is
  // a thread of this process (else null).
  std::unique_ptr<PeerBoard> board_;
  bool oneLaunch_ = false;                // setOneLaunch
  uint64_t oneLaunchCalls_ = 0;           // under mu_
  std::vector<PeerBoard::Post> posts_;    // a meeting's posts, reused from call to call (under mu_)
  std::vector<uint8_t*> windows_;         // as this rank addresses them (null: a peer on another host)
  std::vector<uint8_t*> inboxes_;         // where each peer's slices for us land: our window, or the proxy's inbox
  uint8_t** deviceWindows_ = nullptr;     // windows_ then inboxes_, in device memory
  const RemoteProxy* proxy_ = nullptr;    // with a proxy: for the reason it lost a peer
  std::unique_ptr<PeerWatch> peerWatch_;  // peer processes of this machine (watchPeerProcesses), or null
  RecentLaunches launches_;               // names for the error line of a failure found later
  uint64_t* counters_ = nullptr;          // device: posted/consumed/clean per channel per peer
  uint64_t* phaseNs_ = nullptr;           // device: COLLIE_KERNEL_TIMING's sums (kernels/launch.h), or null
  // With COLLIE_KERNEL_TIMING=1, the host's part: runRounds' time in all, its planning, and the launches timed.
  uint64_t enqueueNs_ = 0, planNs_ = 0, enqueues_ = 0;
  uint32_t* failed_ = nullptr;      // device
  DeviceStatus* status_ = nullptr;  // mapped pinned host memory (host address)
  // The direct kernels' failure record, in mapped pinned host memory (as the host and the device address it), and
  // their call counter (device memory); null where the windows hold no direct region.
  DirectError* directError_ = nullptr;
  DirectError* directErrorDevice_ = nullptr;
  DirectCounter* directCounter_ = nullptr;
  int directFit_[kDirectKinds][collieNumTypes] = {};  // blocks of each kernel and type that are resident at once
  bool directGpuScope_ = false;  // every rank is a thread of this process on this GPU (DirectArgs::gpuScope)
  // Peers in other processes (bit r: rank r; DirectArgs::remotePeers) and the windows mapped for them: the table
  // the direct kernels read (device, kDirectMaxWindows x kDirectMaxRanks) and this rank's own ranges.
  uint32_t directRemotePeers_ = 0;
  DirectPeerMap* directMaps_ = nullptr;
  struct OwnWindow {
    int number;
    uintptr_t base;
    uint64_t bytes;
  };
  std::vector<OwnWindow> ownWindows_;
  bool stagedSaid_ = false;           // the INFO line of the first call copied through the staging buffer
  uint64_t* directTiming_ = nullptr;  // device: COLLIE_KERNEL_TIMING's sums for the direct kernels, or null
  LaunchTables tables_;               // what every launch points at: the members above, the proxy's tables
  void* lastStream_ = nullptr;
  bool lastStreamKnown_ = false;  // false after a captured launch: its replays may come on any stream
  bool everCaptured_ = false;     // a launch was captured: a replay may come between any two launches
  void* lastDone_ = nullptr;      // cudaEvent_t recorded after the last launch or copy
  bool launched_ = false;         // a launch or copy was made
  // The launch being planned: its stream, whether waitForPrevious ran for it, and whether work was queued on that
  // stream for it (an allocation, a program's store).
  void* planStream_ = nullptr;
  bool planOrdered_ = false;
  bool planQueued_ = false;
  // The communicator's device memory and its stream (base/device_memory.h): the window table, counters, program
  // blocks and scratch; allocations during a capture, and at destroy the timing readback and the frees.
  std::shared_ptr<DevicePool> pool_;
  // Long programs in device memory, reused once no launch reads them (executor/program_cache.h). Launches are
  // numbered; a checkpoint is an event recorded after launch `first`, queried (never waited for): launches run
  // one after another, so when it has happened every launch up to `first` has finished.
  std::unique_ptr<ProgramCache> programs_;
  uint64_t peerWaits_ = 0;                              // peerWaits()
  uint64_t launchSeq_ = 0;                              // launches made so far; the one being planned is launchSeq_ + 1
  bool capturing_ = false;                              // the launch being planned is captured into a graph
  void* captureGraph_ = nullptr;                        // cudaGraph_t being captured, while capturing_
  std::shared_ptr<GraphsGone> graphsGone_;              // shared with the user objects' destructors
  std::deque<std::pair<uint64_t, void*>> checkpoints_;  // (launch, cudaEvent_t), oldest first
  std::vector<void*> spareEvents_;                      // checkpoint events not in use
  GrownBuffer scratch_;                                 // the programs' Buffer::kScratch
  GrownBuffer scaled_;  // a pre-multiplied sum's scaled input, which peers may read in place
  size_t extraBytes_ = 0;
  mutable std::mutex mu_;
};

}  // namespace collie
