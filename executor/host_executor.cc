#include "executor/host_executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>
#include <string>

#include "executor/direct_sends.h"
#include "executor/host_flags.h"
#include "executor/peer_watch.h"
#include "executor/remote_proxy.h"
#include "executor/step_runner.h"

namespace collie {

namespace {

// Waits until ready() holds. Backs off because CI runs 8 ranks on 2 cores: a
// rank that keeps spinning holds the core its peer needs to make progress.
// Spin briefly (`spins` polls: the peer is usually a few hundred ns away; fewer
// when ranks outnumber CPUs, core/cpu_share.h), then yield the core, then sleep
// in growing steps up to 100 us. Bounded by timeoutSec and the abort flag;
// once sleeping, gone() is asked every 10 ms whether the awaited peer is dead
// (which must mean that nothing it sent can still arrive).
template <typename Ready, typename Gone>
int waitFor(Ready ready, int spins, const std::atomic<bool>* abort, double timeoutSec, Gone gone) {
  for (int i = 0; i < spins; ++i) {
    if (ready()) return collieSuccess;
    cpuRelax();
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSec));
  long sleepNs = 1000;
  Clock::time_point asked = start;
  for (uint64_t i = 0;; ++i) {
    if (ready()) return collieSuccess;
    if (abort != nullptr && abort->load(std::memory_order_relaxed)) return collieRemoteError;
    const Clock::time_point now = Clock::now();
    if (now > deadline) return collieTimeout;
    if (now - asked > std::chrono::milliseconds(10)) {
      asked = now;
      // A peer may write its last flag and exit between ready() and gone(): once it is gone nothing more
      // comes from it, so one more look decides.
      if (gone() && !ready()) return collieRemoteError;
    }
    if (now - start < std::chrono::milliseconds(2)) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs};
      nanosleep(&ts, nullptr);
      sleepNs = std::min(sleepNs * 2, 100000L);
    }
  }
}

// dst[i] = src[i] (/ divisor). dst and src may be the same range (in-place).
// n may be 0 with a null dst or src (a rank's empty block of a count smaller than
// the rank count, in a buffer never allocated): memmove's pointers must not be
// null even for 0 bytes (UBSan's nonnull-attribute), so it is skipped.
template <typename T>
void copyElements(T* dst, const T* src, uint64_t n, int divisor) {
  if (divisor > 0) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = divideBy(src[i], divisor);
  } else if (dst != src && n > 0) {
    memmove(dst, src, n * sizeof(T));
  }
}

// dst[i] = a[i] (op) b[i] (/ divisor). dst may alias b (in-place), element by element.
template <typename T, ReduceOp Op>
void reduceElements(T* dst, const T* a, const T* b, uint64_t n, int divisor) {
  if (divisor > 0) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = divideBy(applyOp<Op>(a[i], b[i]), divisor);
  } else {
    for (uint64_t i = 0; i < n; ++i) dst[i] = applyOp<Op>(a[i], b[i]);
  }
}

}  // namespace

HostExecutor::HostExecutor(int rank, const WindowLayout& layout, std::vector<uint8_t*> windows,
                           const std::atomic<bool>* abort, double timeoutSec, int spinPolls)
    : rank_(rank),
      layout_(layout),
      windows_(std::move(windows)),
      abort_(abort),
      timeoutSec_(timeoutSec),
      spinPolls_(spinPolls),
      posted_(static_cast<size_t>(layout.nranks) * layout.nchannels, 0),
      consumed_(static_cast<size_t>(layout.nranks) * layout.nchannels, 0) {
  inbound_.inboxes.assign(windows_.size(), windows_[static_cast<size_t>(rank)]);
  inProcess_.assign(windows_.size(), false);
  callCheck_.windows.assign(windows_.begin(), windows_.end());
  callCheck_.windows[static_cast<size_t>(rank)] = nullptr;
}

void HostExecutor::attachProxy(RemoteProxy* proxy) {
  for (size_t r = 0; r < windows_.size(); ++r) {
    if (!proxy->remote(static_cast<int>(r))) continue;
    windows_[r] = proxy->outbox(static_cast<int>(r));
    inbound_.inboxes[r] = proxy->inbox();
    callCheck_.windows[r] = nullptr;  // an outbox, not the peer's window
  }
  inbound_.proxy = proxy;
  remote_ = Remote();  // every peer is now addressed by loads and stores
}

void HostExecutor::initWindow() {
  const WindowHeader h = windowHeader(layout_);
  memcpy(windows_[static_cast<size_t>(rank_)], &h, sizeof(h));
}

Status HostExecutor::checkPeers(const WindowHeader* gathered) const {
  for (size_t r = 0; r < windows_.size(); ++r) {
    WindowHeader h;
    if (windows_[r] != nullptr) {
      memcpy(&h, windows_[r], sizeof(h));
    } else if (gathered != nullptr) {
      h = gathered[r];
    } else {
      return Status::error(collieInternalError, "rank %zu's window is neither mapped nor gathered", r);
    }
    if (!sameLayout(h, layout_))
      return Status::error(collieInvalidUsage,
                           "rank %zu's window has %u slots of %llu bytes for %u ranks (LL: %u, flag period %u), rank "
                           "%d's has %u of %llu for %u (LL: %u, %u): all ranks must use the same COLLIE_SLOTS / "
                           "COLLIE_SLOT_BYTES / COLLIE_WINDOW_BYTES / COLLIE_CHANNELS / COLLIE_LL_SLOT_BYTES / "
                           "COLLIE_TEST_LL_FLAG_PERIOD",
                           r, h.nslots, static_cast<unsigned long long>(h.slotBytes), h.nranks, h.llSlotBytes,
                           h.llFlagPeriod, rank_, layout_.nslots, static_cast<unsigned long long>(layout_.slotBytes),
                           layout_.nranks, layout_.llSlotBytes, layout_.llFlagPeriod);
  }
  return Status();
}

size_t HostExecutor::setRemote(RemoteWindows* remote) {
  remote_ = Remote();
  remote_.index.assign(windows_.size(), -1);
  for (size_t r = 0; r < windows_.size(); ++r)
    if (windows_[r] == nullptr) remote_.index[r] = remote_.count++;
  if (remote == nullptr || remote_.count == 0) return 0;
  remote_.windows = remote;
  // Staging and ops belong to the transport: a transfer may still read them
  // after this executor is gone (a broken communicator being torn down).
  const size_t slots = static_cast<size_t>(layout_.nchannels) * remote_.count * layout_.nslots;
  const size_t stagingBytes = slots * layout_.slotBytes;
  remote_.staging = remote->allocate(stagingBytes);
  uint8_t* ops = remote->allocate(2 * slots * sizeof(RemoteWindows::Op));
  remote_.sendOps = reinterpret_cast<RemoteWindows::Op*>(ops);
  remote_.creditOps = remote_.sendOps + slots;
  for (size_t i = 0; i < 2 * slots; ++i) new (remote_.sendOps + i) RemoteWindows::Op();
  return stagingBytes;
}

// The host's primitives for the shared step runner (executor/step_runner.h):
// one thread, flags through acquire/release atomics on the mapped windows.
// With a proxy (attachProxy) every peer looks mapped: a remote one's window is
// an outbox the proxy thread forwards, and its slices arrive in the proxy's
// inbox. Without one, a peer on another host (windows[q] == nullptr) gets the same protocol
// through the transport: the slice is staged locally, then sent into the
// peer's slot with the new `ready` behind it; our release sends `credit`. Either
// way we poll only our own window, and every wait moves the transport along.
template <typename T, ReduceOp Op>
class HostPrims {
 public:
  static constexpr bool kReadsInPlace = true;
  static constexpr bool kJoinsReceives = true;

  HostPrims(int rank, int channel, const WindowLayout& layout, const std::vector<uint8_t*>& windows, uint64_t* posted,
            uint64_t* consumed, const std::atomic<bool>* abort, double timeoutSec, int spins,
            const HostExecutor::Remote& remote, const std::vector<int>& pids, const HostExecutor::Inbound& inbound,
            const std::vector<bool>& inProcess, HostExecutor::CallCheck& callCheck, HostExecutor::GivingUp giving)
      : rank_(rank),
        channel_(channel),
        layout_(layout),
        windows_(windows),
        inbox_(inbound.inboxes.data()),
        sliceBytes_(inbound.proxy != nullptr ? inbound.proxy->sliceBytes() : nullptr),
        lost_(inbound.proxy != nullptr ? inbound.proxy->lost() : nullptr),
        posted_(posted),
        consumed_(consumed),
        abort_(abort),
        timeoutSec_(timeoutSec),
        spins_(spins),
        remote_(remote),
        pids_(pids),
        inProcess_(inProcess),
        call_(callCheck),
        giving_(giving) {}

  // For a remote peer, a slot is usable only once the transfer that last
  // used the same staging slot / credit op is done with it. The slice's size
  // is for the GPU's LL protocol; here the ready counter says it all.
  bool arrived(int p, uint64_t = 0) const {
    const uint8_t* ready = inbox_[p] + layout_.readyOffset(channel_, p);
    const uint64_t v = loadAcquire(ready);
    if (givingUp(p) ? !mayTake(p, v, ready) : !sliceReady(consumed_[p], v)) return false;
    if (isRemote(p) && !opIdle(creditOp(p, consumed_[p]))) return false;
    return sameCall(p);
  }
  bool room(int q) const {
    const uint64_t credit = loadAcquire(inbox_[q] + layout_.creditOffset(channel_, q));
    if (givingUp(q) && (credit & kFlagWithdrawn) != 0) giving_.state[q] |= kGone;  // q reads nothing more
    if (!slotFree(posted_[q], credit, layout_.nslots)) return false;
    return !isRemote(q) || opIdle(sendOp(q, posted_[q]));
  }
  int waitArrived(int p, uint64_t) const {
    return wait([&] { return arrived(p); }, p, -1);
  }
  int waitRoom(int q) const {
    return wait([&] { return room(q); }, q, -1);
  }
  int waitEither(bool sending, int q, bool receiving, int p) const {
    return wait([&] { return (sending && room(q)) || (receiving && arrived(p)); }, sending ? q : -1,
                receiving ? p : -1);
  }
  // A peer of this process may hand over a slice where it lies (its source word, written before its ready
  // flag, which arrived() acquired).
  const T* inSlot(int p) const {
    if (inProcess_[static_cast<size_t>(p)]) {
      const uint64_t at = __atomic_load_n(
          reinterpret_cast<const uint64_t*>(inbox_[p] + layout_.sourceOffset(channel_, p, consumed_[p])),
          __ATOMIC_RELAXED);
      if (at != 0) return reinterpret_cast<const T*>(static_cast<uintptr_t>(at));
    }
    return reinterpret_cast<const T*>(inbox_[p] + layout_.slotOffset(channel_, p, consumed_[p]));
  }
  void expose(int, const T* data) { exposed_ = data; }
  /// Until every peer of this process has credited all we posted (or said it reads nothing more: a credit with
  /// kFlagWithdrawn): what it reads in place is ours to change again. 0, or the failed wait's code with *peer set.
  int drain(int* peer) const {
    for (size_t q = 0; q < inProcess_.size(); ++q) {
      if (!inProcess_[q]) continue;
      *peer = static_cast<int>(q);
      const int rc =
          wait([&] { return loadAcquire(inbox_[*peer] + layout_.creditOffset(channel_, *peer)) >= posted_[*peer]; },
               *peer, -1);
      if (rc != 0) return rc;
    }
    return 0;
  }
  T* outSlot(int q) const {
    if (isRemote(q)) return reinterpret_cast<T*>(staging(q, posted_[q]));
    return reinterpret_cast<T*>(windows_[static_cast<size_t>(q)] + layout_.slotOffset(channel_, rank_, posted_[q]));
  }
  void release(int p) {
    const uint64_t seq = consumed_[p]++;
    if (isRemote(p)) {
      remote_.windows->put(p, nullptr, 0, 0, layout_.creditOffset(channel_, rank_), seq + 1, &creditOp(p, seq));
      return;
    }
    storeRelease(windows_[static_cast<size_t>(p)] + layout_.creditOffset(channel_, rank_), seq + 1);
  }
  void post(int q, uint64_t n) {
    const uint64_t seq = posted_[q]++;
    if (isRemote(q)) {
      remote_.windows->put(q, staging(q, seq), n * sizeof(T), layout_.slotOffset(channel_, rank_, seq),
                           layout_.readyOffset(channel_, rank_), seq + 1, &sendOp(q, seq));
      return;
    }
    // Signed for the receiver's call check (sameCall), published by the ready store as the source word is.
    __atomic_store_n(
        reinterpret_cast<uint64_t*>(windows_[static_cast<size_t>(q)] + layout_.signatureOffset(channel_, rank_, seq)),
        call_.mine, __ATOMIC_RELAXED);
    uint64_t inPlace = 0;
    if (inProcess_[static_cast<size_t>(q)]) {
      __atomic_store_n(
          reinterpret_cast<uint64_t*>(windows_[static_cast<size_t>(q)] + layout_.sourceOffset(channel_, rank_, seq)),
          static_cast<uint64_t>(reinterpret_cast<uintptr_t>(exposed_)), __ATOMIC_RELAXED);
      // From the first slice handed over in place, every post of this call to q says so (protocol.h, "Giving up").
      if (givingUp(q) && exposed_ != nullptr) giving_.state[q] |= kExposedTo;
      if (givingUp(q) && (giving_.state[q] & kExposedTo) != 0) inPlace = kFlagInPlace;
      exposed_ = nullptr;
    }
    // A proxy sends only the bytes posted (as the kernels record them), published by the ready store.
    if (sliceBytes_ != nullptr)
      sliceBytes_[layout_.connection(channel_, q) * layout_.nslots + seq % layout_.nslots] = n * sizeof(T);
    storeRelease(windows_[static_cast<size_t>(q)] + layout_.readyOffset(channel_, rank_), (seq + 1) | inPlace);
  }

  void copy(T* dst, const T* src, uint64_t n, int divisor) const { copyElements(dst, src, n, divisor); }
  void reduce(T* dst, const T* a, const T* b, uint64_t n, int divisor) const {
    reduceElements<T, Op>(dst, a, b, n, divisor);
  }
  void copy2(T* dst1, T* dst2, const T* src, uint64_t n, int divisor) const {
    if (n > 0) memcpy(dst1, src, n * sizeof(T));  // as in copyElements: no null pointer to memcpy
    copyElements(dst2, src, n, divisor);          // skips dst2 == src without a divisor (in place)
  }
  void reduce2(T* dst1, T* dst2, const T* a, const T* b, uint64_t n, int divisor) const {
    reduceElements<T, Op>(dst2, a, b, n, divisor);
    if (n > 0) memcpy(dst1, dst2, n * sizeof(T));  // a slice, still in cache: cheaper than reducing twice
  }
  // In blocks that stay in cache, each reduced from every input before the next one: dst and base pass
  // through memory once per group of joined steps, as on the GPU (kernels/device_prims.cuh), and the operands
  // go in the order of the steps' own reduce calls, so the same values.
  void reduceMany(T* dst, const T* base, const T* const* ins, int m, uint64_t n, int divisor) const {
    constexpr uint64_t kBlock = 8192 / sizeof(T);
    for (uint64_t o = 0; o < n; o += kBlock) {
      const uint64_t k = n - o < kBlock ? n - o : kBlock;
      const T* acc = base + o;
      for (int j = 0; j < m; ++j) {
        reduceElements<T, Op>(dst + o, ins[j] + o, acc, k, j == m - 1 ? divisor : 0);
        acc = dst + o;
      }
    }
  }
  void localDone() const {}    // one thread: nothing to order
  void stepDone(int) const {}  // only the kernels time their steps

  /// After a failure, as the kernels' DevicePrims::giveUp (protocol.h, "Giving up"): tells each peer of this
  /// process that we read nothing more of what it posted, withdraws what we posted to it, and waits (up to
  /// COLLIE_TIMEOUT, whatever the abort flag says) for every peer that may be reading one of this call's slices
  /// in place to credit it or give up in turn: the caller may free its buffers the moment we return.
  void giveUp() const {
    const int n = static_cast<int>(windows_.size());
    for (int p = 0; p < n; ++p)
      if (givingUp(p))
        storeRelease(windows_[static_cast<size_t>(p)] + layout_.creditOffset(channel_, rank_),
                     consumed_[p] | kFlagWithdrawn);
    for (int q = 0; q < n; ++q)
      if (givingUp(q))
        storeRelease(windows_[static_cast<size_t>(q)] + layout_.readyOffset(channel_, rank_),
                     posted_[q] | kFlagWithdrawn);
    fenceSeqCst();
    using Clock = std::chrono::steady_clock;
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeoutSec_));
    for (int q = 0; q < n; ++q) {
      if (!givingUp(q) || loadAcquire(inbox_[q] + layout_.readingOffset(channel_, q)) <= giving_.postedBefore[q])
        continue;
      const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
      (void)waitFor(
          [&] {
            const uint64_t credit = loadAcquire(inbox_[q] + layout_.creditOffset(channel_, q));
            return (credit & kFlagWithdrawn) != 0 || credit >= posted_[q];
          },
          spins_, nullptr, left > 0 ? left : 0, [] { return false; });
    }
  }
  /// Whether `peer` gave up first: withdrew what it posted to us, or reads nothing more of ours.
  bool gaveUp(int peer) const { return peer >= 0 && givingUp(peer) && (giving_.state[peer] & kGone) != 0; }
  /// Whether `peer` failed a call for any other reason (its window's kFailedOffset, as the kernels mark theirs):
  /// it runs nothing more, so a wait on it fails at once. Without it, a rank waiting on one that waits on a dead
  /// process (or had timed out) waited out its own COLLIE_TIMEOUT.
  bool markedFailed(int peer) const { return peer != rank_ && marked(peer, kFailedOffset); }

 private:
  bool isRemote(int peer) const { return windows_[static_cast<size_t>(peer)] == nullptr; }
  // GivingUp::state bits.
  static constexpr uint8_t kExposedTo = 1, kMarked = 2, kGone = 4;
  // Whether the giving-up protocol runs with `peer`: a rank of this process, while sends may be read in place.
  bool givingUp(int peer) const {
    return giving_.state != nullptr && peer != rank_ && inProcess_[static_cast<size_t>(peer)];
  }
  // Whether p's next slice may be taken, its ready counter being `v` (at `ready`): never once p withdrew; and the
  // first one taken while p's counter says kFlagInPlace only after our mark, a fence, and one more look.
  bool mayTake(int p, uint64_t v, const uint8_t* ready) const {
    uint8_t& st = giving_.state[p];
    if ((v & kFlagWithdrawn) != 0) st |= kGone;
    if ((st & kGone) != 0 || !sliceReady(consumed_[p], v & kFlagCount)) return false;
    if ((v & kFlagInPlace) == 0 || (st & kMarked) != 0) return true;
    st |= kMarked;
    storeRelease(windows_[static_cast<size_t>(p)] + layout_.readingOffset(channel_, rank_), consumed_[p] + 1);
    fenceSeqCst();
    if ((loadAcquire(ready) & kFlagWithdrawn) == 0) return true;
    st |= kGone;
    return false;
  }
  size_t remoteSlot(int peer, uint64_t seq) const {
    const size_t conn = static_cast<size_t>(channel_) * static_cast<size_t>(remote_.count) +
                        static_cast<size_t>(remote_.index[static_cast<size_t>(peer)]);
    return conn * layout_.nslots + seq % layout_.nslots;
  }
  uint8_t* staging(int peer, uint64_t seq) const { return remote_.staging + remoteSlot(peer, seq) * layout_.slotBytes; }
  RemoteWindows::Op& sendOp(int peer, uint64_t seq) const { return remote_.sendOps[remoteSlot(peer, seq)]; }
  RemoteWindows::Op& creditOp(int peer, uint64_t seq) const { return remote_.creditOps[remoteSlot(peer, seq)]; }
  bool opIdle(const RemoteWindows::Op& op) const {
    if (remote_.windows->idle(op)) return true;
    remote_.windows->progress();
    return remote_.windows->idle(op);
  }
  bool lost(int peer) const { return peer >= 0 && isRemote(peer) && remote_.windows->failed(peer); }
  // A peer known dead: its process of this machine is gone, or the proxy lost it.
  bool exited(int peer) const {
    if (peer >= 0 && lost_ != nullptr && __atomic_load_n(lost_ + peer, __ATOMIC_ACQUIRE) != 0) return true;
    return peer >= 0 && static_cast<size_t>(peer) < pids_.size() && processGone(pids_[static_cast<size_t>(peer)]);
  }
  // Before a slice of p's is read: it belongs to our call, or to a call that is not compared (ours or its is a
  // send/receive, or p does not sign). Its signature was written before its ready flag, which arrived() has
  // acquired. Else the slice is not taken, and every wait fails at once.
  bool sameCall(int p) const {
    if (call_.mine == kPointToPoint) return true;
    const uint64_t theirs = __atomic_load_n(
        reinterpret_cast<const uint64_t*>(inbox_[p] + layout_.signatureOffset(channel_, p, consumed_[p])),
        __ATOMIC_RELAXED);
    if (theirs == 0 || theirs == call_.mine) return true;
    call_.peer = p;
    call_.theirs = theirs;
    return false;
  }
  // A peer that refused a call (kRefusedOffset) is as good as gone, for this call and every later one.
  template <typename Ready>
  int wait(Ready ready, int a, int b) const {
    const int rc = waitPlain([&] { return ready() || call_.peer >= 0; }, a, b);
    if (call_.peer >= 0) return collieInvalidUsage;
    for (int peer : {a, b}) {
      if (rc != collieRemoteError || !refused(peer)) continue;
      call_.peer = peer;
      call_.theirs = 0;
      return collieInvalidUsage;
    }
    return rc;
  }
  bool refused(int peer) const { return marked(peer, kRefusedOffset); }
  bool marked(int peer, uint64_t offset) const {
    const uint8_t* w = peer >= 0 ? call_.windows[static_cast<size_t>(peer)] : nullptr;
    return w != nullptr && __atomic_load_n(reinterpret_cast<const uint64_t*>(w + offset), __ATOMIC_RELAXED) != 0;
  }
  template <typename Ready>
  int waitPlain(Ready ready, int a, int b) const {
    RemoteWindows* w = remote_.windows;
    const auto died = [&] {
      return exited(a) || exited(b) || refused(a) || refused(b) || gaveUp(a) || gaveUp(b) || markedFailed(a) ||
             markedFailed(b);
    };
    if (w == nullptr) return waitFor(ready, spins_, abort_, timeoutSec_, died);
    bool gone = false;
    const int rc = waitFor(
        [&] {
          w->progress();
          if (ready()) return true;
          gone = lost(a) || lost(b);
          return gone;
        },
        spins_, abort_, timeoutSec_, died);
    return rc == collieSuccess && gone ? collieRemoteError : rc;
  }

  int rank_;
  int channel_;
  const WindowLayout& layout_;
  const std::vector<uint8_t*>& windows_;
  uint8_t* const* inbox_;  // [peer]: where its slices and flags for us land
  uint64_t* sliceBytes_;
  const uint32_t* lost_;
  uint64_t* posted_;
  uint64_t* consumed_;
  const std::atomic<bool>* abort_;
  double timeoutSec_;
  int spins_;
  const HostExecutor::Remote& remote_;
  const std::vector<int>& pids_;
  const std::vector<bool>& inProcess_;  // [peer]: a rank of this process, which may read our slices in place
  HostExecutor::CallCheck& call_;
  HostExecutor::GivingUp giving_;
  const T* exposed_ = nullptr;  // what the next post hands over in place, if anything
};

template <typename T, ReduceOp Op>
Status HostExecutor::runTyped(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  uint64_t scratchCount = 0;
  for (const ChannelWork& w : work) scratchCount = std::max(scratchCount, w.program->scratchCount);
  if (scratch_.size() < scratchCount * sizeof(T)) scratch_.resize(scratchCount * sizeof(T));
  // What every slice of this call carries (executor/protocol.h, signature[][][]).
  callCheck_.mine = args.callSignature != 0 ? args.callSignature : kPointToPoint;
  callCheck_.peer = -1;
  // Channels run one after another: each is a complete pipeline of its own,
  // so every rank taking them in the same order cannot deadlock. Several
  // channels on the host exist to test the GPU's channel plan on the CPU.
  const int nch = args.splitSteps ? static_cast<int>(layout_.nchannels) : static_cast<int>(work.size());
  StepFailure f;
  const Program* failed = nullptr;
  bool peerGaveUp = false;  // the peer waited on had given up first (HostPrims::gaveUp)
  for (int c = 0; c < nch && f.code == collieSuccess; ++c) {
    const ChannelWork& w = work[args.splitSteps ? 0 : static_cast<size_t>(c)];
    T* const bufs[3] = {args.input ? static_cast<T*>(const_cast<void*>(args.input)) + w.offset : nullptr,
                        args.output ? static_cast<T*>(args.output) + w.offset : nullptr,
                        reinterpret_cast<T*>(scratch_.data())};
    const size_t at = static_cast<size_t>(c) * layout_.nranks;
    HostExecutor::GivingUp giving;
    if (directMinBytes_ >= 0) {
      // The channel's giving-up state starts afresh with each call (protocol.h, "Giving up").
      std::fill(givingState_.begin(), givingState_.end(), 0);
      std::copy(posted_.begin() + static_cast<ptrdiff_t>(at),
                posted_.begin() + static_cast<ptrdiff_t>(at + layout_.nranks), postedBefore_.begin());
      giving = HostExecutor::GivingUp{givingState_.data(), postedBefore_.data()};
    }
    HostPrims<T, Op> prims(rank_, c, layout_, windows_, posted_.data() + at, consumed_.data() + at, abort_, timeoutSec_,
                           spinPolls_, remote_, peerPids_, inbound_, inProcess_, callCheck_, giving);
    DirectSteps direct;
    void* const raw[3] = {bufs[0], bufs[1], bufs[2]};
    if (directMinBytes_ >= 0 &&
        markDirectSends(*w.program, raw, sizeof(T), args.divisor, inProcess_, static_cast<uint64_t>(directMinBytes_),
                        &directMarks_, !args.splitSteps))
      direct.marks = directMarks_.data();
    f = runSteps<T>(prims, w.program->steps.data(), static_cast<int>(w.program->steps.size()), bufs,
                    layout_.slotBytes / sizeof(T), args.divisor, args.splitSteps ? c : 0, args.splitSteps ? nch : 1,
                    16 / sizeof(T), direct);
    // Peers read what this channel handed over in place until they credit it; the next channel's steps, or
    // the caller once we return, may write there.
    if (f.code == collieSuccess && direct.marks != nullptr) {
      int peer = -1;
      f.code = prims.drain(&peer);
      if (f.code != collieSuccess) {
        f.step = static_cast<int>(w.program->steps.size());
        f.peer = peer;
      }
    }
    if (f.code != collieSuccess) {
      peerGaveUp = prims.gaveUp(f.peer) || (f.code == collieRemoteError && prims.markedFailed(f.peer));
      // A call refused (a peer's slice of another call, or a peer that refused first): nothing more runs here,
      // and the peers waiting on us stop too. Before giveUp's withdrawal, which a peer acquires before it looks
      // for this mark (HostPrims::wait): marked after it, a peer could see the withdrawal alone and report a
      // remote error instead of the refusal.
      // Any other failure marks the word beside it, so that ranks waiting on this one stop at once too.
      const bool refusal = f.code == collieInvalidUsage && callCheck_.peer >= 0;
      __atomic_store_n(reinterpret_cast<uint64_t*>(windows_[static_cast<size_t>(rank_)] +
                                                   (refusal ? kRefusedOffset : kFailedOffset)),
                       uint64_t{1}, __ATOMIC_RELAXED);
      prims.giveUp();
    }
    failed = w.program;
  }
  const Program& program = *failed;
  RemoteWindows* const remote = remote_.windows;
  if (f.code == collieSuccess && remote != nullptr) {
    // Peers on other hosts may wait for our last flags, which move only while
    // we call into the transport. A peer lost by now does not fail this call:
    // it may just have finished first and gone.
    f.code = waitFor(
        [&] {
          remote->progress();
          return remote->quiet();
        },
        spinPolls_, abort_, timeoutSec_, [] { return false; });
    if (f.code != collieSuccess) f.step = static_cast<int>(program.steps.size());
  }
  if (f.code == collieSuccess) return Status();
  const collieResult_t code = static_cast<collieResult_t>(f.code);
  if (code == collieInvalidUsage && callCheck_.peer >= 0) {
    const std::string name = program.algorithm + " " + collectiveName(program.collective);
    return Status::error(
        code, "%s",
        callMismatch(rank_, callCheck_.peer, callCheck_.theirs, args.callSignature, args.collectiveSeq, name).c_str());
  }
  // The reason a remote peer was lost: the one waited on first, else any (it may be why we waited in vain).
  std::string why;
  const auto remoteFailure = [&](int r) {
    if (inbound_.proxy != nullptr && r >= 0) return inbound_.proxy->failure(r);
    return remote != nullptr && r >= 0 && windows_[static_cast<size_t>(r)] == nullptr ? remote->failure(r)
                                                                                      : std::string();
  };
  why = remoteFailure(f.peer);
  if (why.empty() && peerGaveUp)
    why = "rank " + std::to_string(f.peer) + " had given up this call first (its own error says why)";
  for (int r = 0; why.empty() && r < static_cast<int>(windows_.size()); ++r) why = remoteFailure(r);
  for (int r = 0; why.empty() && r < static_cast<int>(peerPids_.size()); ++r)
    if (code == collieRemoteError && processGone(peerPids_[static_cast<size_t>(r)]))
      why = "rank " + std::to_string(r) + " (pid " + std::to_string(peerPids_[static_cast<size_t>(r)]) + ") exited";
  char timedOut[64];
  snprintf(timedOut, sizeof(timedOut), "timed out after %.1f s", timeoutSec_);
  const char* what = code == collieTimeout ? timedOut : !why.empty() ? "failed" : "was aborted";
  if (!why.empty()) why = ": " + why;
  const std::string on = f.peer >= 0 ? "on rank " + std::to_string(f.peer) : "on peers on other hosts";
  Status st = Status::error(code, "rank %d waiting %s at step %d of %s %s #%llu %s%s", rank_, on.c_str(), f.step,
                            program.algorithm.c_str(), collectiveName(program.collective),
                            static_cast<unsigned long long>(args.seq), what, why.c_str());
  return st;  // logged once, with the call's name, where the C API reports it (core/errors.cc)
}

Status HostExecutor::run(const std::vector<ChannelWork>& work, const ExecArgs& args) {
  if (work.empty()) return Status();
  COLLIE_RETURN_IF_ERROR(refuseDirectSteps(work, "host"));
  Status st;
  bool ran = false;  // the error sentence is made only when needed: this is every call's path
  visitType(args.type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    visitOp(args.op, [&](auto op) {
      st = runTyped<T, decltype(op)::value>(work, args);
      ran = true;
    });
  });
  if (!ran)
    return Status::error(collieInvalidArgument, "unknown data type %d or operator", static_cast<int>(args.type));
  return st;
}

}  // namespace collie
